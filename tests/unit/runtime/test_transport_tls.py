"""Goal: a service with security.protocol=SSL serves TLS on its listener and dials its peers with
TLS (services/runtime/transport.py), its health file's self-check passes even where its
certificate does not name the address it dials itself at, and the ssl.* keys that cannot work
together stop it at start with one line naming them.

Method: the production GrpcServer and service_channel in this process on loopback ports, with
certificates from samsa.cli.certificates in tmp_path; `transport.configure` from a real
BrokerConfig, reset after each test. The relations go through the config loader as the
services load them; a broker started in a subprocess with a missing certificate shows the
one-line exit.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from broker_tls_flags import broker_config, tls_flags
from grpc_health.v1 import health_pb2, health_pb2_grpc

from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.services.runtime import health_file, transport
from samsa.services.runtime.config import ConfigError
from samsa.services.runtime.server import GrpcServer
from samsa.services.runtime.service_channels import service_channel


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, KeyPair]:
    ca = create_ca(tmp_path / "tls")
    return {
        "ca": ca,
        # A compose-style certificate: it names the service's host only, not 127.0.0.1.
        "named": issue(ca, tmp_path / "tls", "broker-1", ["broker-1"]),
        "loopback": issue(ca, tmp_path / "tls", "broker-2", ["127.0.0.1"]),
    }


@pytest.fixture(autouse=True)
def plaintext_after() -> Iterator[None]:
    yield
    transport.configure(broker_config())


async def health_status(channel: grpc.aio.Channel) -> str:
    try:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    except grpc.RpcError as error:
        return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)


def test_an_ssl_service_serves_tls_and_dials_its_peers_with_its_certificate(
    pki: dict[str, KeyPair],
) -> None:
    assert transport.configure(broker_config(*tls_flags(pki["loopback"], pki["ca"])))

    async def main() -> None:
        server = GrpcServer("127.0.0.1:0", [], tracing=False)
        await server.start()
        try:
            endpoint = f"127.0.0.1:{server.port}"
            # A peer's channel: TLS, with this process's certificate (client auth required).
            async with service_channel(endpoint) as channel:
                assert await health_status(channel) == "SERVING"
            async with grpc.aio.insecure_channel(endpoint) as plaintext:
                assert await health_status(plaintext) == "UNAVAILABLE"
        finally:
            await server.stop(0)

    asyncio.run(main())


def test_the_health_file_check_passes_where_the_certificate_names_another_host(
    pki: dict[str, KeyPair], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health_file, "HEALTH_FILE_INTERVAL_S", 0.05)
    transport.configure(broker_config(*tls_flags(pki["named"], pki["ca"])))
    path = tmp_path / "healthy"

    async def main() -> None:
        # Every interface: the check dials 127.0.0.1, which the certificate does not name.
        server = GrpcServer("0.0.0.0:0", [], tracing=False, health_file=str(path))
        await server.start()
        try:
            deadline = time.monotonic() + 10
            while not path.exists():
                assert time.monotonic() < deadline, "the health file never appeared"
                await asyncio.sleep(0.025)
        finally:
            await server.stop(0)

    asyncio.run(main())


def test_ssl_keys_that_cannot_work_together_are_refused_naming_them(
    pki: dict[str, KeyPair],
) -> None:
    ca, pair = str(pki["ca"].certificate), pki["loopback"]
    cases = {
        "ssl.ca.location is set but security.protocol is PLAINTEXT": ["--ssl-ca-location", ca],
        "ssl.client.auth is set but security.protocol is PLAINTEXT": [
            "--ssl-client-auth", "required"],
        "security.protocol=SSL needs ssl.certificate.location and ssl.key.location": [
            "--security-protocol", "SSL", "--ssl-ca-location", ca],
        "ssl.client.auth=required needs ssl.ca.location": [
            "--security-protocol", "SSL", "--ssl-certificate-location", str(pair.certificate),
            "--ssl-key-location", str(pair.key), "--ssl-client-auth", "required"],
        "ssl.client.auth must be one of none, required": ["--ssl-client-auth", "requested"],
        "security.protocol must be one of PLAINTEXT, SSL": ["--security-protocol", "SASL_SSL"],
    }  # fmt: skip
    for expected, flags in cases.items():
        with pytest.raises(ConfigError, match=expected):
            broker_config(*flags)


def test_a_service_whose_certificate_cannot_be_read_stops_with_one_line(
    pki: dict[str, KeyPair], tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text(secrets.token_urlsafe(32) + "\n")
    secret.chmod(0o600)
    missing = tmp_path / "missing.pem"
    result = subprocess.run(
        [sys.executable, "-m", "samsa.services.broker", "--broker-id", "1",
         "--listen", "127.0.0.1:0", "--controllers", "127.0.0.1:1",
         "--data-dir", str(tmp_path / "data"), "--secret-file", str(secret),
         "--security-protocol", "SSL", "--ssl-certificate-location", str(missing),
         "--ssl-key-location", str(pki["loopback"].key)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"samsa broker: ssl.certificate.location={missing}: cannot read"), last
