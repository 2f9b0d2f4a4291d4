"""Goal: a consumer assigned more partitions on one broker than one request may name
(`limits.request_partitions_max`; the broker refuses more with RESOURCE_EXHAUSTED) still works.
Before, the fetch session named every partition it added or forgot in one incremental fetch, and
every wanted partition in a full one, and ListOffsets named every partition reset on a broker: each
such request was refused, for ever, so the consumer never fetched anything.

Method: the pure cores (FetchSessionClient, BrokerFetchSessions) and the consumer driver against an
in-memory broker (test_client_consumer_driver.py's fakes), with the limit lowered to 2.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from list_offsets_answers import list_offsets_answer

from samsa.client import group_driver
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.fetch_sessions import BrokerFetchSessions
from samsa.common import limits
from samsa.common.fetch_session_client import FetchParts, FetchPosition, FetchSessionClient
from samsa.v1 import broker_pb2

LIMIT = 2
KEYS = [("t", number) for number in range(5)]


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "request_partitions_max", LIMIT)
    monkeypatch.setattr(group_driver, "REQUEST_PARTITIONS_MAX", LIMIT)


def at(offset: int) -> FetchPosition:
    return FetchPosition(offset, -1, -1, 1024)


def count(parts: FetchParts) -> int:
    return len(parts.partitions) + len(parts.forgotten)


def test_a_full_fetch_opens_the_session_with_the_limit_and_adds_the_rest_in_turn() -> None:
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    named: list[tuple[str, int]] = []
    mores = []
    for _ in range(3):
        parts = client.build()
        assert count(parts) <= LIMIT
        named += parts.partitions
        mores.append(parts.more)
        client.on_answer(parts, session_id=7)
    assert sorted(named) == KEYS and mores == [True, True, False]
    assert all(client.sent(key) == at(0) for key in KEYS)
    assert count(client.build()) == 0


def test_forgetting_more_partitions_than_the_limit_takes_several_fetches() -> None:
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    for _ in range(3):
        client.on_answer(client.build(), session_id=7)
    for key in KEYS:
        client.set(key, None)
    forgotten: list[tuple[str, int]] = []
    for _ in range(3):
        parts = client.build()
        assert count(parts) <= LIMIT and not parts.partitions
        forgotten += parts.forgotten
        client.on_answer(parts, session_id=7)
    assert sorted(forgotten) == KEYS and all(client.sent(key) is None for key in KEYS)


def test_a_broker_keeping_no_session_gets_full_fetches_that_take_turns() -> None:
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    named: set[tuple[str, int]] = set()
    for _ in range(3):
        parts = client.build()
        assert parts.full and count(parts) <= LIMIT
        named |= set(parts.partitions)
        client.on_answer(parts, session_id=0)
    assert named == set(KEYS)


def test_partitions_always_moving_are_named_in_turn_none_left_waiting() -> None:
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    for _ in range(3):
        client.on_answer(client.build(), session_id=7)
    last_named = dict.fromkeys(KEYS, 0)
    for request in range(1, 13):
        for key in KEYS:  # every partition has news after every fetch
            client.set(key, at(request))
        parts = client.build()
        assert count(parts) <= LIMIT
        for key in parts.partitions:
            last_named[key] = request
        client.on_answer(parts, session_id=7)
        assert all(request - last <= 3 for last in last_named.values()), last_named


def test_the_consumer_fetch_names_at_most_the_limit_and_does_not_long_poll_while_some_wait() -> (
    None
):
    sessions = BrokerFetchSessions(partition_max_bytes=1024)
    offsets = dict.fromkeys(KEYS, 0)
    requested: list[tuple[str, int]] = []
    for _ in range(3):
        request, parts = sessions.request(1, offsets, {}, max_wait_ms=500)
        names = [(t.name, p.partition) for t in request.topics for p in t.partitions]
        assert len(names) <= LIMIT
        assert request.max_wait_ms == (0 if parts.more else 500)
        requested += names
        sessions.on_answer(1, parts, broker_pb2.FetchResponse(session_id=7))
    assert sorted(requested) == KEYS


def test_partitions_back_from_another_broker_are_named_even_when_the_limit_defers_them() -> None:
    """Named because the broker's session thinks they were answered (fetch_sessions.py's doc):
    left out of one fetch by the limit, they must still be named in a later one."""
    sessions = BrokerFetchSessions(partition_max_bytes=1024)
    offsets = dict.fromkeys(KEYS, 0)
    for _ in range(3):
        _, parts = sessions.request(1, offsets, {})
        sessions.on_answer(1, parts, broker_pb2.FetchResponse(session_id=7))
    moved = dict.fromkeys(KEYS[2:], 0)  # more than one fetch may name
    _, parts = sessions.request(2, moved, {})  # a read replica, and back
    sessions.on_answer(2, parts, broker_pb2.FetchResponse(session_id=8))
    named: set[tuple[str, int]] = set()
    for step in range(1, 5):
        moving = {key: step for key in KEYS[:2]}  # the others have news every time
        request, parts = sessions.request(1, {**moving, **moved}, {})
        named |= {(t.name, p.partition) for t in request.topics for p in t.partitions}
        sessions.on_answer(1, parts, broker_pb2.FetchResponse(session_id=7))
    assert set(moved) <= named


class Metadata:
    def __init__(self) -> None:
        self.leaders = dict.fromkeys(KEYS, 1)
        self.endpoints = {1: "broker-1"}
        self.partition_counts = {"t": len(KEYS)}
        self.topic_ids: dict[str, bytes] = {}

    def needs_refresh(self) -> bool:
        return False

    def mark_stale(self) -> None:
        pass

    def refresh(self, topics: object = ()) -> None:
        pass

    def keep(self, topics: object) -> None:
        pass

    def transient(self, topics: object) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


class Broker:
    """Refuses a ListOffsets of more than the limit, as the real one does."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def ListOffsets(self, request: broker_pb2.ListOffsetsRequest, timeout: float) -> object:
        size = sum(len(topic.partitions) for topic in request.topics)
        self.sizes.append(size)
        assert size <= limits.request_partitions_max, f"refused: {size} partitions"
        return list_offsets_answer(request, 40)


def test_list_offsets_of_more_partitions_than_the_limit_is_sent_in_pieces() -> None:
    async def main() -> None:
        broker = Broker()
        config = ConsumerConfig.from_dict({"bootstrap.servers": "localhost:1"})
        driver = ConsumerDriver(config, Metadata(), lambda: None)  # type: ignore[arg-type]
        driver._stub = lambda endpoint: broker  # type: ignore[method-assign,assignment,return-value]
        spec = (broker_pb2.OFFSET_SPEC_LATEST, -1)
        found = await driver.list_offsets(dict.fromkeys(KEYS, spec), 1)
        assert found == dict.fromkeys(KEYS, (40, 0))
        assert sorted(broker.sizes) == [1, 2, 2]

    asyncio.run(main())
