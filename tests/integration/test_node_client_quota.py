"""Goal: brokers hold the Node client to the client quotas of its id: with a producer_byte_rate
quota set (from Python's Admin) for the clientId a SamsaClient was given, or for the default id
it takes without one ("samsa-node-1", the first SamsaClient of its process), its produce
answers carry throttle_time_ms > 0 once it has sent more than the quota allows. Without the
samsa-client-id metadata the broker would count it under the default entity, which has no
quota here: every answer would carry 0.

Method: 1 controller, 1 broker (real processes, killed by PID on the way out). The quota is set
with the SDK's Admin and read back through the broker until the broker applied it. A Node
script (clients/node/samsa.js) then sends three ~400 KB produces (acks=1), each well over one
second of the quota, and prints the throttle_time_ms of every Produce answer it got (observed by
wrapping SamsaClient.call, which every broker call goes through). The check is one-sided: some
answer throttled; nothing is timed. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until
from node_helpers import node_script, skip_module_without_node

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, QuotaEntity

skip_module_without_node()
pytestmark = pytest.mark.timeout(180)

QUOTA = 262_144  # bytes per second
CALLS = 3  # produces of RECORDS records of RECORD_BYTES each: ~400 KB a call
RECORDS = 50
RECORD_BYTES = 8_000

PRODUCE = """
const seen = [];
const call = client.call.bind(client);
client.call = async (kind, endpoint, method, request, timeoutMs) => {
  const answer = await call(kind, endpoint, method, request, timeoutMs);
  if (method === 'Produce') seen.push(answer.throttle_time_ms);
  return answer;
};
const records = Array.from({ length: data.records }, () => ({ value: 'q'.repeat(data.bytes) }));
for (let n = 0; n < data.calls; n++) await client.produce(topic, 0, records, 1);
return { clientId: client.clientId, throttles: seen };
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("node-quota"), 1, 1, FAST_SETTINGS) as running:
        yield running


def set_producer_quota(admin: Admin, client_id: str) -> None:
    """Set the quota and wait until the broker answers from an image that has it."""
    admin.alter_client_quotas({client_id: {"producer_byte_rate": QUOTA}})
    wait_until(
        f"the broker to apply the quota of {client_id}",
        lambda: (
            admin.describe_client_quotas(client_id)
            .get(QuotaEntity(client_id=client_id), {})
            .get("producer_byte_rate")
            == QUOTA
        ),
    )


@pytest.mark.parametrize(
    ("options", "client_id"),
    [({"clientId": "node-slow"}, "node-slow"), ({}, "samsa-node-1")],
    ids=["clientId", "default"],
)
def test_the_node_clients_produces_are_throttled_under_its_client_id(
    cluster: LocalCluster, options: dict[str, str], client_id: str
) -> None:
    bootstrap = cluster.spec.brokers[0].endpoint
    topic = f"node-quota-{client_id}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(topic, num_partitions=1, replication_factor=1)
        set_producer_quota(admin, client_id)
    data = {"calls": CALLS, "records": RECORDS, "bytes": RECORD_BYTES}
    out = node_script(bootstrap, topic, PRODUCE, data, 120, idempotence=False, **options)
    assert out["clientId"] == client_id
    assert len(out["throttles"]) >= CALLS, out
    assert max(out["throttles"]) > 0, out
