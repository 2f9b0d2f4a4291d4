"""Goal: `samsa acls` reads its flags as kafka-acls.sh does (--add/--remove/--list, principals,
hosts, operations by Kafka's names in any case, repeatable resources, pattern types, --producer
and --consumer's operations), refuses a malformed command as a usage error (exit 2) before any
cluster is asked (--remove without --force among them), and prints ACLs in Kafka's words, which
people grep.

Method: `samsa.cli.main.main` with malformed flags and an address nothing listens on (the usage
error comes first, so nothing is dialled); the argument check on parsed flags, to see the
bindings and filters built; then whole commands against a controller of the test's own making
(tests/helpers/fake_acl_controller.py: the real decisions and replay) over real gRPC.
"""

from __future__ import annotations

import argparse

import pytest
from fake_acl_controller import AclController
from fake_controllers import serving_controllers

from samsa.cli.acl_commands import acl_lines, acls_usage_error, add_acl_command
from samsa.cli.command_support import add_connection
from samsa.cli.main import main as samsa_main
from samsa.client import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

ALLOW, DENY = Permission.ALLOW, Permission.DENY
T, G, X, C = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.CLUSTER,
)
LIT = PatternType.LITERAL


def parsed(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_acl_command(parser.add_subparsers(dest="command"), add_connection)
    return parser.parse_args(["acls", *flags])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--add", "--topic", "t"], "--add needs --allow-principal and/or --deny-principal"),
        (["--add", "--allow-principal", "User:a"], "name the resources"),
        (["--remove", "--topic", "t"], "add --force to confirm"),
        (["--add", "--allow-principal", "User:a", "--operation", "Frob", "--topic", "t"], "Frob"),
        (["--add", "--allow-principal", "a", "--topic", "t"], "User:"),
        (
            [
                "--add",
                "--allow-principal",
                "User:a",
                "--operation",
                "IdempotentWrite",
                "--topic",
                "t",
            ],
            "operation IDEMPOTENT_WRITE does not apply to TOPIC",
        ),
        (
            ["--add", "--allow-host", "1.2.3.4", "--deny-principal", "User:a", "--topic", "t"],
            "--allow-host goes with --allow-principal",
        ),
        (
            [
                "--add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "match",
            ],
            "literal or prefixed",
        ),
        (
            [
                "--add",
                "--allow-principal",
                "User:a",
                "--producer",
                "--operation",
                "Read",
                "--topic",
                "t",
            ],
            "no --operation",
        ),
        (
            ["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"],
            "--consumer needs --topic and --group",
        ),
        (
            ["--add", "--allow-principal", "User:a", "--producer", "--group", "g"],
            "--producer needs --topic",
        ),
        (["--list", "--operation", "Read"], "--list takes resources"),
        (["--add", "--principal", "User:a", "--topic", "t"], "--principal goes with --list"),
    ],
)
def test_a_malformed_command_is_a_usage_error_before_the_cluster_is_asked(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samsa_main(["acls", "--bootstrap-server", "127.0.0.1:1", *flags]) == 2
    assert message in capsys.readouterr().err


def test_add_builds_each_principal_host_operation_and_resource() -> None:
    args = parsed(
        "--add", "--allow-principal", "User:a", "--allow-principal", "User:b",
        "--allow-host", "10.0.0.1", "--deny-principal", "User:c", "--operation", "read",
        "--operation", "DESCRIBE_CONFIGS", "--topic", "t", "--topic", "u",
        "--resource-pattern-type", "PREFIXED",
    )  # fmt: skip
    assert acls_usage_error(args) is None
    built = set(args.bindings)
    assert len(built) == 2 * 2 * 3 == len(args.bindings)
    prefixed = PatternType.PREFIXED
    assert AclBinding(T, "u", prefixed, "User:b", "10.0.0.1", Operation.READ, ALLOW) in built
    assert AclBinding(T, "t", prefixed, "User:c", "*", Operation.DESCRIBE_CONFIGS, DENY) in built
    default = parsed("--add", "--allow-principal", "User:a", "--cluster")
    assert acls_usage_error(default) is None
    assert default.bindings == [
        AclBinding(C, "kafka-cluster", LIT, "User:a", "*", Operation.ALL, ALLOW)
    ]


def test_producer_and_consumer_grant_kafkas_operations() -> None:
    producer = parsed(
        "--add", "--producer", "--allow-principal", "User:p", "--topic", "t",
        "--transactional-id", "tx",
    )  # fmt: skip
    assert acls_usage_error(producer) is None
    granted = {(b.resource_type, b.resource_name, b.operation) for b in producer.bindings}
    assert granted == {
        (T, "t", Operation.WRITE), (T, "t", Operation.DESCRIBE), (T, "t", Operation.CREATE),
        (X, "tx", Operation.WRITE), (X, "tx", Operation.DESCRIBE),
        (C, "kafka-cluster", Operation.IDEMPOTENT_WRITE),
    }  # fmt: skip
    prefixed = parsed("--add", "--producer", "--allow-principal", "User:p", "--topic", "t-",
                      "--resource-pattern-type", "prefixed")  # fmt: skip
    assert acls_usage_error(prefixed) is None
    patterns = {(b.resource_type, b.pattern_type) for b in prefixed.bindings}
    assert patterns == {(T, PatternType.PREFIXED), (C, LIT)}, "the cluster stays literal"
    consumer = parsed(
        "--add", "--consumer", "--allow-principal", "User:c", "--topic", "t", "--group", "g"
    )
    assert acls_usage_error(consumer) is None
    granted = {(b.resource_type, b.resource_name, b.operation) for b in consumer.bindings}
    assert granted == {
        (T, "t", Operation.READ),
        (T, "t", Operation.DESCRIBE),
        (G, "g", Operation.READ),
    }


def test_remove_and_list_build_filters() -> None:
    everything = parsed("--remove", "--force", "--topic", "t", "--resource-pattern-type", "any")
    assert acls_usage_error(everything) is None
    assert everything.filters == [AclFilter(T, "t", PatternType.ANY)]
    named = parsed("--remove", "--force", "--deny-principal", "User:c", "--group", "g")
    assert acls_usage_error(named) is None
    assert named.filters == [AclFilter(G, "g", LIT, "User:c", "*", Operation.ALL, DENY)]
    listing = parsed("--list", "--principal", "User:a")
    assert acls_usage_error(listing) is None
    assert listing.filters == [AclFilter(principal="User:a")]


def test_acls_are_printed_as_kafka_prints_them() -> None:
    bindings = [
        AclBinding(T, "orders", LIT, "User:bob", "*", Operation.WRITE, DENY),
        AclBinding(T, "orders", LIT, "User:alice", "*", Operation.READ, ALLOW),
        AclBinding(G, "g", PatternType.PREFIXED, "User:alice", "*", Operation.READ, ALLOW),
    ]
    assert acl_lines("Current ACLs", bindings) == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: ",
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        " \t(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)",
        "",
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, "
        "patternType=PREFIXED)`: ",
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "",
    ]


