"""Test-only: a BrokerConfig loaded as a broker process loads its flags, and the ssl.* flags
of a certificate, for the unit tests of a service's TLS (transport, certificate watch)."""

from __future__ import annotations

from samsa.cli.certificates import KeyPair
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.runtime.config_loading import load

REQUIRED = [
    "--broker-id", "1", "--listen", "127.0.0.1:0", "--controllers", "127.0.0.1:1",
    "--data-dir", "/nonexistent", "--secret-file", "/nonexistent",
]  # fmt: skip


def broker_config(*flags: str) -> BrokerConfig:
    return load(BrokerConfig, "broker", [*REQUIRED, *flags], {})


def tls_flags(pair: KeyPair, ca: KeyPair, client_auth: str = "required") -> list[str]:
    return [
        "--security-protocol", "SSL", "--ssl-ca-location", str(ca.certificate),
        "--ssl-certificate-location", str(pair.certificate), "--ssl-key-location", str(pair.key),
        "--ssl-client-auth", client_auth,
    ]  # fmt: skip
