"""Goal: the Spark source's and sink's TLS options (`samsa.security.protocol`,
`samsa.ssl.ca.location`, `samsa.ssl.certificate.location`, `samsa.ssl.key.location`), and with
SASL_SSL the SASL ones (`samsa.sasl.mechanism`, `samsa.sasl.username`, `samsa.sasl.password`),
reach, without the prefix, every SDK client they make: the driver's Admin and Consumer, the
tasks' range reader, the sink's producers and the exactly-once sink's Admin; none is warned
about as unused, and a setting that cannot work is refused by the client with a message naming
the key.

Method: the options are parsed as Spark hands them over (no Spark session, no cluster); the
client configs they produce are compared with the options, and an Admin is built from one, with
certificates made in tmp_path by samsa.cli.certificates.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql.types import BinaryType, StructType

from samsa.cli.certificates import create_ca, issue
from samsa.client import Admin
from samsa.common.errors import InvalidConfigError
from samsa.common.tls import CLIENT_KEYS, OAUTH_KEYS, SASL_KEYS
from samsa.spark.exactly_once import ExactlyOnceStreamWriter, transactional_config
from samsa.spark.options import parse_options
from samsa.spark.sink import write_options


@pytest.fixture(scope="module", params=["SSL", "SASL_SSL"])
def tls_options(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, str]:
    """The four TLS keys as samsa.* options, naming real files; with SASL_SSL, the three SASL
    keys too."""
    directory = tmp_path_factory.mktemp("tls")
    ca = create_ca(directory)
    client = issue(ca, directory, "client", ["127.0.0.1"])
    options = {
        "samsa.security.protocol": request.param,
        "samsa.ssl.ca.location": str(ca.certificate),
        "samsa.ssl.certificate.location": str(client.certificate),
        "samsa.ssl.key.location": str(client.key),
    }
    if request.param == "SASL_SSL":
        options |= {
            "samsa.sasl.mechanism": "SCRAM-SHA-256",
            "samsa.sasl.username": "spark",
            "samsa.sasl.password": "spark-secret",
        }
    return options


def unprefixed(options: dict[str, str]) -> dict[str, str]:
    return {key.removeprefix("samsa."): value for key, value in options.items()}


def test_the_source_hands_the_tls_keys_to_each_of_its_clients(
    tls_options: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    sasl = tls_options["samsa.security.protocol"] == "SASL_SSL"
    scram_keys = set(CLIENT_KEYS) - set(OAUTH_KEYS)  # the options log in with SCRAM
    keys = scram_keys if sasl else scram_keys - set(SASL_KEYS)
    assert {key.removeprefix("samsa.") for key in tls_options} == keys
    options = {"samsa.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", **tls_options}
    with caplog.at_level(logging.WARNING):
        parsed = parse_options(options)
    assert not caplog.records, "a TLS option was warned about as unused"
    expected = unprefixed(tls_options)
    assert parsed.admin_config().items() >= expected.items()
    assert parsed.consumer_config().items() >= expected.items()
    assert parsed.client.items() >= expected.items()  # the tasks' range reader's settings
    with Admin(parsed.admin_config()) as admin:  # reads the files: they are taken as given
        assert admin._channels.security is not None
        assert (admin._channels.security.login is not None) == sasl


def test_the_sinks_hand_the_tls_keys_to_their_producers_and_admin(
    tls_options: dict[str, str],
) -> None:
    schema = StructType().add("value", BinaryType())
    options = {"samsa.bootstrap.servers": "127.0.0.1:1", "topic": "t", **tls_options}
    written = write_options(options, schema)
    expected = unprefixed(tls_options)
    assert written.client.items() >= expected.items()  # the task producer's (task_producer)
    assert transactional_config(written.client, "spark-q-0").items() >= expected.items()
    assert ExactlyOnceStreamWriter(written)._admin_config().items() >= expected.items()


def test_a_tls_setting_that_cannot_work_is_refused_naming_the_key(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    for tls, words in [
        ({"samsa.ssl.ca.location": missing}, r"ssl\.ca\.location is set but .*PLAINTEXT"),
        (
            {"samsa.security.protocol": "SSL", "samsa.ssl.ca.location": missing},
            r"ssl\.ca\.location=.*cannot read it",
        ),
    ]:
        parsed = parse_options({"samsa.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", **tls})
        with pytest.raises(InvalidConfigError, match=words):
            Admin(parsed.admin_config())
