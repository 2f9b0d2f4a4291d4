"""Certificates and TLS-serving fakes for the SDK's TLS tests (test_client_tls_*.py): a cluster
CA with a server and a client certificate, a second CA with a client certificate of its own, and
one in-process gRPC server serving a fake controller and a fake broker over TLS."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from samsa.cli.certificates import create_ca, issue
from samsa.common.errors import ErrorCode
from samsa.common.tls import TlsSettings
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2_grpc
from samsa.v1 import controller_pb2 as c

HOSTS = ["127.0.0.1", "localhost"]
CLUSTER_ID = "tls-test-cluster"


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the cluster's CA
    server: tuple[Path, Path]  # (certificate, key), signed by `ca`
    client: tuple[Path, Path]  # signed by `ca`
    other_ca: Path  # a CA that signed nothing the server holds
    stranger: tuple[Path, Path]  # a client certificate signed by `other_ca`


def make_certificates(directory: Path) -> Certificates:
    ca = create_ca(directory / "ca")
    other = create_ca(directory / "other", common_name="other-ca")
    server = issue(ca, directory / "ca", "server", HOSTS)
    client = issue(ca, directory / "ca", "client", HOSTS)
    stranger = issue(other, directory / "other", "stranger", HOSTS)
    return Certificates(
        ca.certificate,
        (server.certificate, server.key),
        (client.certificate, client.key),
        other.certificate,
        (stranger.certificate, stranger.key),
    )


def client_config(
    endpoint: str, ca: Path, identity: tuple[Path, Path] | None = None
) -> dict[str, object]:
    """An SDK config dialling `endpoint` over TLS, trusting `ca`, presenting `identity`."""
    config: dict[str, object] = {
        "bootstrap.servers": endpoint,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca),
    }
    if identity is not None:
        config["ssl.certificate.location"] = str(identity[0])
        config["ssl.key.location"] = str(identity[1])
    return config


class Controller(controller_pb2_grpc.ControllerServiceServicer):
    """Answers DescribeCluster with CLUSTER_ID and counts the calls that got through."""

    def __init__(self) -> None:
        self.calls = 0

    def DescribeCluster(self, request, context):  # type: ignore[no-untyped-def]
        self.calls += 1
        return c.DescribeClusterResponse(cluster_id=CLUSTER_ID)


class Broker(broker_pb2_grpc.BrokerServiceServicer):
    """Answers every Fetch with an empty partition 0 of the first topic; counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def Fetch(self, request, context):  # type: ignore[no-untyped-def]
        self.calls += 1
        partition = broker_pb2.FetchResponse.PartitionResponse(
            partition=0, error_code=ErrorCode.NONE
        )
        name = request.topics[0].name if request.topics else ""
        topic = broker_pb2.FetchResponse.TopicResponse(name=name, partitions=[partition])
        return broker_pb2.FetchResponse(topics=[topic])


@dataclass
class Served:
    endpoint: str
    controller: Controller
    broker: Broker


@contextmanager
def serving_tls(certificates: Certificates, client_auth: str = "none") -> Iterator[Served]:
    """A controller and a broker on one TLS port of 127.0.0.1 (the server certificate names it),
    requiring a client certificate signed by the cluster CA with client_auth="required"; stopped
    on the way out, even when the test fails."""
    settings = TlsSettings.load(
        ca_location=str(certificates.ca),
        certificate_location=str(certificates.server[0]),
        key_location=str(certificates.server[1]),
        client_auth=client_auth,
    )
    served = Served("", Controller(), Broker())
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(served.controller, server)
    broker_pb2_grpc.add_BrokerServiceServicer_to_server(served.broker, server)
    port = server.add_secure_port("127.0.0.1:0", settings.server_credentials())
    served.endpoint = f"127.0.0.1:{port}"
    server.start()
    try:
        yield served
    finally:
        server.stop(None).wait(5)


def fetch_request() -> broker_pb2.FetchRequest:
    return broker_pb2.FetchRequest(topics=[broker_pb2.FetchRequest.TopicData(name="t")])
