"""Goal: once the revocation of partitions has begun, no poll() returns their records and they are
not fetched, as in Kafka (SubscriptionState.markPendingRevocation, KAFKA-14196: partitions are
marked pending revocation before on_partitions_revoked runs). Before, a poll() called inside
on_partitions_revoked (sync Consumer and AsyncConsumer alike) handed out the revoked partition's
buffered records: the auto-commit before revocation had committed 15, then the nested poll()
returned offsets 15-19, which the next owner reads again. seek(), position() and commit()
still work on those partitions, and a step abandoned before it ended (a cancelled poll) leaves
them fetchable until it runs again.

Method: a pure GroupMember and FetchState over which the steps are begun and ended as the
facades do (rebalance.begin_step / abandon_step / end_step), and each facade over a fake driver
with a listener that polls. No cluster, no network.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from rebalance_helpers import T, answer, member

from samsa.client import AsyncConsumer, Consumer
from samsa.client.commit_callbacks import CommitCallbacks
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_member import CallbackKind, GroupMember, MemberState, Subscription
from samsa.client.rebalance import (
    ConsumerRebalanceListener,
    abandon_step,
    begin_step,
    end_step,
)
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "auto.offset.reset": "earliest"}
P0, P1 = (T, 0), (T, 1)
LEADERS = {P0: 1, P1: 1}


def buffer(state: FetchState, tp: tuple[str, int], start: int, count: int) -> None:
    """Fetch `count` records of `tp` from `start` into the buffer (its position is kept)."""
    plan = state.fetches_to_send({tp: 1}, 0)
    node, request = plan.requests[0]
    assert [(t.name, p.partition) for t in request.topics for p in t.partitions] == [tp]
    data = build_batch([b"v"] * count, base_offset=start, partition_leader_epoch=3)
    partition = broker_pb2.FetchResponse.PartitionResponse(
        partition=tp[1], records=data, high_watermark=start + count
    )
    topic = broker_pb2.FetchResponse.TopicResponse(name=tp[0], partitions=[partition])
    state.on_fetch_answer(node, broker_pb2.FetchResponse(topics=[topic]))


def revoking_p0() -> tuple[FetchState, GroupMember]:
    """Owning partitions 0 and 1: 10..14 of partition 0 were returned by an earlier poll
    (position 15), 15..19 are buffered; then the coordinator takes partition 0 away."""
    state = FetchState(ConsumerConfig.from_dict(CONFIG))
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, 0, 1), 0)
    while (step := begin_step(m, state, auto_commit=False)) is not None:
        end_step(m, state, step, 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, 0, 1), 0)
    assert m.state is MemberState.STABLE
    state.seek(P0, 10)
    state.seek(P1, 0)
    buffer(state, P0, 10, 5)
    assert [r.offset for r in state.take(100)] == [10, 11, 12, 13, 14]
    buffer(state, P0, 15, 5)
    m.heartbeat_request(1000)
    m.on_heartbeat_answer(answer(2, 1), 1000)  # partition 0 is revoked
    return state, m


def fetched(state: FetchState) -> set[tuple[str, int]]:
    plan = state.fetches_to_send(LEADERS, 0)
    return {(t.name, p.partition) for _, r in plan.requests for t in r.topics for p in t.partitions}


def test_a_partition_being_revoked_is_neither_handed_out_nor_fetched() -> None:
    state, m = revoking_p0()
    step = begin_step(m, state, auto_commit=True)
    assert step is not None and step.callback.kind is CallbackKind.REVOKED
    assert step.commit_first == {P0: OffsetAndMetadata(15, 3)}
    assert state.take(100) == [], "records of a partition being revoked were handed out"
    assert fetched(state) == {P1}, "only partition 1 (no buffer) is fetched"
    # What a listener does to the partitions it gives back still works.
    assert state.position(P0) == 15
    assert state.consumed([P0]) == {P0: (15, 3)}
    state.seek(P0, 12)
    assert state.position(P0) == 12 and state.take(100) == []
    assert P0 not in fetched(state), "a seek does not make it fetchable again"
    end_step(m, state, step, 1000)
    assert state.assignment() == [P1] and m.owned == frozenset({P1})


def test_an_abandoned_revocation_leaves_the_partition_fetchable_until_it_runs_again() -> None:
    state, m = revoking_p0()
    step = begin_step(m, state, auto_commit=True)
    assert step is not None and state.take(100) == []
    abandon_step(m, state, step, 1000)  # the poll was cancelled: the step runs again later
    assert m.pending_callback() is not None and state.assignment() == [P0, P1]
    assert [r.offset for r in state.take(2)] == [15, 16], "owned and not being revoked"
    step = begin_step(m, state, auto_commit=True)
    assert step is not None and step.commit_first[P0] == OffsetAndMetadata(17, 3)
    assert state.take(100) == []
    end_step(m, state, step, 1000)
    assert state.assignment() == [P1]


def test_a_revoked_partition_assigned_again_is_fetched_and_handed_out() -> None:
    state, m = revoking_p0()
    step = begin_step(m, state, auto_commit=False)
    assert step is not None
    end_step(m, state, step, 1000)
    state.assign([P0, P1])  # given back to this consumer later
    state.seek(P0, 20)
    assert P0 in fetched(state)


class PollingListener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: Any = None
        self.got: list[tuple[str, int, int]] = []

    def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
        self.got.extend((r.topic, r.partition, r.offset) for r in self.consumer.poll(0))


class FakeGroup:
    """What the facades' poll uses of a GroupDriver; commits are recorded."""

    group_id = "g"

    def __init__(self, m: GroupMember) -> None:
        self.member = m
        self.commits: list[dict[Any, OffsetAndMetadata]] = []

    async def commit(self, offsets: dict[Any, OffsetAndMetadata]) -> None:
        self.commits.append(dict(offsets))

    def on_poll(self) -> tuple[bool, None]:
        return False, None

    def wake(self) -> None:
        pass

    def wake_threadsafe(self) -> None:
        pass


