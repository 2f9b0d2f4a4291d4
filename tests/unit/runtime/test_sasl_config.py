"""Goal: every service reads sasl.enabled.mechanisms (SCRAM-SHA-256 and/or SCRAM-SHA-512, any
case; empty: off, the default) and sasl.session.lifetime.ms (an hour by default, a minute to 7
days), refuses an unknown mechanism naming the choices, and refuses to start with SASL on
without TLS, saying why.

Method: the config loader (runtime/config.py) on hand-made layers, for the three services.
"""

from __future__ import annotations

import pytest

from samsa.common import scram
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.runtime.config import ConfigError
from samsa.services.runtime.config_loading import load
from samsa.services.runtime.sasl_gate import SaslConfig
from tests.unit.runtime.test_config import broker

TLS = (
    "security.protocol=SSL\nssl.certificate.location=/tls/cert.pem\nssl.key.location=/tls/key.pem\n"
)


def test_sasl_is_off_by_default_with_an_hour_of_session() -> None:
    loaded = broker()
    assert loaded.sasl_enabled_mechanisms == ()
    assert loaded.sasl_session_lifetime_ms == 3_600_000
    assert SaslConfig.of(loaded).mechanisms == ()


def test_mechanisms_are_read_in_any_case_without_repeats() -> None:
    loaded = broker(
        file=TLS + "sasl.enabled.mechanisms = scram-sha-512, SCRAM-SHA-256,Scram-Sha-512\n"
    )
    assert loaded.sasl_enabled_mechanisms == ("SCRAM-SHA-512", "SCRAM-SHA-256")
    assert SaslConfig.of(loaded).mechanisms == (scram.SCRAM_SHA_512, scram.SCRAM_SHA_256)
    assert broker(file=TLS + "sasl.enabled.mechanisms= , \n").sasl_enabled_mechanisms == ()


def test_an_unknown_mechanism_is_refused_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, not 'PLAIN'"):
        broker(file=TLS + "sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN\n")


@pytest.mark.parametrize("lifetime", ["59999", "604800001", "hour"])
def test_the_session_lifetime_is_bounded(lifetime: str) -> None:
    with pytest.raises(ConfigError, match="from 60000 to 604800000"):
        broker(file=f"sasl.session.lifetime.ms={lifetime}\n")
    assert broker(file="sasl.session.lifetime.ms=60000\n").sasl_session_lifetime_ms == 60_000


def test_sasl_without_tls_is_refused_saying_why() -> None:
    with pytest.raises(ConfigError, match=r"needs security\.protocol=SSL: the session ticket"):
        broker(file="sasl.enabled.mechanisms=SCRAM-SHA-256\n")


def test_controllers_and_coordinators_have_the_keys_too() -> None:
    environ = {
        "SAMSA_SASL_ENABLED_MECHANISMS": "SCRAM-SHA-256",
        "SAMSA_SASL_SESSION_LIFETIME_MS": "120000",
        "SAMSA_SECURITY_PROTOCOL": "SSL",
        "SAMSA_SSL_CERTIFICATE_LOCATION": "/c",
        "SAMSA_SSL_KEY_LOCATION": "/k",
        "SAMSA_CLUSTER_SECRET_FILE": "/s",
    }
    controller = load(
        ControllerConfig,
        "controller",
        ["--node-id", "1", "--listen", "h:1", "--raft-address", "h:2", "--data-dir", "/d"],
        environ,
    )
    coordinator = load(
        CoordinatorConfig,
        "coordinator",
        ["--coordinator-id", "1", "--listen", "h:1", "--controllers", "c:1"],
        environ,
    )
    for loaded in (controller, coordinator):
        assert loaded.sasl_enabled_mechanisms == ("SCRAM-SHA-256",)
        assert loaded.sasl_session_lifetime_ms == 120_000
