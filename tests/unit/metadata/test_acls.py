"""Goal: `authorize` makes Kafka's decision, one rule at a time: super users, a resource without
ACLs under both settings of allow.everyone.if.no.acl.found, DENY before ALLOW, ALL, DESCRIBE and
DESCRIBE_CONFIGS implied by an ALLOW (never by a DENY), the literal `*`, prefixed patterns,
wildcard principal and host, and resource types that never see each other's bindings; and that
`Acls` stays immutable as new sets are derived from it.

Method: small hand-built sets of bindings, each test naming the one rule it checks.
"""

from __future__ import annotations

import pytest

from samsa.metadata.acls import (
    ANONYMOUS,
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Acls,
    AuthorizerSettings,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    authorize,
    parse_super_users,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"
OFF = AuthorizerSettings()


def binding(
    operation: Operation = Op.READ,
    permission: Permission = ALLOW,
    *,
    name: str = "orders",
    resource_type: ResourceType = TOPIC,
    pattern: PatternType = LITERAL,
    principal: str = ALICE,
    host: str = WILDCARD,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def allowed(
    bindings: list[AclBinding],
    operation: Operation = Op.READ,
    *,
    name: str = "orders",
    resource_type: ResourceType = TOPIC,
    principal: str = ALICE,
    host: str = HOST,
    settings: AuthorizerSettings = OFF,
) -> bool:
    acls = Acls.empty().with_added(bindings)
    return authorize(acls, settings, principal, host, operation, resource_type, name)


def test_super_user_is_allowed_even_against_a_deny() -> None:
    settings = AuthorizerSettings(super_users=frozenset({ALICE}))
    assert allowed([binding(Op.ALL, DENY)], Op.DELETE, settings=settings)
    assert allowed([], Op.DELETE, settings=settings)
    assert not allowed([binding(Op.ALL, DENY)], Op.DELETE, principal=BOB, settings=settings)


@pytest.mark.parametrize("allow_if_no_acl", [False, True])
def test_a_resource_without_any_acl_follows_the_setting(allow_if_no_acl: bool) -> None:
    settings = AuthorizerSettings(allow_if_no_acl=allow_if_no_acl)
    elsewhere = [binding(name="payments"), binding(Op.ALL, DENY, resource_type=GROUP)]
    assert allowed(elsewhere, Op.WRITE, settings=settings) is allow_if_no_acl
    assert allowed([], Op.READ, settings=settings) is allow_if_no_acl


def test_an_acl_for_someone_else_means_the_setting_no_longer_applies() -> None:
    settings = AuthorizerSettings(allow_if_no_acl=True)
    assert not allowed([binding(principal=BOB)], Op.READ, settings=settings)


def test_allow_of_the_operation_allows_and_nothing_else() -> None:
    assert allowed([binding(Op.READ)], Op.READ)
    assert not allowed([binding(Op.READ)], Op.WRITE)
    assert not allowed([binding(Op.READ)], Op.READ, principal=BOB)


def test_deny_beats_allow_whatever_the_pattern() -> None:
    deny_prefixed = binding(Op.READ, DENY, name="ord", pattern=PREFIXED)
    assert not allowed([binding(Op.READ), binding(Op.READ, DENY)], Op.READ)
    assert not allowed([binding(Op.ALL), deny_prefixed], Op.READ)
    assert not allowed([binding(Op.READ, name=WILDCARD), binding(Op.READ, DENY)], Op.READ)
    assert allowed([binding(Op.ALL), deny_prefixed], Op.WRITE)


def test_all_allows_and_denies_every_operation() -> None:
    for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER_CONFIGS, Op.DESCRIBE):
        assert allowed([binding(Op.ALL)], operation)
        assert not allowed([binding(Op.ALL), binding(Op.ALL, DENY)], operation)
        assert not allowed([binding(operation), binding(Op.ALL, DENY)], operation)


@pytest.mark.parametrize("implying", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied_by_an_allow_of_read_write_delete_or_alter(implying: Op) -> None:
    assert allowed([binding(implying)], Op.DESCRIBE)
    assert not allowed([binding(implying)], Op.DESCRIBE_CONFIGS)


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    assert allowed([binding(Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not allowed([binding(Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS)
    assert not allowed([binding(Op.CREATE)], Op.DESCRIBE)
    assert not allowed([binding(Op.DESCRIBE)], Op.READ)


def test_a_deny_implies_nothing() -> None:
    assert allowed([binding(Op.DESCRIBE), binding(Op.READ, DENY)], Op.DESCRIBE)
    assert allowed(
        [binding(Op.DESCRIBE_CONFIGS), binding(Op.ALTER_CONFIGS, DENY)], Op.DESCRIBE_CONFIGS
    )
    assert not allowed([binding(Op.READ), binding(Op.DESCRIBE, DENY)], Op.DESCRIBE)


def test_the_literal_wildcard_applies_to_every_name_of_its_type() -> None:
    everything = [binding(Op.READ, name=WILDCARD)]
    assert allowed(everything, Op.READ, name="anything")
    assert allowed(everything, Op.READ, name=WILDCARD)
    assert not allowed(everything, Op.READ, name="anything", resource_type=GROUP)


def test_prefixed_patterns_apply_to_names_starting_with_them() -> None:
    by_prefix = [binding(Op.WRITE, name="ord", pattern=PREFIXED)]
    assert allowed(by_prefix, Op.WRITE, name="orders")
    assert allowed(by_prefix, Op.WRITE, name="ord")
    assert not allowed(by_prefix, Op.WRITE, name="or")
    assert not allowed(by_prefix, Op.WRITE, name="payments-orders")
    literal_only = [binding(Op.WRITE, name="ord")]
    assert not allowed(literal_only, Op.WRITE, name="orders")


def test_several_prefix_lengths_are_all_consulted() -> None:
    bindings = [
        binding(Op.READ, name="a", pattern=PREFIXED),
        binding(Op.WRITE, name="abc", pattern=PREFIXED),
        binding(Op.DELETE, name="abcdefgh", pattern=PREFIXED),
    ]
    assert allowed(bindings, Op.READ, name="abcd")
    assert allowed(bindings, Op.WRITE, name="abcd")
    assert not allowed(bindings, Op.DELETE, name="abcd")
    assert allowed(bindings, Op.DELETE, name="abcdefghij")


def test_wildcard_principal_and_host_match_everyone() -> None:
    anyone = [binding(Op.READ, principal=WILDCARD_PRINCIPAL)]
    assert allowed(anyone, Op.READ, principal=BOB)
    assert allowed(anyone, Op.READ, principal=ANONYMOUS)
    assert allowed([binding(Op.READ, host=HOST)], Op.READ, host=HOST)
    assert not allowed([binding(Op.READ, host=HOST)], Op.READ, host="10.0.0.2")
    deny_anyone = [binding(Op.READ), binding(Op.READ, DENY, principal=WILDCARD_PRINCIPAL)]
    assert not allowed(deny_anyone, Op.READ)
    deny_host = [binding(Op.READ), binding(Op.READ, DENY, host="10.0.0.2")]
    assert allowed(deny_host, Op.READ, host=HOST)
    assert not allowed(deny_host, Op.READ, host="10.0.0.2")


def test_resource_types_are_independent() -> None:
    group_acl = [binding(Op.READ, resource_type=GROUP, name="orders")]
    assert allowed(group_acl, Op.READ, resource_type=GROUP)
    assert not allowed(group_acl, Op.READ, resource_type=TOPIC)
    cluster = [binding(Op.CREATE, resource_type=CLUSTER, name=CLUSTER_NAME)]
    assert allowed(cluster, Op.CREATE, resource_type=CLUSTER, name=CLUSTER_NAME)
    assert not allowed(cluster, Op.CREATE, name=CLUSTER_NAME)


def test_acls_are_immutable_sets() -> None:
    one, two = binding(Op.READ), binding(Op.WRITE)
    empty = Acls.empty()
    first = empty.with_added([one])
    both = first.with_added([two, one])
    assert (len(empty), len(first), len(both)) == (0, 1, 2)
    assert list(both) == sorted([one, two])
    assert first.with_added([one]) is first
    back = both.without([two, binding(Op.DELETE)])
    assert back == first and len(both) == 2
    assert not authorize(back, OFF, ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert authorize(both, OFF, ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert len(both.without([one, two])) == 0
    assert both.without([one, two]).resource_acls(TOPIC, "orders") == []
    with pytest.raises(ValueError, match="PREFIXED pattern"):
        empty.with_added([binding(name=WILDCARD, pattern=PREFIXED)])


def test_parse_super_users() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" User:alice ; ;User:CN=bob,O=samsa;") == {
        ALICE,
        "User:CN=bob,O=samsa",
    }
    with pytest.raises(ValueError, match="'alice' is not a principal"):
        parse_super_users("User:bob;alice")
    with pytest.raises(ValueError, match="User:"):
        parse_super_users("User:")
