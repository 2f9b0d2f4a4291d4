"""Goal: for any small set of valid bindings, `authorize` (which looks only at the index's
literal, wildcard and prefix entries) decides exactly as a brute-force reading of Kafka's rules
over every binding, and `Acls.matching` selects exactly the bindings a brute-force filter does;
deriving sets with with_added/without gives the same answers as building them at once.

Method: hypothesis draws bindings over a tiny alphabet of names (so that literals, `*`, and
prefixes of each other's names collide often), principals (with User:*) and hosts (with *), then
requests and filters over the same alphabet. The model below restates the decision from
acl_context.md over a plain list, independently of the module's index and tables.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.metadata.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclFilter,
    Acls,
    AuthorizerSettings,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    authorize,
)

NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["10.0.0.1", "10.0.0.2", "*"]
Op = Operation
IMPLIED = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
}


@st.composite
def bindings(draw: st.DrawFn) -> AclBinding:
    resource_type = draw(st.sampled_from(list(ResourceType)))
    if resource_type == ResourceType.CLUSTER:
        name, pattern = CLUSTER_NAME, PatternType.LITERAL
    else:
        name = draw(st.sampled_from(NAMES))
        pattern = PatternType.LITERAL
        if name != "*":
            pattern = draw(st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]))
    operation = draw(st.sampled_from(sorted(SUPPORTED_OPERATIONS[resource_type])))
    binding = AclBinding(
        resource_type,
        name,
        pattern,
        draw(st.sampled_from(PRINCIPALS)),
        draw(st.sampled_from(HOSTS)),
        operation,
        draw(st.sampled_from([Permission.ALLOW, Permission.DENY])),
    )
    assert binding.problem() is None
    return binding


def applies(binding: AclBinding, resource_type: ResourceType, name: str) -> bool:
    if binding.resource_type != resource_type:
        return False
    if binding.pattern_type == PatternType.PREFIXED:
        return name[: len(binding.resource_name)] == binding.resource_name
    return binding.resource_name in (name, "*")


def model(
    all_bindings: list[AclBinding],
    super_users: frozenset[str],
    allow_if_no_acl: bool,
    request: tuple[str, str, Operation, ResourceType, str],
) -> bool:
    principal, host, operation, resource_type, name = request
    if principal in super_users:
        return True
    resource = [b for b in all_bindings if applies(b, resource_type, name)]
    if not resource:
        return allow_if_no_acl
    mine = [b for b in resource if b.principal in (principal, "User:*") and b.host in (host, "*")]
    if any(b.permission == Permission.DENY and b.operation in (operation, Op.ALL) for b in mine):
        return False
    allowing = {operation, Op.ALL} | IMPLIED.get(operation, set())
    return any(b.permission == Permission.ALLOW and b.operation in allowing for b in mine)


requests = st.tuples(
    st.sampled_from(["User:alice", "User:bob", "User:carol", "User:*"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from([op for op in Operation if op != Op.ANY]),
    st.sampled_from(list(ResourceType)),
    st.sampled_from([*NAMES, "abcd", "ba", "", CLUSTER_NAME]),
)


@settings(deadline=None)  # examples: the profile of tests/conftest.py
@given(
    st.lists(bindings(), max_size=12),
    st.lists(bindings(), max_size=6),
    st.lists(requests, min_size=1, max_size=20),
    st.frozensets(st.sampled_from(["User:alice", "User:carol"]), max_size=1),
    st.booleans(),
)
def test_authorize_agrees_with_the_brute_force_model(
    kept: list[AclBinding],
    dropped: list[AclBinding],
    request_list: list[tuple[str, str, Operation, ResourceType, str]],
    super_users: frozenset[str],
    allow_if_no_acl: bool,
) -> None:
    acls = Acls.empty().with_added(kept + dropped).without(set(dropped) - set(kept))
    assert acls == Acls.empty().with_added(kept)
    authorizer = AuthorizerSettings(super_users, allow_if_no_acl)
    # Also ask, for every binding drawn, the request it speaks about (its operation on its own
    # name from its principal and host), so that stale or missing index entries show.
    aimed = [
        (
            "User:carol" if b.principal == "User:*" else b.principal,
            "10.0.0.2" if b.host == "*" else b.host,
            b.operation if b.operation != Op.ALL else Op.DESCRIBE,
            b.resource_type,
            b.resource_name + ("x" if b.pattern_type == PatternType.PREFIXED else ""),
        )
        for b in kept + dropped
    ]
    for request in request_list + aimed:
        expected = model(kept, super_users, allow_if_no_acl, request)
        assert authorize(acls, authorizer, *request) is expected, request


def filter_model(acl_filter: AclFilter, binding: AclBinding) -> bool:
    f = acl_filter
    if f.resource_type is not None and f.resource_type != binding.resource_type:
        return False
    for wanted, value in ((f.principal, binding.principal), (f.host, binding.host)):
        if wanted is not None and wanted != value:
            return False
    if f.operation not in (Op.ANY, binding.operation):
        return False
    if f.permission not in (Permission.ANY, binding.permission):
        return False
    if f.pattern_type == PatternType.MATCH:
        return f.resource_name is None or applies(binding, binding.resource_type, f.resource_name)
    if f.pattern_type not in (PatternType.ANY, binding.pattern_type):
        return False
    return f.resource_name in (None, binding.resource_name)


filters = st.builds(
    AclFilter,
    st.none() | st.sampled_from(list(ResourceType)),
    st.none() | st.sampled_from([*NAMES, "abcd", CLUSTER_NAME]),
    st.sampled_from(list(PatternType)),
    st.none() | st.sampled_from(PRINCIPALS),
    st.none() | st.sampled_from(HOSTS),
    st.sampled_from(list(Operation)),
    st.sampled_from(list(Permission)),
)


@settings(deadline=None)  # examples: the profile of tests/conftest.py
@given(st.lists(bindings(), max_size=12), st.lists(filters, min_size=1, max_size=10))
def test_matching_agrees_with_the_brute_force_filter(
    all_bindings: list[AclBinding], filter_list: list[AclFilter]
) -> None:
    acls = Acls.empty().with_added(all_bindings)
    assert len(acls) == len(set(all_bindings))
    for acl_filter in filter_list:
        assert acl_filter.problem() is None
        expected = sorted({b for b in all_bindings if filter_model(acl_filter, b)})
        assert acls.matching(acl_filter) == expected, acl_filter
