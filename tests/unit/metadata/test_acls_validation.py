"""Goal: `AclBinding.problem` refuses what Kafka refuses to store, each time with a message that
says what to fix, and accepts exactly Kafka's operations per resource type; `AclFilter.problem`
refuses unusable filters; `AclFilter.matches` follows Kafka's filter semantics (None and ANY
match all; LITERAL/PREFIXED select that pattern by equal name; ANY, either pattern; MATCH, every
pattern that applies to the name) and `Acls.matching` returns the selection sorted.

Method: one valid binding, varied one field at a time; a fixed set of bindings and filters.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from samsa.metadata.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclFilter,
    Acls,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

Op = Operation
VALID = AclBinding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Op.READ, Permission.ALLOW
)


def problem(**changes: object) -> str | None:
    return dataclasses.replace(VALID, **changes).problem()


def test_a_valid_binding_has_no_problem() -> None:
    assert VALID.problem() is None
    assert problem(pattern_type=PatternType.PREFIXED, host="10.0.0.1") is None
    assert problem(resource_name="*", principal="User:*", permission=Permission.DENY) is None
    cluster = {"resource_type": ResourceType.CLUSTER, "resource_name": CLUSTER_NAME}
    assert problem(**cluster, operation=Op.CREATE) is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"pattern_type": PatternType.ANY},
            "ANY is for filters: a binding is LITERAL or",
        ),
        ({"pattern_type": PatternType.MATCH}, "pattern_type MATCH is for filters"),
        ({"operation": Op.ANY}, "operation ANY is for filters: a binding names one operation"),
        ({"permission": Permission.ANY}, "permission ANY is for filters: a binding is ALLOW or"),
        ({"resource_name": ""}, "resource_name is empty: name the resource, or \\*"),
        (
            {"resource_type": ResourceType.CLUSTER, "resource_name": "prod"},
            "the CLUSTER resource is named kafka-cluster, not 'prod'",
        ),
        (
            {"pattern_type": PatternType.PREFIXED, "resource_name": "*"},
            "a PREFIXED pattern \\* is not a wildcard: use a LITERAL \\*",
        ),
        ({"principal": "alice"}, "principal 'alice' is not a principal: write it as Type:name"),
        ({"principal": "User:"}, "is not a principal"),
        ({"principal": ":alice"}, "is not a principal"),
        ({"host": ""}, "host is empty: give the client's IP address, or \\* for every host"),
        ({"resource_type": 7}, "resource_type 7 is unknown: use one of TOPIC, GROUP"),
        ({"operation": 0}, "operation 0 is unknown"),
        ({"permission": "ALLOW"}, "permission 'ALLOW' is unknown"),
        (
            {"operation": Op.CLUSTER_ACTION},
            "operation CLUSTER_ACTION does not apply to TOPIC: use one of ALL, READ, WRITE",
        ),
    ],
)
def test_problems_say_what_to_fix(changes: dict, message: str) -> None:
    found = problem(**changes)
    assert found is not None
    assert re.search(message, found), found


# Kafka's table, written out again rather than read from the module under test.
KAFKA_OPERATIONS = {
    ResourceType.CLUSTER: "ALL ALTER ALTER_CONFIGS CLUSTER_ACTION CREATE DESCRIBE "
    "DESCRIBE_CONFIGS IDEMPOTENT_WRITE",
    ResourceType.TOPIC: "ALL ALTER ALTER_CONFIGS CREATE DELETE DESCRIBE DESCRIBE_CONFIGS "
    "READ WRITE",
    ResourceType.GROUP: "ALL DELETE DESCRIBE READ",
    ResourceType.TRANSACTIONAL_ID: "ALL DESCRIBE WRITE",
}


@pytest.mark.parametrize("resource_type", list(ResourceType))
def test_operations_per_resource_type_are_kafkas(resource_type: ResourceType) -> None:
    expected = {Op[name] for name in KAFKA_OPERATIONS[resource_type].split()}
    assert set(SUPPORTED_OPERATIONS[resource_type]) == expected
    name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else "x"
    for operation in Op:
        found = problem(resource_type=resource_type, resource_name=name, operation=operation)
        assert (found is None) == (operation in expected), (operation, found)


def test_filter_problems() -> None:
    assert AclFilter().problem() is None
    assert AclFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.MATCH).problem() is None
    assert "resource_name is empty" in (AclFilter(resource_name="").problem() or "")
    assert "host is empty" in (AclFilter(host="").problem() or "")
    assert "is not a principal" in (AclFilter(principal="alice").problem() or "")
    assert "resource_type 9 is unknown" in (AclFilter(resource_type=9).problem() or "")  # type: ignore[arg-type]
    assert "operation 99 is unknown" in (AclFilter(operation=99).problem() or "")  # type: ignore[arg-type]


def topic(name: str, pattern: PatternType, principal: str = "User:alice") -> AclBinding:
    return dataclasses.replace(VALID, resource_name=name, pattern_type=pattern, principal=principal)


LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ORDERS, STAR, ORD, OR_, PAY = (
    topic("orders", LIT),
    topic("*", LIT),
    topic("ord", PRE),
    topic("orders-eu", PRE),
    topic("payments", LIT, "User:bob"),
)
GROUP_ORDERS = dataclasses.replace(ORDERS, resource_type=ResourceType.GROUP, operation=Op.DELETE)
ALL_BINDINGS = Acls.empty().with_added([ORDERS, STAR, ORD, OR_, PAY, GROUP_ORDERS])


@pytest.mark.parametrize(
    ("acl_filter", "expected"),
    [
        (AclFilter(), [ORDERS, STAR, ORD, OR_, PAY, GROUP_ORDERS]),
        (AclFilter(ResourceType.TOPIC), [ORDERS, STAR, ORD, OR_, PAY]),
        (AclFilter(resource_name="orders"), [ORDERS, GROUP_ORDERS]),
        (AclFilter(ResourceType.TOPIC, "orders", LIT), [ORDERS]),
        (AclFilter(ResourceType.TOPIC, "ord", PRE), [ORD]),
        (AclFilter(ResourceType.TOPIC, "ord", LIT), []),
        (AclFilter(ResourceType.TOPIC, "ord"), [ORD]),
        (AclFilter(ResourceType.TOPIC, "orders", PatternType.MATCH), [ORDERS, STAR, ORD]),
        (AclFilter(ResourceType.TOPIC, "orders-eu-1", PatternType.MATCH), [STAR, ORD, OR_]),
        (AclFilter(ResourceType.TOPIC, "*", PatternType.MATCH), [STAR]),
        (AclFilter(ResourceType.TOPIC, None, PatternType.MATCH), [ORDERS, STAR, ORD, OR_, PAY]),
        (AclFilter(pattern_type=PRE), [ORD, OR_]),
        (AclFilter(principal="User:bob"), [PAY]),
        (AclFilter(host="10.0.0.1"), []),
        (AclFilter(host="*", operation=Op.DELETE), [GROUP_ORDERS]),
        (AclFilter(operation=Op.ALL), []),
        (AclFilter(permission=Permission.DENY), []),
        (AclFilter(permission=Permission.ALLOW, resource_type=ResourceType.GROUP), [GROUP_ORDERS]),
    ],
)
def test_filters_select_as_kafka_does(acl_filter: AclFilter, expected: list[AclBinding]) -> None:
    assert ALL_BINDINGS.matching(acl_filter) == sorted(expected)
    assert [b for b in ALL_BINDINGS if acl_filter.matches(b)] == sorted(expected)