class FakeDriver:
    def __init__(self, m: GroupMember, state: FetchState) -> None:
        self.lock = threading.Lock()
        self.state = state
        self.group = FakeGroup(m)

    def wake(self) -> None:
        pass

    def wake_soon(self) -> None:
        pass

    def wake_threadsafe(self) -> None:
        pass


def test_the_sync_consumers_poll_inside_on_revoked_returns_none_of_the_revoked_records() -> None:
    state, m = revoking_p0()
    driver = FakeDriver(m, state)
    consumer = Consumer.__new__(Consumer)  # the facade alone: no loop thread
    consumer.config = ConsumerConfig.from_dict(CONFIG)
    consumer._driver = driver  # type: ignore[assignment]
    consumer._state = state
    consumer._progress = threading.Condition(driver.lock)
    consumer._closed = False
    consumer._owner = threading.RLock()  # thread_owner.py
    consumer._commit_callbacks = CommitCallbacks(lambda: None)  # commit_callbacks.py
    consumer._tracer = None
    consumer._close_deadline = None
    consumer._on_loop = asyncio.run  # type: ignore[method-assign]
    listener = PollingListener()
    listener.consumer = consumer
    consumer._listener = listener
    assert consumer.poll(0) == []
    assert driver.group.commits[0][P0] == OffsetAndMetadata(15, 3)
    assert listener.got == [], f"poll() inside on_partitions_revoked returned {listener.got}"
    assert state.assignment() == [P1]


def test_the_async_consumers_poll_inside_on_revoked_returns_none_of_the_revoked_records() -> None:
    class AsyncPolling(PollingListener):
        async def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
            self.got.extend((r.topic, r.partition, r.offset) for r in await self.consumer.poll(0))

    async def main() -> None:
        state, m = revoking_p0()
        driver = FakeDriver(m, state)
        consumer = AsyncConsumer(CONFIG)
        consumer._driver = driver  # type: ignore[assignment]
        listener = AsyncPolling()
        listener.consumer = consumer
        consumer._listener = listener
        assert await consumer.poll(0) == []
        assert driver.group.commits[0][P0] == OffsetAndMetadata(15, 3)
        assert listener.got == [], f"poll() inside on_partitions_revoked returned {listener.got}"
        assert state.assignment() == [P1]

    asyncio.run(main())
