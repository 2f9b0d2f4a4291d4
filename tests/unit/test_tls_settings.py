"""Goal: the ssl.* settings (common/tls.py) mean one thing everywhere: a mistake is named at
start (which key, which file, what to do), never an opaque handshake failure later; and the
credentials they build do what the settings say over a real TLS handshake — a server's
certificate checked against the CA, `ssl.client.auth=required` refusing a client without a
certificate of that CA, a plaintext client refused.

Method: certificates from samsa.cli.certificates in tmp_path; a real grpc server in this process
on a loopback port serving grpc.health.v1 with `server_credentials()`, dialled with
`channel_credentials()` of several client settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.common import tls
from samsa.common.tls import TlsConfigError, TlsSettings


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca(directory)
    stranger_ca = create_ca(directory / "stranger")
    return {
        "ca": ca,
        "server": issue(ca, directory, "broker-1", ["127.0.0.1", "localhost"]),
        "client": issue(ca, directory, "client", []),
        "stranger_ca": stranger_ca,
        "stranger": issue(stranger_ca, directory / "stranger", "client", []),
    }


def settings(pair: KeyPair | None, ca: KeyPair | None, client_auth: str = "none") -> TlsSettings:
    return TlsSettings.load(
        ca_location=None if ca is None else str(ca.certificate),
        certificate_location=None if pair is None else str(pair.certificate),
        key_location=None if pair is None else str(pair.key),
        client_auth=client_auth,
    )


@pytest.fixture(params=["none", "required"])
def server(request: pytest.FixtureRequest, pki: dict[str, KeyPair]) -> Iterator[tuple[str, int]]:
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), grpc_server)
    credentials = settings(pki["server"], pki["ca"], request.param).server_credentials()
    port = grpc_server.add_secure_port("127.0.0.1:0", credentials)
    grpc_server.start()
    try:
        yield request.param, port
    finally:
        grpc_server.stop(0)


def check(port: int, credentials: grpc.ChannelCredentials | None, host: str = "127.0.0.1") -> str:
    """ "SERVING", or the status code name of the failed call."""
    target = f"{host}:{port}"
    channel = (
        grpc.insecure_channel(target)
        if credentials is None
        else grpc.secure_channel(target, credentials)
    )
    with channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
        except grpc.RpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)


def test_a_client_with_the_cas_certificate_is_served_at_every_name_the_certificate_gives(
    server: tuple[str, int], pki: dict[str, KeyPair]
) -> None:
    _, port = server
    with_certificate = settings(pki["client"], pki["ca"]).channel_credentials()
    assert check(port, with_certificate) == "SERVING"
    assert check(port, with_certificate, host="localhost") == "SERVING"


def test_client_authentication_decides_whether_a_client_without_a_certificate_is_served(
    server: tuple[str, int], pki: dict[str, KeyPair]
) -> None:
    client_auth, port = server
    no_certificate = settings(None, pki["ca"]).channel_credentials()
    expected = "SERVING" if client_auth == "none" else "UNAVAILABLE"
    assert check(port, no_certificate) == expected
    # A certificate of another CA is no better than none when the server requires one.
    strangers = settings(pki["stranger"], pki["ca"]).channel_credentials()
    assert check(port, strangers) == expected


def test_a_server_the_clients_ca_did_not_sign_and_a_plaintext_client_are_refused(
    server: tuple[str, int], pki: dict[str, KeyPair]
) -> None:
    _, port = server
    trusting_another_ca = settings(pki["client"], pki["stranger_ca"]).channel_credentials()
    assert check(port, trusting_another_ca) == "UNAVAILABLE"
    assert check(port, None) == "UNAVAILABLE"


def test_each_mistake_in_the_files_is_named_with_its_key(
    pki: dict[str, KeyPair], tmp_path: Path
) -> None:
    server, ca = pki["server"], pki["ca"]
    cases = {
        "ssl.certificate.location and ssl.key.location go together": dict(
            ca_location=None, certificate_location=str(server.certificate), key_location=None
        ),
        f"ssl.ca.location={tmp_path}/missing.pem: cannot read it": dict(
            ca_location=str(tmp_path / "missing.pem"),
            certificate_location=None,
            key_location=None,
        ),
        "ssl.key.location=": dict(  # a certificate where the key should be
            ca_location=None,
            certificate_location=str(server.certificate),
            key_location=str(server.certificate),
        ),
        "ssl.certificate.location=": dict(  # a key where the certificate should be
            ca_location=None,
            certificate_location=str(server.key),
            key_location=str(server.key),
        ),
    }
    for expected, files in cases.items():
        with pytest.raises(TlsConfigError, match=re.escape(expected)):
            TlsSettings.load(**files)  # type: ignore[arg-type]

    not_pem = tmp_path / "ca.der"
    not_pem.write_bytes(b"\x30\x82\x01\x00")
    with pytest.raises(TlsConfigError, match=re.escape("not a PEM file")):
        TlsSettings.load(ca_location=str(not_pem), certificate_location=None, key_location=None)

    encrypted = tmp_path / "encrypted-key.pem"
    encrypted.write_bytes(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n")
    with pytest.raises(TlsConfigError, match=re.escape("the key is encrypted")):
        TlsSettings.load(
            ca_location=None,
            certificate_location=str(server.certificate),
            key_location=str(encrypted),
        )

    with pytest.raises(
        TlsConfigError, match=re.escape("ssl.client.auth=required needs ssl.ca.location")
    ):
        settings(server, None, "required")
    with pytest.raises(TlsConfigError, match=re.escape("ssl.client.auth=requested")):
        settings(server, ca, "requested")
    with pytest.raises(TlsConfigError, match=re.escape("needs ssl.certificate.location")):
        settings(None, ca).server_credentials()


def test_a_clients_configuration_chooses_tls_only_with_security_protocol_ssl(
    pki: dict[str, KeyPair],
) -> None:
    ca = str(pki["ca"].certificate)
    assert TlsSettings.from_client_config({}) is None
    assert TlsSettings.from_client_config({"security.protocol": "plaintext"}) is None
    chosen = TlsSettings.from_client_config({"security.protocol": "ssl", "ssl.ca.location": ca})
    assert chosen is not None and chosen.ca == pki["ca"].certificate.read_bytes()
    assert chosen.certificate is None  # no client certificate was named

    with pytest.raises(TlsConfigError, match=re.escape("security.protocol is PLAINTEXT")):
        TlsSettings.from_client_config({"ssl.ca.location": ca})
    with pytest.raises(TlsConfigError, match=re.escape("Samsa sends SASL only over TLS")):
        TlsSettings.from_client_config({"security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(TlsConfigError, match=re.escape("SASL_SSL needs sasl.mechanism")):
        TlsSettings.from_client_config({"security.protocol": "SASL_SSL"})
    with pytest.raises(TlsConfigError, match=re.escape("expected one of PLAINTEXT, SSL, SASL_SSL")):
        tls.protocol("TLS")
