"""Goal: when close()'s stop of the drivers runs past its bound (consumer_loop.STOP_TIMEOUT_S),
every call waiting on the loop (`_on_loop`: commits, lookups) ends with the closed consumer's
error, and every future handed out (commit_async()) ends too. Before, the loop stopped with their
coroutines still running (only a stop that finished cancels them), so nothing ever completed
their futures: each caller waited for ever.

Method: a real Consumer whose bootstrap server refuses connections; its driver's stop is made to
never end and the bound is made short. A call on another thread waits on the loop for a
coroutine that never ends (it says when it runs), and a submitted one's future is kept; then
close(). The waiting call must end, with the closed error, and the future must be done; close()
itself returns (a warning says the stop was cut short), as Kafka's close(Duration) does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading

import pytest

from samsa.client import Consumer, consumer_loop
from samsa.client.errors import KafkaError

CONFIG = {"bootstrap.servers": "127.0.0.1:1"}
STOP_BOUND_S = 0.2  # close()'s bound on the driver's stop, which here never ends
WAIT_S = 5.0  # a bound on the wait for the calling thread: reached only when the test fails


def test_calls_waiting_on_the_loop_end_when_a_stuck_stop_stops_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(consumer_loop, "STOP_TIMEOUT_S", STOP_BOUND_S)
    consumer = Consumer(CONFIG)
    running = threading.Semaphore(0)

    async def stuck_stop() -> None:
        await asyncio.Event().wait()

    async def never_ends() -> None:
        running.release()
        await asyncio.Event().wait()

    consumer._driver.stop = stuck_stop  # type: ignore[method-assign]
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            consumer._on_loop(never_ends())
            outcome.append(None)
        except BaseException as error:  # reported by the main thread
            outcome.append(error)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    submitted = consumer._submit(never_ends())
    assert running.acquire(timeout=WAIT_S) and running.acquire(timeout=WAIT_S)
    with caplog.at_level(logging.WARNING, logger="samsa.client.consumer_loop"):
        consumer.close(timeout=0)  # the stop runs past its bound: a warning, not an error
    assert "did not stop" in caplog.text
    caller.join(WAIT_S)
    assert not caller.is_alive(), "a call waits for ever on a stopped loop"
    assert len(outcome) == 1 and isinstance(outcome[0], KafkaError), outcome
    assert "closed" in str(outcome[0])
    assert submitted.done(), "a future handed out never ends"
    with pytest.raises(concurrent.futures.CancelledError):
        submitted.result(0)
