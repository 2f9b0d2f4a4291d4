"""Access control lists (KIP-11, KIP-290, KIP-801): bindings, filters, and the authorize decision.

Theory of operation. An ACL binding pairs a resource pattern (type, name, LITERAL or PREFIXED)
with an entry (principal, host, operation, ALLOW or DENY). `Acls` is the immutable set of
bindings a metadata image holds; every controller, broker and coordinator derives it from the
metadata log and decides locally with `authorize`, which follows Kafka's StandardAuthorizer:
super users are allowed; a resource with no binding at all is allowed only when
`allow.everyone.if.no.acl.found`; otherwise any matching DENY wins, then any matching ALLOW
(DESCRIBE implied by READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS).
`AclFilter` selects bindings for DescribeAcls and DeleteAcls with Kafka's filter semantics.
`Acls` indexes bindings by resource pattern and then by principal, so a decision looks at the
bindings of the resource's literal name, of the literal `*`, and of the prefixes of the name
that carry some binding (one dict look-up per distinct prefix length), never at every binding.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType


class ResourceType(IntEnum):
    """The kind of resource a binding protects (Kafka's numbers)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    """How a binding's resource name is matched; ANY and MATCH exist only in filters."""

    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    """What a principal does to a resource (Kafka's numbers); ANY exists only in filters."""

    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    """Whether a binding allows or denies; ANY exists only in filters."""

    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
ANONYMOUS = "User:ANONYMOUS"
WILDCARD_PRINCIPAL = "User:*"


# The operations Kafka accepts for each resource type (kafka-acls refuses the others): a binding
# for another operation could never apply to a request, so storing it would only mislead.
_O = Operation
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[Operation]] = MappingProxyType(
    {
        ResourceType.TOPIC: frozenset(
            {_O.ALL, _O.ALTER, _O.ALTER_CONFIGS, _O.CREATE, _O.DELETE, _O.DESCRIBE}
            | {_O.DESCRIBE_CONFIGS, _O.READ, _O.WRITE}
        ),
        ResourceType.GROUP: frozenset({_O.ALL, _O.DELETE, _O.DESCRIBE, _O.READ}),
        ResourceType.CLUSTER: frozenset(
            {_O.ALL, _O.ALTER, _O.ALTER_CONFIGS, _O.CLUSTER_ACTION, _O.CREATE, _O.DESCRIBE}
            | {_O.DESCRIBE_CONFIGS, _O.IDEMPOTENT_WRITE}
        ),
        ResourceType.TRANSACTIONAL_ID: frozenset({_O.ALL, _O.DESCRIBE, _O.WRITE}),
    }
)

# An ALLOW of any of these operations also allows the key (Kafka's implied operations). A DENY
# never implies anything: denying READ does not deny DESCRIBE.
_IMPLIED_BY: Mapping[Operation, frozenset[Operation]] = MappingProxyType(
    {
        _O.DESCRIBE: frozenset({_O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
        _O.DESCRIBE_CONFIGS: frozenset({_O.ALTER_CONFIGS}),
    }
)
_ALLOWED_BY: Mapping[Operation, frozenset[Operation]] = MappingProxyType(
    {op: frozenset({op, _O.ALL}) | _IMPLIED_BY.get(op, frozenset()) for op in Operation}
)


def _names(values: Iterable[IntEnum]) -> str:
    return ", ".join(value.name for value in sorted(values))


def _enum_problem(kind: type[IntEnum], field: str, value: object) -> str | None:
    if isinstance(value, int) and value in kind._value2member_map_:
        return None
    return f"{field} {value!r} is unknown: use one of {_names(kind)}"


def principal_problem(principal: str, field: str = "principal") -> str | None:
    """Why `principal` is not a `Type:name` principal (e.g. `User:alice`), or None."""
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        return f"{field} {principal!r} is not a principal: write it as Type:name, e.g. User:alice"
    return None


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an entry. Ordered so that listings are stable."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def problem(self) -> str | None:
        """Why this binding cannot be stored, saying what to fix; None when it is valid."""
        for kind, field, value in (
            (ResourceType, "resource_type", self.resource_type),
            (PatternType, "pattern_type", self.pattern_type),
            (Operation, "operation", self.operation),
            (Permission, "permission", self.permission),
        ):
            problem = _enum_problem(kind, field, value)
            if problem is not None:
                return problem
        resource_type = ResourceType(self.resource_type)
        pattern_type = PatternType(self.pattern_type)
        operation = Operation(self.operation)
        if pattern_type in (PatternType.ANY, PatternType.MATCH):
            return (
                f"pattern_type {pattern_type.name} is for filters: a binding is LITERAL or PREFIXED"
            )
        if operation == Operation.ANY:
            return "operation ANY is for filters: a binding names one operation, or ALL"
        if self.permission == Permission.ANY:
            return "permission ANY is for filters: a binding is ALLOW or DENY"
        if not self.resource_name:
            return "resource_name is empty: name the resource, or * (LITERAL) for all of its type"
        if resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"the CLUSTER resource is named {CLUSTER_NAME}, not {self.resource_name!r}"
        if pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            return "a PREFIXED pattern * is not a wildcard: use a LITERAL * for every resource"
        problem = principal_problem(self.principal)
        if problem is not None:
            return problem
        if not self.host:
            return "host is empty: give the client's IP address, or * for every host"
        supported = SUPPORTED_OPERATIONS[resource_type]
        if operation not in supported:
            return (
                f"operation {operation.name} does not apply to {resource_type.name}: "
                f"use one of {_names(supported)}"
            )
        return None


@dataclass(frozen=True)
class AclFilter:
    """Selects bindings (DescribeAcls, DeleteAcls); None and ANY match every value.

    pattern_type LITERAL or PREFIXED selects bindings of that pattern whose name equals
    resource_name; ANY, of either pattern; MATCH, every binding that applies to a resource
    named resource_name (the literal name, the literal *, and prefixes of the name).
    """

    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        """Whether `binding` is selected; MATCH selects the patterns that apply to the name."""
        if self.resource_type is not None and binding.resource_type != self.resource_type:
            return False
        if self.principal is not None and binding.principal != self.principal:
            return False
        if self.host is not None and binding.host != self.host:
            return False
        if self.operation != Operation.ANY and binding.operation != self.operation:
            return False
        if self.permission != Permission.ANY and binding.permission != self.permission:
            return False
        return self._matches_pattern(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        pattern_type = self.pattern_type
        if pattern_type == PatternType.MATCH:
            if self.resource_name is None:
                return True
            if binding.pattern_type == PatternType.PREFIXED:
                return self.resource_name.startswith(binding.resource_name)
            return binding.resource_name in (self.resource_name, WILDCARD)
        if pattern_type != PatternType.ANY and binding.pattern_type != pattern_type:
            return False
        return self.resource_name is None or binding.resource_name == self.resource_name

    def problem(self) -> str | None:
        """Why this filter cannot be used, saying what to fix; None when it is valid."""
        if self.resource_type is not None:
            problem = _enum_problem(ResourceType, "resource_type", self.resource_type)
            if problem is not None:
                return problem
        for kind, field, value in (
            (PatternType, "pattern_type", self.pattern_type),
            (Operation, "operation", self.operation),
            (Permission, "permission", self.permission),
        ):
            problem = _enum_problem(kind, field, value)
            if problem is not None:
                return problem
        for field, text in (("resource_name", self.resource_name), ("host", self.host)):
            if text is not None and not text:
                return f"{field} is empty: leave it unset to match any {field}"
        if self.principal is not None:
            return principal_problem(self.principal)
        return None


# A resource pattern's bindings, by principal: (principal, bindings) pairs looked up by name.
_ByPrincipal = Mapping[str, tuple[AclBinding, ...]]


def _index_add(index: dict, key: object, binding: AclBinding) -> None:
    by_principal = dict(index.get(key, {}))
    by_principal[binding.principal] = (*by_principal.get(binding.principal, ()), binding)
    index[key] = by_principal


def _index_remove(index: dict, key: object, binding: AclBinding) -> None:
    by_principal = dict(index[key])
    rest = tuple(b for b in by_principal[binding.principal] if b != binding)
    if rest:
        by_principal[binding.principal] = rest
    else:
        del by_principal[binding.principal]
    if by_principal:
        index[key] = by_principal
    else:
        del index[key]


class Acls:
    """The immutable set of bindings of a metadata image, indexed for `authorize`.

    `_literal` maps (type, name) to the bindings of that LITERAL pattern (`*` included) and
    `_prefixed` maps (type, prefix) to those of that PREFIXED pattern, both by principal;
    `_prefix_lengths` holds, per type, the distinct lengths of its prefixes, so a name is
    checked against every prefix with one look-up per length. Deriving a new set copies the
    top-level dicts and the touched entries only; nothing is ever mutated after construction.
    """

    __slots__ = ("_bindings", "_literal", "_prefix_lengths", "_prefixed")

    def __init__(
        self,
        bindings: frozenset[AclBinding],
        literal: Mapping[tuple[ResourceType, str], _ByPrincipal],
        prefixed: Mapping[tuple[ResourceType, str], _ByPrincipal],
    ) -> None:
        self._bindings = bindings
        self._literal = literal
        self._prefixed = prefixed
        lengths: dict[ResourceType, set[int]] = {}
        for resource_type, prefix in prefixed:
            lengths.setdefault(resource_type, set()).add(len(prefix))
        self._prefix_lengths = {kind: tuple(sorted(ls)) for kind, ls in lengths.items()}

    @staticmethod
    def empty() -> Acls:
        """No bindings."""
        return _EMPTY

    def with_added(self, bindings: Iterable[AclBinding]) -> Acls:
        """A new set with `bindings` added (already present ones are kept once).

        ValueError when one has a problem(): the store validates before it writes a record.
        """
        added = frozenset(bindings) - self._bindings
        if not added:
            return self
        literal, prefixed = dict(self._literal), dict(self._prefixed)
        for binding in added:
            problem = binding.problem()
            if problem is not None:
                raise ValueError(f"cannot hold {binding}: {problem}")
            index = literal if binding.pattern_type == PatternType.LITERAL else prefixed
            _index_add(index, (binding.resource_type, binding.resource_name), binding)
        return Acls(self._bindings | added, literal, prefixed)

    def without(self, bindings: Iterable[AclBinding]) -> Acls:
        """A new set with `bindings` removed (absent ones are ignored)."""
        removed = frozenset(bindings) & self._bindings
        if not removed:
            return self
        literal, prefixed = dict(self._literal), dict(self._prefixed)
        for binding in removed:
            index = literal if binding.pattern_type == PatternType.LITERAL else prefixed
            _index_remove(index, (binding.resource_type, binding.resource_name), binding)
        return Acls(self._bindings - removed, literal, prefixed)

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings `acl_filter` selects, sorted."""
        return sorted(b for b in self._bindings if acl_filter.matches(b))

    def resource_acls(self, resource_type: ResourceType, name: str) -> list[_ByPrincipal]:
        """The bindings that apply to the named resource, by pattern then principal."""
        found = []
        literal = self._literal
        for key in ((resource_type, name), (resource_type, WILDCARD)):
            by_principal = literal.get(key)
            if by_principal is not None:
                found.append(by_principal)
        if name == WILDCARD:  # the literal * was looked up twice
            found = found[:1]
        prefixed = self._prefixed
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            by_principal = prefixed.get((resource_type, name[:length]))
            if by_principal is not None:
                found.append(by_principal)
        return found

    def __len__(self) -> int:
        return len(self._bindings)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(sorted(self._bindings))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Acls) and self._bindings == other._bindings

    def __hash__(self) -> int:
        return hash(self._bindings)

    def __repr__(self) -> str:
        return f"Acls({len(self._bindings)} bindings)"


_EMPTY = Acls(frozenset(), {}, {})


@dataclass(frozen=True)
class AuthorizerSettings:
    """`super.users` and `allow.everyone.if.no.acl.found`."""

    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False


def authorize(
    acls: Acls,
    settings: AuthorizerSettings,
    principal: str,
    host: str,
    operation: Operation,
    resource_type: ResourceType,
    resource_name: str,
) -> bool:
    """Whether `principal` connecting from `host` may do `operation` on the resource.

    Kafka's decision: a super user may; a resource with no ACL at all (for anyone) follows
    allow_if_no_acl; else, among the bindings whose principal (exact or User:*) and host (exact
    or *) match, a DENY of the operation or ALL refuses, then an ALLOW of the operation, of ALL
    or of an operation implying it allows; nothing matching refuses.
    """
    if principal in settings.super_users:
        return True
    resource_acls = acls.resource_acls(resource_type, resource_name)
    if not resource_acls:
        return settings.allow_if_no_acl
    principals = (
        (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
    )
    allowed_by = _ALLOWED_BY[operation]
    allowed = False
    for by_principal in resource_acls:
        for who in principals:
            for binding in by_principal.get(who, ()):
                if binding.host != host and binding.host != WILDCARD:
                    continue
                if binding.permission == Permission.DENY:
                    if binding.operation == operation or binding.operation == Operation.ALL:
                        return False
                elif binding.operation in allowed_by:
                    allowed = True
    return allowed


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: ";"-separated principals, blanks dropped; ValueError naming a bad one."""
    principals = set()
    for part in text.split(";"):
        principal = part.strip()
        if not principal:
            continue
        problem = principal_problem(principal, "super.users entry")
        if problem is not None:
            raise ValueError(problem)
        principals.add(principal)
    return frozenset(principals)
