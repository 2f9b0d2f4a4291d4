"""Goal: close() of a consumer whose cluster is unreachable returns promptly and raises nothing.
Before, a metadata refresh the driver had started (it retries for up to 5 s, CALL_TIMEOUT_S, on
a worker thread) held the driver's task, so close() waited for it, up to STOP_TIMEOUT_S (also
5 s), and then raised TimeoutError to the application. The producer already tells its metadata
to stop waiting when it closes; the consumer now does too.

Method: a real Consumer whose bootstrap server refuses connections (127.0.0.1:1: nothing
listens, no port is opened); the driver is made to refresh metadata for a topic, and close() is
timed once the refresh is under way.
"""

from __future__ import annotations

import asyncio
import time

from samsa.client import AsyncConsumer, Consumer

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1"}
PROMPT_S = 2.0


def wait_until(condition, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the refresh never started"
        time.sleep(0.01)


def test_close_during_a_metadata_refresh_of_an_unreachable_cluster_is_prompt() -> None:
    consumer = Consumer(UNREACHABLE)
    metadata = consumer._metadata
    refresh = metadata.refresh
    started: list[bool] = []

    def tracked(*args: object, **kwargs: object) -> None:
        started.append(True)
        refresh(*args, **kwargs)  # type: ignore[arg-type]

    metadata.refresh = tracked  # type: ignore[method-assign]
    metadata.keep(lambda: ["events"])  # as if assigned
    metadata.mark_stale()
    consumer._driver.wake_threadsafe()
    wait_until(lambda: bool(started))
    time.sleep(0.2)  # well inside the refresh's 5 s of retries
    began = time.monotonic()
    consumer.close()
    assert time.monotonic() - began < PROMPT_S


def test_async_stop_during_a_metadata_refresh_of_an_unreachable_cluster_is_prompt() -> None:
    async def main() -> float:
        consumer = AsyncConsumer(UNREACHABLE)
        await consumer.start()
        metadata = consumer._metadata
        metadata.keep(lambda: ["events"])  # as if assigned
        metadata.mark_stale()
        assert consumer._driver is not None
        consumer._driver.wake()
        await asyncio.sleep(0.3)
        began = time.monotonic()
        await consumer.stop()
        return time.monotonic() - began

    assert asyncio.run(main()) < PROMPT_S
