"""Goal: user quotas (KIP-55) hold real clients by who their TLS certificate says they are, not
by the client.id they choose: a producer_byte_rate set for user CN=alice,O=samsa throttles
alice's producer (its answers carry throttle_time_ms > 0, and it produces at most about the
quota), bob's producer with the very same client.id is not throttled, and a (user, client.id)
quota for alice's client.id "etl" wins over her user quota, as Kafka's order says. `samsa
quotas --user` sets and describes them in Kafka's words. No authorizer: a broker reads the user
from the TLS session with ACLs off as well.

Method: 1 controller, 1 broker serving TLS with client certificates required (real processes,
killed by PID on the way out). Alice's and bob's certificates come from the cluster's CA
(cluster_tls.issue_client, subject CN=<name>,O=samsa, DEFAULT mapping: the user is the whole
subject). The quotas are set with the installed `samsa` (only --data-dir to find the cluster),
then read back through the broker until it answers from an image that has them. Each producer
(acks=1) sends ~1 MB to one partition; the throttle_time_ms of every answer the SDK gets is
recorded by wrapping the producer's answer handler. The rate is bounded one way only, at 1.6x
the quota: a slow machine only lowers it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_cluster import as_client, super_user
from cluster_helpers import local_cluster, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, Producer, QuotaEntity
from samsa.client.produce_sender import ProduceSender

pytestmark = pytest.mark.timeout(300)

SAMSA = Path(sys.executable).with_name("samsa")
TOPIC = "user-quota-bound"
QUOTA = 262_144  # bytes per second
RECORD = b"u" * 8_000
RECORDS = 130  # ~1 MB: about four seconds of QUOTA
RATE_FACTOR_MAX = 1.6
ALICE = "CN=alice,O=samsa"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("user-quotas"), 1, 1, tls=True) as running:
        with Admin(super_user(running)) as admin:
            admin.create_topic(TOPIC, num_partitions=1, replication_factor=1)
        yield running


def samsa(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `samsa` with the cluster's --data-dir and nothing else to find it by."""
    environ = {k: v for k, v in os.environ.items() if k != "SAMSA_BOOTSTRAP"}
    return subprocess.run(
        [str(SAMSA), *args, "--data-dir", str(cluster.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )


def produce_throttles(
    cluster: LocalCluster, user: str, client_id: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], float]:
    """Send RECORDS records as `user`'s certificate with `client_id`: every answer's
    throttle_time_ms, and the bytes per second from the first send to the last ack."""
    seen: list[int] = []
    on_response = ProduceSender._on_response

    def record(self, response, error, by_partition):  # type: ignore[no-untyped-def]
        if response is not None:
            seen.append(response.throttle_time_ms)
        return on_response(self, response, error, by_partition)

    monkeypatch.setattr(ProduceSender, "_on_response", record)
    config = {**as_client(cluster, user), "client.id": client_id, "acks": "1"}
    with Producer(config) as producer:
        producer.send(TOPIC, b"warm-up", partition=0).result(timeout=30)
        started = time.monotonic()
        futures = [producer.send(TOPIC, RECORD, partition=0) for _ in range(RECORDS)]
        producer.flush(90)
        for future in futures:
            future.result(timeout=0)
        elapsed_s = time.monotonic() - started
    monkeypatch.setattr(ProduceSender, "_on_response", on_response)
    return seen, RECORDS * len(RECORD) / elapsed_s


def test_a_user_quota_follows_the_certificate_and_a_pair_quota_wins_over_it(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    for entity_flags, value in (
        (["--user", ALICE], QUOTA),
        (["--user", ALICE, "--client-id", "etl"], 10**9),
    ):
        altered = samsa(
            cluster, "quotas", "--alter", *entity_flags, "--add", f"producer_byte_rate={value}"
        )
        assert altered.returncode == 0, altered.stderr
    described = samsa(cluster, "quotas", "--describe")
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines() == [
        f"Quota configs for user-principal '{ALICE}' are producer_byte_rate={float(QUOTA)}",
        f"Quota configs for user-principal '{ALICE}', client-id 'etl' are "
        f"producer_byte_rate={float(10**9)}",
    ]
    broker = {"bootstrap.servers": cluster.spec.brokers[0].endpoint}
    with Admin({**super_user(cluster), **broker}) as admin:  # the broker's own image
        wait_until(
            "the broker to apply alice's quotas",
            lambda: (
                len(admin.describe_client_quotas(user=ALICE)) == 1
                and len(admin.describe_client_quotas("etl", user=ALICE)) == 1
            ),
        )
        assert admin.describe_client_quotas(user=ALICE) == {
            QuotaEntity(ALICE): {"producer_byte_rate": QUOTA}
        }

    alice, rate = produce_throttles(cluster, "alice", "shared-id", monkeypatch)
    print(f"alice produced {rate:.0f} B/s ({rate / QUOTA:.2f}x her quota)")
    assert max(alice) > 0, alice
    assert rate <= RATE_FACTOR_MAX * QUOTA, f"alice produced at {rate:.0f} B/s"

    bob, _ = produce_throttles(cluster, "bob", "shared-id", monkeypatch)
    assert bob and set(bob) == {0}, f"bob, same client.id, is throttled: {bob}"

    etl, _ = produce_throttles(cluster, "alice", "etl", monkeypatch)
    assert etl and set(etl) == {0}, f"alice's etl pair quota did not win: {etl}"

    removed = samsa(cluster, "quotas", "--alter", "--user", ALICE, "--delete", "producer_byte_rate")
    assert removed.returncode == 0, removed.stderr
    assert "Completed updating quotas for user-principal" in removed.stdout
