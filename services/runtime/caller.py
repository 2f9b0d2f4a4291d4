"""Who is calling, for the handlers that answer each caller with what it may see.

Theory of operation. Kafka filters its listing calls by the caller's ACLs rather than refusing
them: Metadata for every topic answers the topics the caller may DESCRIBE, ListGroups the groups,
ListTransactions the transactional ids. Here the interceptor (authorization.py) decides before
the handler, and for these calls its rule is "anyone" (access_rules.py); the handler filters.
To do so without grpc plumbing in its pure parts, the interceptor sets `CALLER` around the
servicer's call to a `Caller` whose `may(operation, resource_type, name)` answers for that
caller; the handler asks `current_caller()` and passes a plain predicate (`visible`) down to its
pure core, which filters before it pages. DescribeTopics naming topics answers each one
`visible` refuses with TOPIC_AUTHORIZATION_FAILED naming the caller's `principal()`.
Produce and Fetch answer per partition alike: their handlers ask `topic_refusals(operation)`,
None when authorization is off (nothing decided, nothing asked), else why each topic is refused
(or None), decided once per distinct topic of the request; a partition of a refused topic is
answered TOPIC_AUTHORIZATION_FAILED with that message, the others are written or read.
DescribeGroups and DeleteGroups ask `refused_names` for their groups alike (Kafka's
GROUP_AUTHORIZATION_FAILED per group).

Unset (authorization off: no interceptor at all) the caller is `EVERYONE`, who may do anything;
the interceptor's caller for a cluster member's call may do anything too. Every gRPC call runs
in its own task, whose context holds its own value.

Pure: no I/O, no grpc.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Protocol

from samsa.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from samsa.services.runtime.access_rules import Access, refusal
from samsa.services.runtime.session_access import NO_GRANT, SessionGrant

__all__ = [
    "CALLER",
    "EVERYONE",
    "Caller",
    "TopicRefusals",
    "current_caller",
    "everything",
    "listing_filter",
    "refused_names",
    "topic_refusals",
    "topics_visible",
    "visible",
]

# Whether a name (of a topic, a group, a transactional id) may be shown to the caller.
Visible = Callable[[str], bool]


class Caller(Protocol):
    """The caller of the current call, as its handler may ask about it."""

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the caller may do `operation` on the resource (its ACLs allow it)."""
        ...

    def principal(self) -> str:
        """Who the caller is (`User:CN=alice,O=samsa`), for the messages of what it may not do."""
        ...

    def grant(self) -> SessionGrant:
        """The ACLs object and the caller its answers are decided under (session_access.py)."""
        ...


class _Everyone:
    """Authorization off, or a cluster member's call: may do anything."""

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return True

    def principal(self) -> str:
        return "the cluster"  # never refused anything: named in no message

    def grant(self) -> SessionGrant:
        return NO_GRANT


EVERYONE: Caller = _Everyone()
CALLER: ContextVar[Caller] = ContextVar("samsa_caller", default=EVERYONE)


def current_caller() -> Caller:
    """The caller of the call being handled (EVERYONE when authorization is off)."""
    return CALLER.get()


def everything(_name: str) -> bool:
    """The predicate that shows every name (the pure cores' default)."""
    return True


def visible(caller: Caller, operation: Operation, resource_type: ResourceType) -> Visible:
    """The predicate "the caller may do `operation` on the `resource_type` named"; a constant
    True for EVERYONE, so that the cores skip nothing and ask nothing."""
    if caller is EVERYONE:
        return everything
    return lambda name: caller.may(operation, resource_type, name)


def listing_filter(caller: Caller, resource_type: ResourceType) -> Visible:
    """What a list-all call of `resource_type` shows (Kafka's ListGroups, KIP-664's
    ListTransactions): everything to a caller with DESCRIBE on the cluster, otherwise the
    resources it may DESCRIBE."""
    if caller is EVERYONE or caller.may(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return everything
    return visible(caller, Operation.DESCRIBE, resource_type)


def topics_visible() -> Visible:
    """The topics the current caller may DESCRIBE: what DescribeTopics for every topic shows."""
    return visible(current_caller(), Operation.DESCRIBE, ResourceType.TOPIC)


class TopicRefusals:
    """Why the caller may not do `operation` on a topic (the PERMISSION_DENIED message naming
    principal, operation and topic), or None when it may: decided once per distinct topic."""

    def __init__(self, caller: Caller, operation: Operation) -> None:
        self._caller, self._operation = caller, operation
        self._decided: dict[str, str | None] = {}

    def __call__(self, name: str) -> str | None:
        decided = self._decided
        if name not in decided:
            operation, caller = self._operation, self._caller
            why = None
            if not caller.may(operation, ResourceType.TOPIC, name):
                need = (Access(operation, ResourceType.TOPIC, name),)
                why = str(refusal(caller.principal(), need))
            decided[name] = why
        return decided[name]

    def grant(self) -> SessionGrant:
        """What these decisions were made under (a fetch session keeps it: session_access)."""
        return self._caller.grant()


def topic_refusals(operation: Operation) -> TopicRefusals | None:
    """The current caller's refusals of `operation` on topics; None when authorization is off
    (EVERYONE), so that a handler asks nothing at all."""
    caller = current_caller()
    if caller is EVERYONE:
        return None
    return TopicRefusals(caller, operation)


def refused_names(
    operation: Operation, resource_type: ResourceType, names: Iterable[str]
) -> dict[str, str]:
    """Why the current caller may not do `operation` on each refused resource of `names` (the
    message naming principal, operation and resource), once per distinct name; empty with ACLs
    off."""
    caller = current_caller()
    if caller is EVERYONE:
        return {}
    refused: dict[str, str] = {}
    for name in dict.fromkeys(names):
        if not caller.may(operation, resource_type, name):
            refused[name] = str(
                refusal(caller.principal(), (Access(operation, resource_type, name),))
            )
    return refused
