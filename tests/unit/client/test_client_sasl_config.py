"""Goal: every SDK client (Producer, AsyncProducer, Consumer, AsyncConsumer, Admin, the Spark
source's PartitionRangeReader) takes security.protocol=SASL_SSL with sasl.mechanism,
sasl.username and sasl.password, and a SASL setting that cannot work fails the constructor with
InvalidConfigError naming the key: SASL_PLAINTEXT (the ticket is a bearer credential, sent only
over TLS), a sasl.* key without SASL_SSL, a missing one with it, an unknown mechanism (the
message names the choices). The password appears in no repr. No exchange runs at construction.

Method: clients built (never started) from dicts, certificates made in tmp_path; nothing listens
at their bootstrap address. The CLI's --command-config reading takes the same lines.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sdk_tls_fakes import Certificates, client_config, make_certificates

from samsa.cli.command_config import (
    CommandConfigError,
    check_security,
    parse_command_config,
)
from samsa.client import Admin, AsyncConsumer, AsyncProducer, Consumer, Producer
from samsa.client.client_tls import client_security
from samsa.client.config import ProducerConfig
from samsa.client.partition_range import PartitionRangeReader
from samsa.common import tls
from samsa.common.errors import InvalidConfigError

NOWHERE = "127.0.0.1:1"
SECRET = "s3cret-password"
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


def sasl_config(certificates: Certificates) -> dict[str, object]:
    return client_config(NOWHERE, certificates.ca) | {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": SECRET,
    }


def close(client: object) -> None:
    if isinstance(client, Producer | Consumer):
        client.close(timeout=1)
    elif isinstance(client, Admin | PartitionRangeReader):
        client.close()


@each_client
def test_every_client_takes_the_sasl_keys_and_holds_one_login(
    certificates: Certificates, make
) -> None:  # type: ignore[no-untyped-def]
    config = sasl_config(certificates)
    assert set(config) - {"bootstrap.servers"} == {tls.SECURITY_PROTOCOL, tls.CA_LOCATION} | set(
        tls.SASL_KEYS
    )
    client = make(config)
    try:
        login = client._channels.security.login  # type: ignore[attr-defined]
        assert login is not None and login.settings.mechanism == "SCRAM-SHA-512"
        assert login.state.attempts == 0  # no exchange until the first call
    finally:
        close(client)


def wrong_settings(ca: str) -> list[tuple[dict[str, str], str]]:
    """(SASL settings that cannot work, what the error must say)."""
    full = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": ca,
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": SECRET,
    }
    without = {key: {k: v for k, v in full.items() if k != key} for key in tls.SASL_KEYS}
    return [
        ({**full, "security.protocol": "SASL_PLAINTEXT"}, r"Samsa sends SASL only over TLS"),
        (without["sasl.mechanism"], r"security\.protocol=SASL_SSL needs sasl\.mechanism"),
        (without["sasl.username"], r"security\.protocol=SASL_SSL needs sasl\.username"),
        (without["sasl.password"], r"security\.protocol=SASL_SSL needs sasl\.password"),
        (
            {**full, "sasl.mechanism": "PLAIN"},
            r"sasl\.mechanism=PLAIN: expected one of SCRAM-SHA-256, SCRAM-SHA-512",
        ),
        (
            {"sasl.username": "alice"},
            r"sasl\.username is set but security\.protocol is PLAINTEXT: set "
            r"security\.protocol=SASL_SSL",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": ca, "sasl.password": SECRET},
            r"sasl\.password is set but security\.protocol is SSL",
        ),
        ({**full, "sasl.username": ""}, r"sasl\.username"),
    ]


@each_client
def test_a_sasl_setting_that_cannot_work_fails_the_constructor_naming_the_key(
    certificates: Certificates, make
) -> None:  # type: ignore[no-untyped-def]
    for settings, message in wrong_settings(str(certificates.ca)):
        with pytest.raises(InvalidConfigError, match=message) as refused:
            close(make({"bootstrap.servers": NOWHERE, **settings}))
        assert SECRET not in str(refused.value)


def test_the_mechanism_is_case_insensitive_and_the_password_in_no_repr(
    certificates: Certificates,
) -> None:
    config = sasl_config(certificates) | {"sasl.mechanism": "scram-sha-256"}
    security = client_security(config)
    assert security is not None and security.login is not None
    assert security.login.settings.mechanism == "SCRAM-SHA-256"
    assert SECRET not in repr(security.login.settings)
    assert SECRET not in repr(security)
    parsed = ProducerConfig.from_dict(config)
    assert parsed.sasl_password == SECRET and SECRET not in repr(parsed)


def test_the_cli_command_config_takes_the_sasl_lines(certificates: Certificates) -> None:
    text = (
        "security.protocol=SASL_SSL\n"
        f"ssl.ca.location={certificates.ca}\n"
        "sasl.mechanism=SCRAM-SHA-256\nsasl.username=alice\n"
        f"sasl.password={SECRET}\n"
    )
    settings = parse_command_config(text, "--command-config client.properties")
    check_security(settings, "--command-config client.properties")
    security = client_security(settings)
    assert security is not None and security.login is not None
    with pytest.raises(CommandConfigError, match=r"client\.properties: .*needs sasl\.password"):
        check_security(
            {k: v for k, v in settings.items() if k != "sasl.password"},
            "--command-config client.properties",
        )


def test_a_tls_only_client_has_no_login(certificates: Certificates) -> None:
    security = client_security(client_config(NOWHERE, certificates.ca))
    assert security is not None and security.login is None
    assert client_security({"bootstrap.servers": NOWHERE}) is None
