"""Goal: an AsyncConsumer.poll() cancelled while it runs a rebalance step (awaiting the commit
that goes before on_partitions_revoked, or a coroutine listener) leaves the member able to go on:
the step runs again, from its start, at the next poll (or at stop()), so the listener is told,
the partitions are given back and acknowledged, and nothing is stuck. Before, the step stayed
"running" for ever: no later poll ran a listener call, the member never acknowledged the
revocation (the coordinator fenced it after the rebalance timeout) and stop() waited
LEAVE_TIMEOUT_S without leaving.

Method: the AsyncConsumer facade over a fake driver holding a real GroupMember and FetchState;
the group's commit waits on an event the test sets, and poll() is cancelled (asyncio.wait_for)
while it waits. No cluster, no network.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from rebalance_helpers import Recorder, T, answer, member

from samsa.client import AsyncConsumer, Consumer
from samsa.client.commit_callbacks import CommitCallbacks
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_member import CallbackKind, GroupMember, MemberState, Subscription
from samsa.client.rebalance import begin_step, end_step

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "auto.offset.reset": "earliest"}


class FakeGroup:
    """What the AsyncConsumer's poll uses of a GroupDriver; commits wait for `release`."""

    group_id = "g"

    def __init__(self, m: GroupMember) -> None:
        self.member = m
        self.commits: list[dict[Any, OffsetAndMetadata]] = []
        self.release = asyncio.Event()

    async def commit(self, offsets: dict[Any, OffsetAndMetadata]) -> None:
        await self.release.wait()
        self.commits.append(dict(offsets))

    def on_poll(self) -> tuple[bool, None]:
        return False, None

    def wake(self) -> None:
        pass


class FakeDriver:
    def __init__(self, m: GroupMember) -> None:
        self.lock = threading.Lock()
        self.state = FetchState(ConsumerConfig.from_dict(CONFIG))
        self.group = FakeGroup(m)

    def wake(self) -> None:
        pass


def joined_with(state: FetchState, *partitions: int) -> GroupMember:
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, *partitions), 0)
    while (step := begin_step(m, state, auto_commit=False)) is not None:
        end_step(m, state, step, 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, *partitions), 0)
    assert m.state is MemberState.STABLE
    return m


def test_a_poll_cancelled_during_the_commit_before_revocation_runs_the_step_again() -> None:
    async def main() -> None:
        state = FetchState(ConsumerConfig.from_dict(CONFIG))
        m = joined_with(state, 0, 1)
        driver = FakeDriver(m)
        driver.state = state
        state.seek((T, 0), 7)
        m.heartbeat_request(1000)
        m.on_heartbeat_answer(answer(2, 1), 1000)  # partition 0 moves away
        consumer = AsyncConsumer(CONFIG)
        consumer._driver = driver  # type: ignore[assignment]
        listener = Recorder()
        consumer._listener = listener

        try:
            await asyncio.wait_for(consumer.poll(timeout=5), 0.05)
        except TimeoutError:
            pass
        else:
            raise AssertionError("poll() returned while its commit waited")
        assert listener.calls == [] and driver.group.commits == []
        pending = m.pending_callback()
        assert pending is not None and pending.kind is CallbackKind.REVOKED, (
            "the revocation must be run again by the next poll, not stuck as running"
        )

        driver.group.release.set()
        assert await consumer.poll(timeout=0) == []
        assert listener.calls == [("revoked", [(T, 0)]), ("assigned", [])]
        assert driver.group.commits == [{(T, 0): OffsetAndMetadata(7, -1)}]
        assert state.assignment() == [(T, 1)] and m.owned == {(T, 1)}
        assert m.state is MemberState.ACKNOWLEDGING

    asyncio.run(main())


def test_a_poll_cancelled_in_a_coroutine_on_assigned_keeps_no_partition_unowned() -> None:
    """Cancelled inside on_partitions_assigned, the new partitions leave the fetch state until
    the step runs again: if the member is fenced meanwhile, on_partitions_lost (of what it owns)
    must not leave behind partitions it never reported as its own."""

    class Slow(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.block = True

        async def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
            self.calls.append(("assigned", partitions))
            while self.block:
                await asyncio.sleep(0.01)

    async def main() -> None:
        state = FetchState(ConsumerConfig.from_dict(CONFIG))
        m = joined_with(state, 0)
        driver = FakeDriver(m)
        driver.state = state
        m.heartbeat_request(1000)
        m.on_heartbeat_answer(answer(2, 0, 1), 1000)  # partition 1 is new
        consumer = AsyncConsumer(CONFIG)
        consumer._driver = driver  # type: ignore[assignment]
        listener = Slow()
        consumer._listener = listener
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consumer.poll(timeout=5), 0.05)
        assert state.assignment() == [(T, 0)], "partition 1 is not this member's yet"
        assert m.pending_callback() is not None

        listener.block = False
        assert await consumer.poll(timeout=0) == []
        assert listener.calls == [("assigned", [(T, 1)]), ("assigned", [(T, 1)])]
        assert state.assignment() == [(T, 0), (T, 1)] and m.owned == {(T, 0), (T, 1)}

    asyncio.run(main())


def test_a_sync_poll_interrupted_in_on_revoked_runs_the_step_again() -> None:
    """The sync Consumer: a KeyboardInterrupt raised inside on_partitions_revoked (the
    application's thread) leaves the step to run again at the next poll, as above."""

    class Interrupted(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.interrupt = True

        def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
            if self.interrupt:
                self.interrupt = False
                raise KeyboardInterrupt
            super().on_partitions_revoked(partitions)

    config = {**CONFIG, "enable.auto.commit": False}
    state = FetchState(ConsumerConfig.from_dict(config))
    m = joined_with(state, 0, 1)
    driver = FakeDriver(m)
    driver.state = state
    driver.group.wake_threadsafe = lambda: None  # type: ignore[attr-defined]
    driver.wake_threadsafe = lambda: None  # type: ignore[attr-defined]
    m.heartbeat_request(1000)
    m.on_heartbeat_answer(answer(2, 1), 1000)
    consumer = Consumer.__new__(Consumer)
    consumer.config = ConsumerConfig.from_dict(config)
    consumer._driver = driver  # type: ignore[assignment]
    consumer._state = state
    consumer._progress = threading.Condition(driver.lock)
    consumer._closed = False
    consumer._owner = threading.RLock()  # thread_owner.py
    consumer._commit_callbacks = CommitCallbacks(lambda: None)  # commit_callbacks.py
    consumer._tracer = None
    listener = Interrupted()
    consumer._listener = listener
    try:
        consumer.poll(0)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt must reach the application")
    assert listener.calls == [] and m.pending_callback() is not None
    assert consumer.poll(0) == []
    assert listener.calls == [("revoked", [(T, 0)]), ("assigned", [])]
    assert state.assignment() == [(T, 1)] and m.state is MemberState.ACKNOWLEDGING
