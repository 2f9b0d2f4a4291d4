"""Access control lists (KIP-11, KIP-290, KIP-801): bindings, filters, and the authorize decision.

Theory of operation. An ACL binding pairs a resource pattern (type, name, LITERAL or PREFIXED)
with an entry (principal, host, operation, ALLOW or DENY). `Acls` is the immutable set of
bindings a metadata image holds; every controller, broker and coordinator derives it from the
metadata log and decides locally with `authorize`, which follows Kafka's StandardAuthorizer:
super users are allowed; a resource with no binding at all is allowed only when
`allow.everyone.if.no.acl.found`; otherwise any matching DENY wins, then any matching ALLOW
(DESCRIBE implied by READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS).
`AclFilter` selects bindings for DescribeAcls and DeleteAcls with Kafka's filter semantics.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum


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
        return None


@dataclass(frozen=True)
class AclFilter:
    """Selects bindings (DescribeAcls, DeleteAcls); None and ANY match every value."""

    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        """Whether `binding` is selected; MATCH selects the patterns that apply to the name."""
        return True

    def problem(self) -> str | None:
        """Why this filter cannot be used, saying what to fix; None when it is valid."""
        return None


class Acls:
    """The immutable set of bindings of a metadata image, indexed for `authorize`."""

    __slots__ = ("_bindings",)

    def __init__(self, bindings: frozenset[AclBinding]) -> None:
        self._bindings = bindings

    @staticmethod
    def empty() -> Acls:
        """No bindings."""
        return Acls(frozenset())

    def with_added(self, bindings: Iterable[AclBinding]) -> Acls:
        """A new set with `bindings` added (already present ones are kept once)."""
        return Acls(self._bindings | frozenset(bindings))

    def without(self, bindings: Iterable[AclBinding]) -> Acls:
        """A new set with `bindings` removed (absent ones are ignored)."""
        return Acls(self._bindings - frozenset(bindings))

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings `acl_filter` selects, sorted."""
        return sorted(b for b in self._bindings if acl_filter.matches(b))

    def __len__(self) -> int:
        return len(self._bindings)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(sorted(self._bindings))


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
    """Whether `principal` connecting from `host` may do `operation` on the resource."""
    return principal in settings.super_users


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: ";"-separated principals, blanks dropped; ValueError naming a bad one."""
    return frozenset(part.strip() for part in text.split(";") if part.strip())
