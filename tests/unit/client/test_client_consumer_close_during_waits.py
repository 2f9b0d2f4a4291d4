"""Goal: calls of either consumer that wait on the cluster end with the closed (stopped) consumer's
error when close() (stop()) runs during their wait, as poll() and position() do: unsubscribe()
waiting for its leave heartbeat's answer, and the AsyncConsumer's assign() awaiting its metadata
refresh. Before, unsubscribe()'s wait never looked at `_closed` (close()'s notify only woke it to
wait again, up to LEAVE_TIMEOUT_S), and assign() went on to assign on a stopped consumer and
returned as if it had worked.

Method: real consumers whose bootstrap server refuses connections (the leave is never answered).
A member owning one partition unsubscribes on another thread (task); close() (stop()) runs once it
waits (its condition or its wait says so). The leave's own bound is made far longer than the
test's: only the close can end the wait in time. assign()'s refresh is replaced by one that waits
for the test, which stops the consumer meanwhile.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from close_helpers import SignalledCondition
from rebalance_helpers import Recorder, T, answer

from samsa.client import AsyncConsumer, Consumer, async_consumer, consumer
from samsa.client.errors import KafkaError
from samsa.client.group_driver import now_ms

TP = (T, 0)
CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "enable.auto.commit": "false"}
LEAVE_S = 600.0  # the leave's own bound here: a wait that reaches it fails the test
WAIT_S = 5.0  # a bound on each wait for the other thread or task


def test_a_close_during_unsubscribes_leave_wait_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer, "LEAVE_TIMEOUT_S", LEAVE_S)
    sync = Consumer(CONFIG)
    sync.subscribe([T], listener=Recorder())
    group = sync._driver.group
    assert group is not None
    with sync._progress:
        group.member.on_heartbeat_answer(answer(1, 0), now_ms())
    sync._run_rebalance_steps(group)
    condition = sync._progress = SignalledCondition(sync._driver.lock)
    outcome: list[BaseException | None] = []

    def unsubscribe() -> None:
        try:
            sync.unsubscribe()
            outcome.append(None)
        except BaseException as error:  # reported by the main thread
            outcome.append(error)

    leaving = threading.Thread(target=unsubscribe, daemon=True)
    leaving.start()
    assert condition.waiting.wait(WAIT_S), "unsubscribe() never waited"
    sync.close(timeout=0)
    leaving.join(WAIT_S)
    assert not leaving.is_alive(), "unsubscribe() still waits on a closed consumer"
    assert len(outcome) == 1 and isinstance(outcome[0], KafkaError), outcome
    assert "closed" in str(outcome[0])


def test_a_stop_during_unsubscribes_leave_wait_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_consumer, "LEAVE_TIMEOUT_S", LEAVE_S)

    async def scenario() -> None:
        stopping = AsyncConsumer(CONFIG)
        await stopping.start()
        driver = stopping._driver
        assert driver is not None and driver.group is not None
        stopping.subscribe([T], listener=Recorder())
        with driver.lock:
            driver.group.member.on_heartbeat_answer(answer(1, 0), now_ms())
        await stopping._run_rebalance_steps(driver, driver.group)
        waiting = asyncio.Event()
        wait_for_progress = stopping._wait_for_progress

        async def signalled_wait(timeout_s: float) -> None:
            waiting.set()
            await wait_for_progress(timeout_s)

        stopping._wait_for_progress = signalled_wait  # type: ignore[method-assign]
        leaving = asyncio.create_task(stopping.unsubscribe())
        await asyncio.wait_for(waiting.wait(), WAIT_S)
        await stopping.stop(timeout=0)
        with pytest.raises(KafkaError, match="stopped"):
            await asyncio.wait_for(leaving, WAIT_S)

    asyncio.run(scenario())


def test_a_stop_during_assigns_metadata_refresh_ends_it() -> None:
    async def scenario() -> None:
        stopping = AsyncConsumer({"bootstrap.servers": "127.0.0.1:1"})
        await stopping.start()
        loop = asyncio.get_running_loop()
        refreshing, release = asyncio.Event(), threading.Event()

        def held_refresh(topics: object = (), *_: object) -> None:
            """In assign()'s worker thread (the driver's own refreshes, of no topic yet, pass):
            the topic is known once the test lets it go."""
            if set(topics) != {T}:  # type: ignore[call-overload]
                return
            loop.call_soon_threadsafe(refreshing.set)
            assert release.wait(WAIT_S)
            stopping._metadata.partition_counts[T] = 1

        stopping._metadata.refresh = held_refresh  # type: ignore[method-assign]
        assigning = asyncio.create_task(stopping.assign([TP]))
        await asyncio.wait_for(refreshing.wait(), WAIT_S)
        await stopping.stop(timeout=0)
        release.set()
        with pytest.raises(KafkaError, match="stopped"):
            await asyncio.wait_for(assigning, WAIT_S)

    asyncio.run(scenario())