@pytest.mark.parametrize("enabled", [True, False])
def test_add_list_remove_against_a_controller(
    enabled: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    controller = AclController(enabled)
    with serving_controllers(controller) as endpoints:
        run = ["acls", "--bootstrap-server", endpoints[0]]
        added = samsa_main(
            [
                *run,
                "--add",
                "--allow-principal",
                "User:a",
                "--consumer",
                "--topic",
                "t",
                "--group",
                "g",
            ]
        )
        if not enabled:
            assert added == 1
            assert "SECURITY_DISABLED" in capsys.readouterr().err
            return
        assert added == 0
        assert (
            "Adding ACLs for resource `ResourcePattern(resourceType=GROUP"
            in capsys.readouterr().out
        )
        assert len(controller.image.acls) == 3
        assert samsa_main([*run, "--list", "--topic", "t"]) == 0
        listed = capsys.readouterr().out
        assert "(principal=User:a, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
        assert "resourceType=GROUP" not in listed
        assert samsa_main([*run, "--remove", "--force", "--topic", "t"]) == 0
        assert (
            "Removed ACLs for resource `ResourcePattern(resourceType=TOPIC"
            in capsys.readouterr().out
        )
        assert samsa_main([*run, "--list"]) == 0
        assert "operation=READ" in capsys.readouterr().out
        assert [b.resource_type for b in controller.image.acls] == [G]
