"""Goal: a position() waiting for its partition's offset lookup when the consumer is closed (on
another thread, or another task of the AsyncConsumer's loop) ends at once with the closed
consumer's error, as poll() does. Before, its wait loop never looked at `_closed`: close()'s
notify woke it, it found no position yet and waited again, until its own deadline
(session.timeout.ms + POSITION_WAIT_MARGIN_S, 50 s by default) after the consumer was closed.

Method: real Consumer and AsyncConsumer whose bootstrap server refuses connections, so the lookup
of a newly assigned partition's offset (auto.offset.reset) never completes and position() only
waits. close() is called once position() is inside its wait (its wait says so), and
position()'s end is timed.
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

CONFIG = {"bootstrap.servers": "127.0.0.1:1"}
ENDED_WITHIN_S = 5.0  # close(timeout=1) and the driver's stop, far under position()'s 50 s


def test_a_position_waiting_on_another_thread_ends_when_the_consumer_closes() -> None:
    consumer = Consumer(CONFIG)
    waiting = threading.Event()
    consumer._progress = SignalledCondition(consumer._driver.lock, waiting)
    with consumer._progress:
        consumer._state.assign([(T, 0)])  # no position: looked up per auto.offset.reset
    outcome: list[object] = []

    def position() -> None:
        try:
            outcome.append(consumer.position((T, 0)))
        except KafkaError as error:
            outcome.append(error)

    caller = threading.Thread(target=position, daemon=True)
    caller.start()
    assert waiting.wait(5)
    began = time.monotonic()
    consumer.close(timeout=1)
    caller.join(ENDED_WITHIN_S)
    assert not caller.is_alive(), "position() still waiting after close()"
    assert time.monotonic() - began < ENDED_WITHIN_S
    assert isinstance(outcome[0], KafkaError) and "closed" in str(outcome[0]), outcome


def test_an_async_position_waiting_in_another_task_ends_when_the_consumer_closes() -> None:
    async def scenario() -> None:
        consumer = AsyncConsumer(CONFIG)
        await consumer.start()
        consumer._driver.state.assign([(T, 0)])
        wait_for_progress = consumer._wait_for_progress
        waiting = asyncio.Event()

        async def signalled_wait(timeout_s: float) -> None:
            waiting.set()
            await wait_for_progress(timeout_s)

        consumer._wait_for_progress = signalled_wait  # type: ignore[method-assign]
        looking_up = asyncio.create_task(consumer.position((T, 0)))
        await waiting.wait()  # position() is waiting (set with no await before its wait)
        began = asyncio.get_running_loop().time()
        await consumer.close(timeout=1)
        with pytest.raises(KafkaError, match="stopped"):
            await asyncio.wait_for(looking_up, ENDED_WITHIN_S)
        assert asyncio.get_running_loop().time() - began < ENDED_WITHIN_S

    asyncio.run(scenario())
