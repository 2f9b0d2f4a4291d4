"""Goal: every SDK client (Producer, AsyncProducer, Consumer, AsyncConsumer, Admin and the Spark
source's PartitionRangeReader) takes the four TLS keys of samsa.common.tls.CLIENT_KEYS, and a
TLS setting that cannot work fails the constructor, not the first call, with InvalidConfigError
(the SDK's config error) naming the key: an ssl.* key under PLAINTEXT, SASL, an unknown
protocol, a file that cannot be read, a key without its certificate. The PEM files are read once
per client, however many channels it opens.

Method: the clients are built (never started) from dicts, with certificates made in tmp_path by
samsa.cli.certificates; nothing listens at their bootstrap address, and no call is made, except
the channels opened to count the files read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sdk_tls_fakes import Certificates, client_config, make_certificates

from samsa.client import Admin, AsyncConsumer, AsyncProducer, Consumer, Producer
from samsa.client.config import ConsumerConfig, ProducerConfig
from samsa.client.partition_range import PartitionRangeReader
from samsa.common import tls
from samsa.common.errors import InvalidConfigError

NOWHERE = "127.0.0.1:1"
CLIENTS: dict[str, Callable[[dict[str, object]], object]] = {
    "Producer": Producer,
    "AsyncProducer": AsyncProducer,
    "Consumer": Consumer,
    "AsyncConsumer": AsyncConsumer,
    "Admin": Admin,
    "PartitionRangeReader": PartitionRangeReader,
}
each_client = pytest.mark.parametrize("make", list(CLIENTS.values()), ids=list(CLIENTS))


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def close(client: object) -> None:
    """Closes what the sync clients started (the asyncio ones start nothing until start())."""
    if isinstance(client, Producer | Consumer):
        client.close(timeout=1)
    elif isinstance(client, Admin | PartitionRangeReader):
        client.close()


@each_client
def test_every_client_takes_the_four_tls_keys(certificates: Certificates, make) -> None:  # type: ignore[no-untyped-def]
    config = client_config(NOWHERE, certificates.ca, certificates.client)
    sasl_keys = {*tls.SASL_KEYS, *tls.OAUTH_KEYS}
    assert set(config) - {"bootstrap.servers"} == set(tls.CLIENT_KEYS) - sasl_keys
    close(make(config))
    close(make({"bootstrap.servers": NOWHERE, "security.protocol": "plaintext"}))


def wrong_settings(certificates: Certificates, missing: Path) -> list[tuple[dict[str, str], str]]:
    """(TLS settings that cannot work, what the error must say)."""
    ca, (certificate, key) = str(certificates.ca), map(str, certificates.client)
    return [
        ({"ssl.ca.location": ca}, r"ssl\.ca\.location is set but security\.protocol is PLAINTEXT"),
        (
            {"security.protocol": "PLAINTEXT", "ssl.key.location": key},
            r"ssl\.key\.location is set but security\.protocol is PLAINTEXT",
        ),
        ({"security.protocol": "SASL_PLAINTEXT"}, r"Samsa sends SASL only over TLS"),
        (
            {"security.protocol": "TLS"},
            r"security\.protocol=TLS: expected one of PLAINTEXT, SSL, SASL_SSL",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": str(missing)},
            r"ssl\.ca\.location=.*missing\.pem: cannot read it",
        ),
        (
            {"security.protocol": "SSL", "ssl.key.location": key},
            r"ssl\.certificate\.location and ssl\.key\.location go together",
        ),
        (
            {"security.protocol": "SSL", "ssl.certificate.location": certificate},
            r"ssl\.certificate\.location and ssl\.key\.location go together",
        ),
        (
            {"security.protocol": "SSL", "ssl.certificate.location": key, "ssl.key.location": key},
            r"ssl\.certificate\.location=.*: no CERTIFICATE block",
        ),
        ({"security.protocol": "SSL", "ssl.ca.location": ""}, r"ssl\.ca\.location"),
        ({"security.protocol": 1}, r"security\.protocol"),  # type: ignore[dict-item]
    ]


@each_client
def test_a_tls_setting_that_cannot_work_fails_the_constructor_naming_the_key(
    certificates: Certificates, tmp_path: Path, make
) -> None:  # type: ignore[no-untyped-def]
    for settings, message in wrong_settings(certificates, tmp_path / "missing.pem"):
        with pytest.raises(InvalidConfigError, match=message):
            close(make({"bootstrap.servers": NOWHERE, **settings}))


@pytest.mark.parametrize("make", [Producer, Consumer, Admin], ids=["Producer", "Consumer", "Admin"])
def test_the_pem_files_are_read_once_per_client_not_per_channel(
    certificates: Certificates, monkeypatch: pytest.MonkeyPatch, make
) -> None:  # type: ignore[no-untyped-def]
    read: list[str] = []
    real = tls.read_pem

    def counting(path: str, setting: str, *, key: bool = False) -> bytes:
        read.append(setting)
        return real(path, setting, key=key)

    monkeypatch.setattr(tls, "read_pem", counting)
    client = make(client_config(NOWHERE, certificates.ca, certificates.client))
    try:
        for port in (1, 2, 3):
            client._channels.get(f"127.0.0.1:{port}")
    finally:
        close(client)
    assert sorted(read) == sorted([tls.CA_LOCATION, tls.CERTIFICATE_LOCATION, tls.KEY_LOCATION])


def test_the_config_classes_spell_the_keys_as_the_tls_module_does() -> None:
    """config.py spells them itself (it stays pure: no grpc import); a typo fails here."""
    for config_class in (ProducerConfig, ConsumerConfig):
        effective = config_class.from_dict({"bootstrap.servers": NOWHERE}).to_dict()
        assert {key: effective[key] for key in tls.CLIENT_KEYS} == {
            "security.protocol": "PLAINTEXT",
            "ssl.ca.location": None,
            "ssl.certificate.location": None,
            "ssl.key.location": None,
            "sasl.mechanism": None,
            "sasl.username": None,
            "sasl.password": None,
            "sasl.oauthbearer.method": None,
            "sasl.oauthbearer.token.endpoint.url": None,
            "sasl.oauthbearer.client.id": None,
            "sasl.oauthbearer.client.secret": None,
            "sasl.oauthbearer.scope": None,
            "sasl.oauthbearer.extensions": None,
        }
