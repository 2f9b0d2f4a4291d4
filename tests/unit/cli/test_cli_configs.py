"""Goal: `samsa configs` reads its flags as kafka-configs.sh does for the brokers' default entity
(and a topic), a malformed command is a usage error (exit 2) before any cluster is asked, and a
bracketed list value keeps its commas; the SDK names the wire resource of BROKER_DEFAULTS.

Method: `samsa.cli.main.main` with malformed flags and an address nothing listens on (the usage
error comes first, so nothing is dialled); the pure item splitter and resource builder.
"""

from __future__ import annotations

import argparse

import pytest

from samsa.cli.config_commands import configs_usage_error, split_items
from samsa.cli.main import main as samsa_main
from samsa.client import BROKER_DEFAULTS, ConfigResource, KafkaError
from samsa.client.config_resources import resource_message


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--entity-type", "brokers", "--entity-name", "b1", "--describe"], "cluster-wide only"),
        (["--entity-type", "brokers", "--describe"], "needs --entity-default"),
        (["--entity-type", "topics", "--describe"], "needs --entity-name"),
        (["--entity-type", "brokers", "--entity-default", "--alter"], "--alter needs"),
        (
            ["--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "x"],
            "is not KEY=VALUE",
        ),
        (
            ["--entity-type", "brokers", "--entity-default", "--describe", "--add-config", "a=1"],
            "go with --alter",
        ),
    ],
)
def test_a_malformed_command_is_a_usage_error_before_the_cluster_is_asked(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samsa_main(["configs", "--bootstrap-server", "127.0.0.1:1", *flags]) == 2
    assert message in capsys.readouterr().err


def test_add_and_delete_config_are_read_with_bracketed_lists() -> None:
    args = argparse.Namespace(
        entity_type="brokers",
        entity_default=True,
        entity_name=None,
        describe=False,
        alter=True,
        all=False,
        add_config="log.retention.ms=1000, log.cleanup.policy=[compact,delete]",
        delete_config="log.segment.bytes",
    )
    assert configs_usage_error(args) is None
    assert args.resource is BROKER_DEFAULTS
    assert args.set_configs == {"log.retention.ms": "1000", "log.cleanup.policy": "compact,delete"}
    assert args.deleted == ["log.segment.bytes"]
    assert split_items("a=[1,2],b=3") == ["a=[1,2]", "b=3"]


def test_the_sdk_names_the_default_entity_as_the_broker_resource_named_empty() -> None:
    wire = resource_message(BROKER_DEFAULTS)
    assert (wire.type, wire.name) == (2, "")
    assert (resource_message("t").type, resource_message("t").name) == (1, "t")
    assert resource_message(ConfigResource("topic", "t")).name == "t"
    with pytest.raises(KafkaError, match="BROKER_DEFAULTS"):
        resource_message(ConfigResource("group", "g"))
