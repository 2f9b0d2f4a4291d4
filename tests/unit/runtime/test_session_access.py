"""Goal: a fetch session's topics are walked again exactly when the ACLs object or the caller
changed since the session was last decided; the partitions of the refused topics are then marked
dirty (so that the fetch reads them and answers TOPIC_AUTHORIZATION_FAILED), and the grant is
recorded either way, so that the steady state walks nothing.

Method: session_access's pure functions on a stand-in session (a partitions dict, a dirty set
and a grant), with `refused` functions that record the topics they were asked about; ACLs
objects from Acls.empty() / with_added (a new object per change, as the metadata image makes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from samsa.metadata.acls import AclBinding, Acls, Operation, PatternType, Permission, ResourceType
from samsa.services.runtime.session_access import (
    NO_GRANT,
    SessionGrant,
    covered_topics,
    mark_refused,
)

ALICE = "User:alice"


@dataclass
class Session:
    partitions: dict[tuple[str, int], Any]
    dirty: set[tuple[str, int]] = field(default_factory=set)
    grant: SessionGrant = field(default=NO_GRANT)


def session(*keys: tuple[str, int]) -> Session:
    return Session(dict.fromkeys(keys))


class Asked:
    """A `refused` that refuses `refused` and records every topic it was asked about."""

    def __init__(self, *refused: str) -> None:
        self.refused = set(refused)
        self.topics: list[str] = []

    def __call__(self, topic: str) -> str | None:
        self.topics.append(topic)
        return f"may not READ {topic}" if topic in self.refused else None


def acls_with(topic: str) -> Acls:
    binding = AclBinding(
        ResourceType.TOPIC, topic, PatternType.LITERAL, ALICE, "*", Operation.READ, Permission.ALLOW
    )
    return Acls.empty().with_added([binding])


def test_covered_topics_are_each_topic_once() -> None:
    assert covered_topics([("a", 0), ("b", 0), ("a", 1)]) == ["a", "b"]


def test_the_first_decision_walks_the_session_once_per_topic_and_records_the_grant() -> None:
    held, acls, asked = session(("a", 0), ("a", 1), ("b", 0)), acls_with("a"), Asked()
    assert mark_refused(held, SessionGrant(acls, ALICE, "h"), asked) == []
    assert asked.topics == ["a", "b"]
    assert held.grant == SessionGrant(acls, ALICE, "h") and not held.dirty


def test_the_same_acls_and_caller_walk_nothing() -> None:
    held, acls = session(("a", 0)), acls_with("a")
    mark_refused(held, SessionGrant(acls, ALICE, "h"), Asked())
    asked = Asked("a")
    assert mark_refused(held, SessionGrant(acls, ALICE, "h"), asked) == []
    assert asked.topics == []


def test_new_acls_or_another_caller_walk_again_and_mark_the_refused_dirty() -> None:
    held, acls = session(("a", 0), ("a", 1), ("b", 0)), acls_with("a")
    mark_refused(held, SessionGrant(acls, ALICE, "h"), Asked())
    assert mark_refused(held, SessionGrant(acls_with("b"), ALICE, "h"), Asked("a")) == ["a"]
    assert held.dirty == {("a", 0), ("a", 1)}
    held.dirty.clear()
    assert mark_refused(held, SessionGrant(held.grant.acls, "User:bob", "h"), Asked("b")) == ["b"]
    assert held.dirty == {("b", 0)}
    # Recorded even with refused topics: the refused partitions are read again only on news.
    assert mark_refused(held, SessionGrant(held.grant.acls, "User:bob", "h"), Asked("b")) == []


def test_an_empty_session_is_decided_without_asking() -> None:
    asked = Asked("a")
    assert mark_refused(session(), SessionGrant(Acls.empty(), ALICE, "h"), asked) == []
    assert asked.topics == []
