"""A broker moved to a new CA while it runs keeps its place once its old certificate is refused.

Goal: a broker's long-lived channels (to the controller, to the leader it replicates from)
follow its certificate rotation (service_channels.ChannelCache): after the broker took a
certificate from a new CA, and its peers dropped the old CA from their bundles, a restarted
controller is reconnected to with the new certificate, so the broker learns the metadata the
restarted controller serves, stays unfenced and replicates: a topic created after the restart
takes acks=all writes under min.insync.replicas=2, both brokers in its ISR. Before the holders
dialled again, the broker's reconnection presented the certificate it started with and was
refused: it learnt nothing more, and was fenced.

Method: 1 controller and 2 brokers started by the launcher with TLS and client certificates
required (every process stopped by PID, also on failure), each process given a CA bundle file
of its own. The cluster's CA (P) signs the controller's, broker-2's and the client's
certificates and stays in every bundle; broker-1 starts with a certificate from CA A. Steps,
each file written beside and renamed over, each waited for in the processes' logs (a
process looks at its files when a connection arrives: the probe connects to each): every bundle
gets CA B (P + A + B); broker-1's certificate and key are replaced by ones from CA B; the
controller's and broker-2's bundles drop A (P + B); the controller is stopped with SIGTERM and
started again on its data directory. The client trusts P + A + B.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, close_channels, wait_until
from cryptography import x509

from samsa.cli import health
from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.cli.cluster_spec import tls_pair
from samsa.cli.launcher import LocalCluster, cluster_health, load_or_create, wait_healthy
from samsa.client import Admin, Producer
from samsa.common import tls

pytestmark = pytest.mark.timeout(300)

BROKER = "broker-1"  # the broker whose certificate moves to CA B
PEERS = ["controller-1", "broker-2"]
HOSTS = ["127.0.0.1", "localhost"]  # what the launcher's certificates name
TOOK = "took the rotated TLS files"


class OwnBundles(LocalCluster):
    """The launcher's cluster, each process trusting the CA bundle `bundle(name)` names."""

    def commands(self) -> dict[str, list[str]]:
        commands = super().commands()
        for name, command in commands.items():
            command[command.index("--ssl-ca-location") + 1] = str(bundle(self.data_dir, name))
        return commands


def bundle(data_dir: Path, name: str) -> Path:
    return data_dir / "tls" / f"{name}-bundle.pem"


def replace(target: Path, data: bytes) -> None:
    """Write beside, rename over: the process reads the old file or the new one, never half."""
    beside = target.with_name(target.name + ".new")
    beside.write_bytes(data)
    os.replace(beside, target)


def took(cluster: LocalCluster, name: str) -> list[str]:
    """What process `name` logged of each TLS file set it took."""
    path = cluster.data_dir / "logs" / f"{name}.log"
    found = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            message = str(json.loads(line).get("msg", ""))
        except (ValueError, AttributeError):
            continue
        if message.startswith(TOOK):
            found.append(message)
    return found


def wait_taken(
    cluster: LocalCluster, counts: dict[str, int], what: str, client: dict[str, str]
) -> None:
    """Until each process named in `counts` logged that many taken sets (at least). A process
    looks at its files when a connection arrives (or it uses a channel): each look connects to
    every process anew, so that the wait does not rest on the processes' own traffic."""
    security = tls.TlsSettings.from_client_config(client)
    spec = cluster.spec
    endpoints = [c.endpoint for c in spec.controllers] + [b.endpoint for b in spec.brokers]

    def taken() -> bool:
        for endpoint in endpoints:
            health.check(endpoint, timeout_s=5, security=security)  # a new connection
        return all(len(took(cluster, name)) >= count for name, count in counts.items())

    wait_until(what, taken)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[OwnBundles]:
    data_dir = tmp_path / "cluster"
    spec = load_or_create(data_dir, 1, 2, FAST_SETTINGS, tls=True)
    running = OwnBundles(spec, data_dir)  # the cluster's CA and certificates are made here
    try:
        yield running
    finally:
        close_channels()
        running.stop_all()


