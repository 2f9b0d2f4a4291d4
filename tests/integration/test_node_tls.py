"""The Node.js client over TLS (clients/node/tls.js): encryption, the servers verified against
the cluster's CA, and a client certificate where the cluster requires one.

Goal: with `security.protocol` SSL and the ssl.* files (the Python SDK's and librdkafka's names)
the Node client reaches a TLS cluster whose services require client certificates
(ssl.client.auth=required), and does everything it does in plaintext: an admin call
(CreateTopics), produce, and consume what it produced, record for record. Without a client
certificate it fails with an error saying that it has none and what to set, not an opaque
"Failed to connect"; a client trusting another CA fails too, and so does a plaintext one.

Method: first a TLS server in this process (Python grpc, BoringSSL as the services use; a fake
ControllerService answering DescribeCluster) and a Node script against it, one per kind of
client; then `node clients/node/example.js` with --security-protocol and the --ssl-* flags
against a local cluster started with `local_cluster(..., tls=True)` (1 controller, 2 brokers,
1 coordinator, real processes), its client files from `spec.client_security(data_dir)`.
Certificates come from samsa.cli.certificates, made for 127.0.0.1 and localhost. Skipped when
`node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster
from node_helpers import SETTINGS, node, node_script, skip_module_without_node

from samsa.cli.certificates import create_ca, issue
from samsa.common.tls import TlsSettings
from samsa.v1 import controller_pb2, controller_pb2_grpc

skip_module_without_node()

pytestmark = pytest.mark.timeout(180)

HOSTS = ["127.0.0.1", "localhost"]
# A Node script body: describeCluster once; what it answered, or the error's code and message.
DESCRIBE = """
try {
  return { clusterId: (await client.describeCluster()).clusterId };
} catch (error) {
  return { code: error.code, message: error.message };
}
"""


class Answering(controller_pb2_grpc.ControllerServiceServicer):
    """A controller that answers DescribeCluster with a cluster id, to tell that a call got
    through."""

    def DescribeCluster(
        self, request: controller_pb2.DescribeClusterRequest, context: grpc.ServicerContext
    ) -> controller_pb2.DescribeClusterResponse:
        return controller_pb2.DescribeClusterResponse(cluster_id="tls-fake")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The files: the cluster's CA, a server's and a client's pair it signed, another CA."""
    base = tmp_path_factory.mktemp("node-tls-pki")
    ca = create_ca(base)
    server = issue(ca, base, "server", HOSTS)
    client = issue(ca, base, "client", HOSTS)
    other = base / "other"
    other.mkdir()
    return {
        "ca": str(ca.certificate),
        "server": str(server.certificate),
        "server-key": str(server.key),
        "client": str(client.certificate),
        "client-key": str(client.key),
        "other-ca": str(create_ca(other).certificate),
    }


@pytest.fixture(scope="module")
def tls_server(pki: dict[str, str]) -> Iterator[str]:
    """A TLS server requiring a client certificate signed by the CA; yields its host:port."""
    settings = TlsSettings.load(
        ca_location=pki["ca"],
        certificate_location=pki["server"],
        key_location=pki["server-key"],
        client_auth="required",
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(Answering(), server)
    port = server.add_secure_port("127.0.0.1:0", settings.server_credentials())
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def client_settings(
    pki: dict[str, str], ca: str = "ca", certificate: bool = True
) -> dict[str, str]:
    """A client's TLS settings: the CA it trusts, with or without the client pair."""
    settings = {"security.protocol": "SSL", "ssl.ca.location": pki[ca]}
    if certificate:
        settings["ssl.certificate.location"] = pki["client"]
        settings["ssl.key.location"] = pki["client-key"]
    return settings


def describe(endpoint: str, settings: dict[str, str]) -> dict[str, object]:
    """What DESCRIBE printed, with a short client timeout (a failure ends in about a second)."""
    answer = node_script(endpoint, "", DESCRIBE, timeoutMs=1000, **settings)
    assert isinstance(answer, dict)
    return answer


def test_a_client_with_its_certificate_is_answered_over_tls(
    tls_server: str, pki: dict[str, str]
) -> None:
    assert describe(tls_server, client_settings(pki)) == {"clusterId": "tls-fake"}
    # The protocol is case-insensitive, as Kafka's.
    lower = client_settings(pki) | {"security.protocol": "ssl"}
    assert describe(tls_server, lower) == {"clusterId": "tls-fake"}


def test_a_client_without_a_certificate_is_refused_and_told_why(
    tls_server: str, pki: dict[str, str]
) -> None:
    refused = describe(tls_server, client_settings(pki, certificate=False))
    assert refused["code"] == grpc.StatusCode.UNAVAILABLE.value[0], refused
    message = str(refused["message"])
    assert "this client has no certificate" in message, message
    assert "ssl.certificate.location and ssl.key.location" in message, message


def test_a_client_trusting_another_ca_or_none_is_refused(
    tls_server: str, pki: dict[str, str]
) -> None:
    other = describe(tls_server, client_settings(pki, ca="other-ca"))
    assert other["code"] == grpc.StatusCode.UNAVAILABLE.value[0], other
    assert "no certificate" not in str(other["message"]), other
    plaintext = describe(tls_server, {})
    assert plaintext["code"] == grpc.StatusCode.UNAVAILABLE.value[0], plaintext


def tls_flags(security: dict[str, str]) -> list[str]:
    """example.js's flags for a client's settings: ssl.ca.location as --ssl-ca-location."""
    flags = []
    for setting, value in security.items():
        flags += [f"--{setting.replace('.', '-')}", value]
    return flags


def test_node_creates_produces_and_consumes_on_a_tls_cluster(tmp_path: Path) -> None:
    with local_cluster(tmp_path, 1, 2, SETTINGS, coordinators=1, tls=True) as running:
        bootstrap = ",".join(broker.endpoint for broker in running.spec.brokers)
        security = running.spec.client_security(tmp_path)
        assert security["security.protocol"].upper() == "SSL", security
        flags = tls_flags(security)
        topic = "over-tls"

        created = node(bootstrap, *flags, "create-topic", topic, "--partitions", "2")
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout) == {"topic": topic, "created": True}

        lines = "alice:one\nbob:two\nno key\n"
        produced = node(bootstrap, *flags, "produce", topic, "--partition", "1", stdin=lines)
        assert produced.returncode == 0, produced.stderr
        written = json.loads(produced.stdout)
        assert written == {"topic": topic, "partition": 1, "base_offset": 0, "count": 3}

        consumed = node(bootstrap, *flags, "consume", topic, "--partition", "1", "--count", "3")
        assert consumed.returncode == 0, consumed.stderr
        rows = [json.loads(line) for line in consumed.stdout.splitlines()]
        assert [(r["offset"], r["key"], r["value"]) for r in rows] == [
            (0, "alice", "one"),
            (1, "bob", "two"),
            (2, None, "no key"),
        ]

        # The same call without the client's certificate: refused by every broker, and said so.
        kept = ("security.protocol", "ssl.ca.location")
        without = {k: v for k, v in security.items() if k in kept}
        refused = node(bootstrap, *tls_flags(without), "create-topic", "never", "--partitions", "1")
        assert refused.returncode == 1, refused.stdout
        assert "this client has no certificate" in refused.stderr, refused.stderr
        # A plaintext client does not get through either.
        plaintext = node(bootstrap, "create-topic", "never", "--partitions", "1")
        assert plaintext.returncode == 1, plaintext.stdout
