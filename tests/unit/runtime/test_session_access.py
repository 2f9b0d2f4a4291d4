"""Goal: a fetch session's topics are decided again exactly when the ACLs object or the caller
changed since they were last all allowed; a refused topic refuses the fetch unless the fetch
forgets all of it, and then no grant is recorded; only incremental fetches (Fetch or
FetchStream, session id set, epoch > 0) are concerned.

Method: session_access's pure functions on a stand-in session (a partitions dict and a grant),
with `allowed` functions that record the topics they were asked about; ACLs objects from
Acls.empty() / with_added (a new object per change, as the metadata image makes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from samsa.metadata.acls import AclBinding, Acls, Operation, PatternType, Permission, ResourceType
from samsa.services.runtime.session_access import (
    FETCH,
    FETCH_STREAM,
    NO_GRANT,
    SessionGrant,
    covered_topics,
    forgotten_keys,
    incremental_fetch,
    refused_topic,
)
from samsa.v1 import broker_pb2

ALICE = "User:alice"


@dataclass
class Session:
    partitions: dict[tuple[str, int], Any]
    grant: SessionGrant = field(default=NO_GRANT)


def session(*keys: tuple[str, int]) -> Session:
    return Session(dict.fromkeys(keys))


class Asked:
    """An `allowed` that refuses `refused` and records every topic it was asked about."""

    def __init__(self, *refused: str) -> None:
        self.refused = set(refused)
        self.topics: list[str] = []

    def __call__(self, topic: str) -> bool:
        self.topics.append(topic)
        return topic not in self.refused


def acls_with(topic: str) -> Acls:
    binding = AclBinding(
        ResourceType.TOPIC, topic, PatternType.LITERAL, ALICE, "*", Operation.READ, Permission.ALLOW
    )
    return Acls.empty().with_added([binding])


def test_covered_topics_are_each_topic_once_minus_the_forgotten() -> None:
    keys = [("a", 0), ("b", 0), ("a", 1), ("c", 0)]
    assert covered_topics(keys) == ["a", "b", "c"]
    assert covered_topics(keys, {("a", 0), ("c", 0)}) == ["b", "a"]  # a keeps partition 1
    assert covered_topics([]) == []


def test_the_first_decision_walks_the_session_and_records_the_grant() -> None:
    s, acls, asked = session(("a", 0), ("a", 1), ("b", 0)), acls_with("a"), Asked()
    assert refused_topic(s, acls, ALICE, "h", asked) is None
    assert asked.topics == ["a", "b"]
    assert s.grant == SessionGrant(acls, ALICE, "h")


def test_the_same_acls_and_caller_decide_nothing() -> None:
    s, acls = session(("a", 0), ("b", 0)), acls_with("a")
    refused_topic(s, acls, ALICE, "h", Asked())
    asked = Asked("a", "b")  # would refuse: never asked
    assert refused_topic(s, acls, ALICE, "h", asked) is None
    assert asked.topics == []


def test_new_acls_or_another_caller_decide_again() -> None:
    s, acls = session(("a", 0), ("b", 0)), acls_with("a")
    refused_topic(s, acls, ALICE, "h", Asked())
    changed = acls_with("a")  # equal content, a new object: a change as the image sees it
    for acls_now, principal, host in [
        (changed, ALICE, "h"),
        (acls, "User:bob", "h"),
        (acls, ALICE, "other-host"),
    ]:
        s.grant = SessionGrant(acls, ALICE, "h")
        asked = Asked("b")
        assert refused_topic(s, acls_now, principal, host, asked) == "b"
        assert asked.topics == ["a", "b"]
        assert s.grant == SessionGrant(acls, ALICE, "h")  # a refusal records nothing


def test_a_refused_topic_the_fetch_forgets_entirely_admits_it_without_a_grant() -> None:
    s, acls = session(("a", 0), ("b", 0), ("b", 1)), acls_with("a")
    assert refused_topic(s, acls, ALICE, "h", Asked("b"), lambda: {("b", 0), ("b", 1)}) is None
    assert s.grant is NO_GRANT  # the broker may yet refuse the fetch and keep b
    # Forgetting one partition of it is not enough: the session goes on reading the other.
    assert refused_topic(s, acls, ALICE, "h", Asked("b"), lambda: {("b", 0)}) == "b"


def test_an_empty_session_is_allowed() -> None:
    s = session()
    assert refused_topic(s, Acls.empty(), ALICE, "h", Asked()) is None


def fetch(session_id: int, epoch: int, forgotten: dict[str, list[int]] | None = None) -> Any:
    request = broker_pb2.FetchRequest(session_id=session_id, session_epoch=epoch)
    for name, partitions in (forgotten or {}).items():
        request.forgotten_topics.add(name=name, partitions=partitions)
    return request


def test_only_incremental_fetches_are_concerned() -> None:
    incremental = fetch(7, 3)
    assert incremental_fetch(FETCH, incremental) == (7, incremental)
    wrapped = broker_pb2.FetchStreamRequest(request=incremental)
    assert incremental_fetch(FETCH_STREAM, wrapped) == (7, wrapped.request)
    assert incremental_fetch(FETCH, fetch(0, 0)) is None  # sessionless or opening
    assert incremental_fetch(FETCH, fetch(7, 0)) is None  # starting over: names all it reads
    assert incremental_fetch(FETCH, fetch(7, -1)) is None  # closing: sessionless
    produce = broker_pb2.ProduceRequest()
    assert incremental_fetch("/samsa.v1.BrokerService/Produce", produce) is None


def test_forgotten_keys_are_the_requests_forgotten_partitions() -> None:
    assert forgotten_keys(fetch(7, 3, {"a": [0, 2], "b": [1]})) == {("a", 0), ("a", 2), ("b", 1)}
