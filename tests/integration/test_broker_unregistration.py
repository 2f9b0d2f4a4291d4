"""Goal: a broker is retired for good with real processes (KIP-631's UnregisterBroker): refused
while it runs, refused while it still holds replicas once stopped, unregistered once they moved
away, gone from DescribeCluster; and the same id started again registers as a new broker.

Method: 1 controller, 2 brokers, sessions of 3 s (FAST_SETTINGS). Everything goes through the
SDK's Admin bootstrapped from broker 1 alone, so every write is forwarded to the controller
(KIP-590). A topic of 2 partitions, replication factor 2, has a replica on broker 2. Broker 2 is
stopped cleanly (SIGTERM: controlled shutdown); the refusal turns from "heartbeated within the
session timeout" to "still holds replicas" once its session expired. Both partitions are
reassigned to [1] and awaited (list_partition_reassignments empty), then the unregistration
succeeds. Broker 2 started again registers afresh, and the CLI refuses it as running.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.cli.main import main as samsa_main
from samsa.client import Admin
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode

pytestmark = pytest.mark.timeout(300)

TOPIC = "retiring"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("unregister"), 1, 2, FAST_SETTINGS) as running:
        yield running


def broker_endpoint(cluster: LocalCluster, broker_id: int) -> str:
    return next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)


def refusal(admin: Admin, broker_id: int) -> KafkaError:
    with pytest.raises(KafkaError) as refused:
        admin.unregister_broker(broker_id)
    return refused.value


def refused_for_replicas(admin: Admin) -> str | None:
    """The refusal's message once it is about replicas (no longer about a live session)."""
    error = refusal(admin, 2)
    assert error.code == ErrorCode.INVALID_REQUEST, error
    if "heartbeated within the session timeout" in str(error):
        return None  # stopped less than a session ago
    return str(error)


def test_a_broker_is_retired_after_its_replicas_moved_and_its_id_comes_back_new(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    via = broker_endpoint(cluster, 1)
    admin = Admin({"bootstrap.servers": via})
    try:
        admin.create_topic(TOPIC, num_partitions=2, replication_factor=2)
        wait_until(
            f"{TOPIC} in sync on both brokers",
            lambda: all(
                p.leader >= 0 and sorted(p.isr) == [1, 2]
                for p in admin.describe_topics([TOPIC])[TOPIC].partitions
            ),
        )
        error = refusal(admin, 7)
        assert error.code == ErrorCode.BROKER_ID_NOT_REGISTERED and "id 7" in str(error)
        error = refusal(admin, 2)
        assert error.code == ErrorCode.INVALID_REQUEST and "broker 2 is running" in str(error)
        old_epoch = next(b for b in admin.describe_cluster().brokers if b.broker_id == 2)
        old_epoch = old_epoch.broker_epoch

        cluster.kill("broker-2", signal.SIGTERM)  # clean: controlled shutdown, then exit
        assert cluster.processes["broker-2"].returncode == 0
        message = wait_until("broker 2's session to expire", lambda: refused_for_replicas(admin))
        assert f"still holds replicas of 2 partition(s) ({TOPIC}-0, {TOPIC}-1)" in message
        assert "samsa reassign" in message

        admin.alter_partition_reassignments({(TOPIC, 0): [1], (TOPIC, 1): [1]})
        wait_until("the moves to complete", lambda: not admin.list_partition_reassignments())
        partitions = admin.describe_topics([TOPIC])[TOPIC].partitions
        assert [list(p.replicas) for p in partitions] == [[1], [1]]

        admin.unregister_broker(2)
        assert [b.broker_id for b in admin.describe_cluster().brokers] == [1]
        assert cluster.exited() == {}, "broker 1 and the controller took the record in stride"
        error = refusal(admin, 2)
        assert error.code == ErrorCode.BROKER_ID_NOT_REGISTERED, "already unregistered"

        cluster.start("broker-2")
        back = wait_until(
            "broker 2 registered again and unfenced",
            lambda: next(
                (b for b in admin.describe_cluster().brokers if b.broker_id == 2 and not b.fenced),
                None,
            ),
        )
        assert back.broker_epoch > old_epoch, "a new registration, at a later offset"
    finally:
        admin.close()

    capsys.readouterr()
    argv = ["cluster", "unregister", "--id", "2", "--bootstrap-server", via]
    assert samsa_main(argv) == 1, "a live broker is refused"
    assert "broker 2 is running" in capsys.readouterr().err
    assert cluster.exited() == {}
