"""Goal: the authorizer's keys (authorizer.class.name, super.users,
allow.everyone.if.no.acl.found, ssl.principal.mapping.rules) are read by every service, with
Kafka's names and values, and a mistake stops the service with one line naming the key and what
it accepts — never a service that silently enforces nothing, or refuses everyone.

Method: `load` of each service's config class from flags, as the services read it; one broker
started with a bad mapping rule, to see the line it stops with.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.runtime.authorization import AuthorizerConfig
from samsa.services.runtime.config import ConfigError
from samsa.services.runtime.config_loading import load

BROKER = [
    "--broker-id", "1", "--listen", "127.0.0.1:0", "--controllers", "127.0.0.1:1",
    "--data-dir", "/nonexistent", "--secret-file", "/nonexistent",
]  # fmt: skip


def broker(*flags: str) -> BrokerConfig:
    return load(BrokerConfig, "broker", [*BROKER, *flags], {})


def test_off_by_default() -> None:
    config = broker()
    assert not config.authorizer_enabled
    assert AuthorizerConfig.of(config) is None
    assert config.super_users == frozenset()
    assert config.allow_everyone_if_no_acl_found is False


@pytest.mark.parametrize(
    "name", ["standard", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]
)
def test_the_standard_authorizer_by_either_name(name: str) -> None:
    config = broker(
        "--authorizer-class-name", name,
        "--super-users", "User:CN=client,O=samsa; User:ops;",
        "--allow-everyone-if-no-acl-found", "true",
    )  # fmt: skip
    assert config.authorizer_enabled
    authorizer = AuthorizerConfig.of(config)
    assert authorizer is not None
    assert authorizer.settings.super_users == frozenset({"User:CN=client,O=samsa", "User:ops"})
    assert authorizer.settings.allow_if_no_acl is True


def test_every_service_has_the_keys() -> None:
    for config_class in (BrokerConfig, ControllerConfig, CoordinatorConfig):
        names = {field.name for field in config_class.__dataclass_fields__.values()}
        assert {
            "authorizer_class_name",
            "super_users",
            "allow_everyone_if_no_acl_found",
            "ssl_principal_mapping_rules",
        } <= names


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--authorizer-class-name", "kafka.security.authorizer.AclAuthorizer"],
            "authorizer.class.name must be empty (off) or one of standard, "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        (["--super-users", "alice"], "super.users must be ;-separated principals"),
        (["--allow-everyone-if-no-acl-found", "yes"], "must be true or false"),
        (["--ssl-principal-mapping-rules", "RULE:nope"], "ssl.principal.mapping.rules must be"),
    ],
)
def test_a_bad_value_is_named(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        broker(*flags)


def test_the_mapping_rules_are_parsed_at_load() -> None:
    config = broker("--ssl-principal-mapping-rules", "RULE:^CN=([^,]*),.*$/$1/U,DEFAULT")
    assert isinstance(config.ssl_principal_mapping_rules, PrincipalRules)
    assert config.ssl_principal_mapping_rules.principal("CN=alice,O=samsa") == "User:ALICE"


def test_a_bad_mapping_rule_stops_a_service_with_one_line(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(secrets.token_urlsafe(32) + "\n")
    secret.chmod(0o600)
    result = subprocess.run(
        [sys.executable, "-m", "samsa.services.broker", "--broker-id", "1",
         "--listen", "127.0.0.1:0", "--controllers", "127.0.0.1:1",
         "--data-dir", str(tmp_path / "data"), "--secret-file", str(secret),
         "--ssl-principal-mapping-rules", "RULE:^CN=(.*$/$1/"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "ssl.principal.mapping.rules" in last, last