def test_a_broker_moved_to_a_new_ca_stays_in_after_its_old_ca_is_dropped_and_a_restart(
    cluster: OwnBundles, tmp_path: Path
) -> None:
    data_dir = cluster.data_dir
    cluster_ca = tls_pair(data_dir, "ca")[0].read_bytes()
    ca_a = create_ca(tmp_path / "ca-a", "samsa-ca-a")
    ca_b = create_ca(tmp_path / "ca-b", "samsa-ca-b")
    a, b = ca_a.certificate.read_bytes(), ca_b.certificate.read_bytes()
    live = KeyPair(*tls_pair(data_dir, BROKER))
    old = issue(ca_a, tmp_path / "ca-a", BROKER, HOSTS)
    replace(live.key, old.key.read_bytes())
    replace(live.certificate, old.certificate.read_bytes())
    for name in [BROKER, *PEERS]:
        replace(bundle(data_dir, name), cluster_ca + a)
    client_bundle = data_dir / "tls" / "client-bundle.pem"
    replace(client_bundle, cluster_ca + a + b)
    config = {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        **cluster.spec.client_security(data_dir),
        tls.CA_LOCATION: str(client_bundle),
    }
    cluster.start_all()
    wait_healthy(cluster, timeout_s=60)
    with Admin(config) as admin:
        admin.create_topic("before", 1, 2, {"min.insync.replicas": "2"})
        wait_until("both brokers in the ISR", lambda: isr(admin, "before") == [1, 2])
    produce(config, "before")

    # The move to CA B: every bundle trusts it, then broker-1 takes a certificate it signed.
    for name in [BROKER, *PEERS]:
        replace(bundle(data_dir, name), cluster_ca + a + b)
    every = [BROKER, *PEERS]
    wait_taken(cluster, dict.fromkeys(every, 1), "every process took the bundle with CA B", config)
    new = issue(ca_b, tmp_path / "ca-b", BROKER, HOSTS)
    replace(live.key, new.key.read_bytes())
    replace(live.certificate, new.certificate.read_bytes())
    wait_taken(cluster, {BROKER: 2}, "broker-1 took its certificate from CA B", config)
    new_serial = f"serial {serial_of(new.certificate):x}"
    assert new_serial in took(cluster, BROKER)[-1]
    # Its peers drop CA A: broker-1's first certificate is refused from now on.
    for name in PEERS:
        replace(bundle(data_dir, name), cluster_ca + b)
    wait_taken(cluster, dict.fromkeys(PEERS, 2), "the controller and broker-2 dropped CA A", config)
    produce(config, "before")  # replication still goes on

    cluster.kill("controller-1", signal.SIGTERM)
    cluster.start("controller-1")
    wait_healthy(cluster, timeout_s=60)
    with Admin(config) as admin:
        # Only a broker that reached the restarted controller learns of this topic: with
        # min.insync.replicas=2, acks=all writes to it need broker-1 whichever broker leads.
        admin.create_topic("after", 1, 2, {"min.insync.replicas": "2"})
        wait_until("both brokers in the new topic's ISR", lambda: isr(admin, "after") == [1, 2])
    produce(config, "after")
    healthy, missing = cluster_health(cluster.spec, data_dir)
    assert healthy, missing  # broker-1 registered and unfenced at the restarted controller
    assert cluster.exited() == {}


def isr(admin: Admin, topic: str) -> list[int]:
    return sorted(admin.describe_topics([topic])[topic].partitions[0].isr)


def produce(config: dict[str, str], topic: str) -> None:
    """Ten acks=all writes to `topic`, each acknowledged."""
    with Producer({**config, "acks": "all"}) as producer:
        futures = [producer.send(topic, b"r%d" % n) for n in range(10)]
        producer.flush(60)
    assert all(future.result(timeout=0).offset >= 0 for future in futures)


def serial_of(pem_file: Path) -> int:
    return x509.load_pem_x509_certificate(pem_file.read_bytes()).serial_number
