"""A local cluster serving TLS with client certificates required (`samsa up --tls`), end to end.

Goal: with TLS on, everything a user does still works and nothing gets in without a certificate:
the installed `samsa` command finds the cluster and its client certificate in --data-dir's
cluster.json alone, and creates a topic, produces and consumes through it, in a consumer group
too (coordinator and __consumer_offsets over TLS); replication works between brokers over TLS
(acks=all with min.insync.replicas=2 needs both brokers in the ISR); a plaintext call to a
broker's gRPC listener gets no answer; a client trusting the cluster's CA but presenting no
certificate is refused, by gRPC and by the `samsa` command (one line, exit 1).

Method: 1 controller, 2 brokers and 1 coordinator started by the launcher with tls=True (real
processes, stopped by PID also on failure); the `samsa` script installed next to this Python,
run as a subprocess with only --data-dir (SAMSA_BOOTSTRAP unset); the SDK with the cluster's
client settings (spec.client_security) for replication; raw gRPC channels for the refusals.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster, wait_until

from samsa.cli import health
from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, Producer
from samsa.common.tls import TlsSettings
from samsa.v1 import controller_pb2, controller_pb2_grpc

pytestmark = pytest.mark.timeout(240)

SAMSA = Path(sys.executable).with_name("samsa")
RECORDS = 40


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("tls-cluster")
    with local_cluster(data_dir, 1, 2, coordinators=1, tls=True) as running:
        yield running


def samsa(cluster: LocalCluster, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The installed `samsa` with the cluster's --data-dir and nothing else to find it by."""
    environ = {k: v for k, v in os.environ.items() if k != "SAMSA_BOOTSTRAP"}
    return subprocess.run(
        [str(SAMSA), *args, "--data-dir", str(cluster.data_dir)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )


def test_the_cli_creates_produces_and_consumes_over_tls(cluster: LocalCluster) -> None:
    created = samsa(
        cluster, "topics", "create", "tls-clicks", "--partitions", "2", "--replication-factor", "2"
    )
    assert created.returncode == 0, created.stderr
    lines = [f"click {n}" for n in range(RECORDS)]
    produced = samsa(
        cluster,
        "produce",
        "tls-clicks",
        "--producer-property",
        "acks=all",
        stdin="".join(f"{line}\n" for line in lines),
    )
    assert produced.returncode == 0, produced.stderr
    consumed = samsa(
        cluster, "consume", "tls-clicks", "--from-beginning", "--max-messages", str(RECORDS)
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(lines)
    # in a group: the coordinator, and its __consumer_offsets on the brokers, over TLS
    grouped = samsa(
        cluster,
        "consume",
        "tls-clicks",
        "--group",
        "tls-readers",
        "--from-beginning",
        "--max-messages",
        str(RECORDS),
    )
    assert grouped.returncode == 0, grouped.stderr
    assert sorted(grouped.stdout.splitlines()) == sorted(lines)
    lag = samsa(cluster, "groups", "lag", "tls-readers")
    assert lag.returncode == 0, lag.stderr
    assert "tls-clicks" in lag.stdout


def test_replication_works_over_tls(cluster: LocalCluster) -> None:
    config = {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        **cluster.spec.client_security(cluster.data_dir),
    }
    with Admin(config) as admin:
        admin.create_topic("tls-replicated", 1, 2, {"min.insync.replicas": "2"})

        def both_in_sync() -> bool:
            partition = admin.describe_topics(["tls-replicated"])["tls-replicated"].partitions[0]
            return sorted(partition.isr) == [1, 2]

        wait_until("both brokers in the ISR", both_in_sync)
    with Producer({**config, "acks": "all"}) as producer:
        futures = [producer.send("tls-replicated", b"r%d" % n) for n in range(RECORDS)]
        producer.flush(60)
    # acks=all under min.insync.replicas=2: each write reached the follower, over TLS
    assert [future.result(timeout=0).offset for future in futures] == list(range(RECORDS))


def test_a_plaintext_call_to_a_broker_gets_no_answer(cluster: LocalCluster) -> None:
    broker = cluster.spec.brokers[0].endpoint
    assert health.check(broker, timeout_s=5) == f"{broker}: UNAVAILABLE"
    security = TlsSettings.from_client_config(cluster.spec.client_security(cluster.data_dir))
    assert health.check(broker, timeout_s=5, security=security) is None  # it is serving


def test_a_client_without_a_certificate_is_refused(cluster: LocalCluster, tmp_path: Path) -> None:
    ca = cluster.data_dir / "tls" / "ca.pem"
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
    with grpc.secure_channel(cluster.spec.controllers[0].endpoint, credentials) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    properties = tmp_path / "ca-only.properties"
    properties.write_text(f"security.protocol=SSL\nssl.ca.location={ca}\n")
    listed = samsa(cluster, "topics", "list", "--command-config", str(properties))
    assert listed.returncode == 1
    assert listed.stderr.startswith("samsa: cannot reach the cluster at 127.0.0.1:")
    assert listed.stderr.strip().endswith("(the CA, a client certificate it signed)")
    assert len(listed.stderr.strip().splitlines()) == 1
