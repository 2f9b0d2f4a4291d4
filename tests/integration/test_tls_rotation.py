"""A broker's TLS certificate rotated while it runs, with real processes.

Goal: replacing a running broker's certificate and key files (same CA, a new serial, each file
renamed over the old) is taken without a restart: a new connection is served the new
certificate, a channel opened before the rotation still answers, a client that connects after
it works; then a key that is not the certificate's is refused: the broker logs the refusal,
keeps serving the new certificate to new connections and stays up.

Method: 1 controller and 1 broker started by the launcher with tls=True (client certificates
required; every process stopped by PID, also on failure). The certificate a new connection is
served is read by Python's ssl module (a TLS handshake with the cluster's client certificate,
no gRPC); the channel opened before is a grpc channel with the client certificate, asked for
the broker's health; the client after is the SDK's Admin. Each step waits for its condition:
the broker looks at its files at handshakes, at most once a second.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster, wait_until
from cryptography import x509
from grpc_health.v1 import health_pb2, health_pb2_grpc

from samsa.cli.certificates import KeyPair, issue
from samsa.cli.cluster_spec import tls_pair
from samsa.cli.launcher import LocalCluster
from samsa.client import Admin

pytestmark = pytest.mark.timeout(240)

BROKER = "broker-1"
HOSTS = ["127.0.0.1", "localhost"]  # what `samsa up --tls` certificates name


def pair(data_dir: Path, name: str) -> KeyPair:
    certificate, key = tls_pair(data_dir, name)
    return KeyPair(certificate, key)


def serial_of(pem_file: Path) -> int:
    return x509.load_pem_x509_certificate(pem_file.read_bytes()).serial_number


def replace(target: Path, source: Path) -> None:
    """Write beside, rename over: the broker reads the old file or the new one, never half."""
    beside = target.with_name(target.name + ".new")
    shutil.copy(source, beside)
    os.replace(beside, target)


def served_serial(data_dir: Path, endpoint: str) -> int:
    """The serial of the certificate a new TLS connection to `endpoint` is served with."""
    ca, client = pair(data_dir, "ca"), pair(data_dir, "client")
    context = ssl.create_default_context(cafile=str(ca.certificate))
    context.load_cert_chain(str(client.certificate), str(client.key))
    context.set_alpn_protocols(["h2"])
    host, port = endpoint.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as wrapped,
    ):
        der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def serving(channel: grpc.Channel) -> bool:
    answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def log_lines(cluster: LocalCluster, name: str, wanted: Callable[[str], bool]) -> list[str]:
    """The messages of process `name`'s JSON log lines that `wanted` keeps."""
    path = cluster.data_dir / "logs" / f"{name}.log"
    messages = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            message = str(json.loads(line).get("msg", ""))
        except (ValueError, AttributeError):
            message = line
        if wanted(message):
            messages.append(message)
    return messages


def test_a_rotated_certificate_is_served_to_new_connections_and_a_bad_key_refused(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "cluster"
    with local_cluster(data_dir, 1, 1, tls=True) as cluster:
        endpoint = cluster.spec.brokers[0].endpoint
        live, ca = pair(data_dir, BROKER), pair(data_dir, "ca")
        old = KeyPair(tmp_path / "old.pem", tmp_path / "old-key.pem")
        shutil.copy(live.certificate, old.certificate)
        shutil.copy(live.key, old.key)
        assert served_serial(data_dir, endpoint) == serial_of(old.certificate)
        client = pair(data_dir, "client")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=ca.certificate.read_bytes(),
            private_key=client.key.read_bytes(),
            certificate_chain=client.certificate.read_bytes(),
        )
        with grpc.secure_channel(endpoint, credentials) as before:
            assert serving(before)

            rotated = issue(ca, tmp_path / "rotated", BROKER, HOSTS)  # same CA, a new serial
            new_serial = serial_of(rotated.certificate)
            assert new_serial != serial_of(old.certificate)
            replace(live.key, rotated.key)
            replace(live.certificate, rotated.certificate)
            wait_until(
                "a new connection served the rotated certificate",
                lambda: served_serial(data_dir, endpoint) == new_serial,
            )
            assert serving(before)  # the channel opened before still answers
            config = {
                "bootstrap.servers": endpoint,
                **cluster.spec.client_security(data_dir),
            }
            with Admin(config) as admin:  # a client that connects after the rotation
                assert [b.broker_id for b in admin.describe_cluster().brokers] == [1]
            taken = log_lines(cluster, BROKER, lambda m: m.startswith("took the rotated TLS"))
            assert len(taken) == 1 and f"serial {new_serial:x}" in taken[0], taken

            replace(live.key, old.key)  # a key that is not the certificate's

            def refused() -> bool:
                assert served_serial(data_dir, endpoint) == new_serial  # each handshake: B
                return bool(log_lines(cluster, BROKER, lambda m: m.startswith("refused the")))

            wait_until("the broker refused the mismatched key", refused)
            message = log_lines(cluster, BROKER, lambda m: m.startswith("refused the"))[0]
            assert "ssl.key.location: the key does not match the certificate" in message
            assert served_serial(data_dir, endpoint) == new_serial
            assert serving(before)
            assert cluster.exited() == {}
