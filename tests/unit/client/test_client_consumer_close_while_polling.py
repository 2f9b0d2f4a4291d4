"""Goal: a poll() waiting for records when close() is called (on another thread, or another task
of the AsyncConsumer's loop) ends at once with the closed consumer's error. Before, it went on
waiting for its whole timeout after the consumer was closed and then returned no records: an
application stopping its consumer from a signal handler's thread while a worker polled with a
long timeout stayed blocked that long (the SDK has no wakeup()).

Method: real Consumer and AsyncConsumer whose bootstrap server refuses connections (nothing is
ever fetched, so poll() only waits), assigned a partition with a position; poll(timeout=30) runs,
close(timeout=1) is called once poll() is inside its wait (its wait says so: no guess of how long
that takes), and poll()'s end is timed.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from close_helpers import SignalledCondition
from rebalance_helpers import T

from samsa.client import AsyncConsumer, Consumer
from samsa.client.errors import KafkaError

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
POLL_S = 30.0
ENDED_WITHIN_S = 5.0  # close(timeout=1) and the driver's stop, far under POLL_S


def test_a_poll_waiting_on_another_thread_ends_when_the_consumer_closes() -> None:
    consumer = Consumer(CONFIG)
    waiting = threading.Event()
    consumer._progress = SignalledCondition(consumer._driver.lock, waiting)
    with consumer._progress:
        consumer._state.assign([(T, 0)])
        consumer._state.seek((T, 0), 5)
    outcome: list[object] = []

    def poll() -> None:
        try:
            outcome.append(consumer.poll(POLL_S))
        except KafkaError as error:
            outcome.append(error)

    poller = threading.Thread(target=poll)
    poller.start()
    assert waiting.wait(5)
    began = time.monotonic()
    consumer.close(timeout=1)
    poller.join(ENDED_WITHIN_S)
    assert not poller.is_alive(), "poll() still waiting after close()"
    assert time.monotonic() - began < ENDED_WITHIN_S
    assert isinstance(outcome[0], KafkaError) and "closed" in str(outcome[0])


def test_an_async_poll_waiting_in_another_task_ends_when_the_consumer_closes() -> None:
    async def scenario() -> None:
        consumer = AsyncConsumer(CONFIG)
        await consumer.start()
        consumer._driver.state.assign([(T, 0)])
        consumer._driver.state.seek((T, 0), 5)
        wait_for_progress = consumer._wait_for_progress
        waiting = asyncio.Event()

        async def signalled_wait(timeout_s: float) -> None:
            waiting.set()
            await wait_for_progress(timeout_s)

        consumer._wait_for_progress = signalled_wait  # type: ignore[method-assign]
        polling = asyncio.create_task(consumer.poll(POLL_S))
        await waiting.wait()  # poll() is waiting (set with no await before its wait)
        began = asyncio.get_running_loop().time()
        await consumer.close(timeout=1)
        with pytest.raises(KafkaError, match="stopped"):
            await asyncio.wait_for(polling, ENDED_WITHIN_S)
        assert asyncio.get_running_loop().time() - began < ENDED_WITHIN_S

    asyncio.run(scenario())


def test_a_call_on_the_loop_from_another_thread_ends_when_the_consumer_closes() -> None:
    """poll() runs the commit before on_partitions_revoked on the loop and waits for it with no
    deadline of its own (close()'s was not set yet when it began); close() on another thread then
    stopped the loop under it, and the poll() waited for ever. Here a call that never ends stands
    for a commit to a coordinator that does not answer."""
    consumer = Consumer(CONFIG)
    outcome: list[object] = []
    started = threading.Event()

    async def never_answered() -> None:
        started.set()
        await asyncio.Event().wait()

    def call() -> None:
        try:
            outcome.append(consumer._on_loop(never_answered()))
        except KafkaError as error:
            outcome.append(error)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert started.wait(5)
    consumer.close(timeout=1)
    caller.join(ENDED_WITHIN_S)
    assert not caller.is_alive(), "the call on the loop still waiting after close()"
    assert isinstance(outcome[0], KafkaError) and "closed" in str(outcome[0])
