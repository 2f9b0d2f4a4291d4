"""Goal: a sync Consumer's commit_async() callbacks run as Kafka's OffsetCommitCallback does: on
the application's thread, inside its next poll(), commit() or close() after the commit ended
(invokeCompletedOffsetCommitCallbacks), in the order of the commit_async() calls. Before, they
ran on the consumer's loop thread as the answer came, while the application's thread was inside
poll(): a callback calling the consumer was refused with ConcurrentAccessError (thread_owner.py),
and the polling thread's own next call was refused while a callback was inside one. The future's
state is still the commit's at once: result() needs no poll.

Method: a real Consumer with a group.id whose cluster is never reached; its group driver's
coordinator calls are a fake that answers OffsetCommit after a delay, or never.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from typing import Any

import pytest

from samsa.client import Consumer
from samsa.v1 import coordinator_pb2 as cp

TP = ("t", 0)
WAIT_S = 5.0  # bounds a wait that fails the test
POLL_S = 2.0  # a poll() that waits for records that never come


class Coordinator:
    """Answers every OffsetCommit with success after `delay_s`; never, when `delay_s` is None."""

    def __init__(self, delay_s: float | None = 0.0) -> None:
        self.delay_s = delay_s
        self.answered = threading.Event()

    async def ask(self, method: str, request: Any, error_of: Any) -> cp.OffsetCommitResponse:
        assert method == "OffsetCommit"
        if self.delay_s is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.delay_s)
        response = cp.OffsetCommitResponse()
        for topic in request.topics:
            result = response.topics.add(name=topic.name)
            for p in topic.partitions:
                result.partitions.add(partition=p.partition, error_code=0)
        self.answered.set()
        return response


def consumer_with(coordinator: Coordinator) -> Consumer:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    assert consumer._driver.group is not None
    consumer._driver.group._coordinator = coordinator  # type: ignore[assignment]
    return consumer


def test_the_callback_runs_inside_poll_on_the_polling_thread_and_may_call_the_consumer() -> None:
    """The reviewer's case: answered while the application's thread waits inside poll()."""
    consumer = consumer_with(Coordinator(delay_s=0.2))
    seen: list[object] = []
    ran_at: list[float] = []

    def callback(future: concurrent.futures.Future[None]) -> None:
        seen.append((threading.current_thread(), consumer.assignment(), future.exception()))
        ran_at.append(time.monotonic())

    try:
        began = time.monotonic()
        consumer.commit_async({TP: 5}).add_done_callback(callback)
        assert consumer.poll(POLL_S) == []  # nothing assigned: waits its whole timeout
        assert seen == [(threading.current_thread(), [], None)]
        assert ran_at[0] < began + POLL_S / 2, "run once the commit ended, not as poll() ended"
    finally:
        consumer.close(0)


def test_the_future_completes_at_once_but_its_callbacks_wait_for_a_poll_in_call_order() -> None:
    consumer = consumer_with(Coordinator())
    order: list[int] = []
    try:
        futures = [consumer.commit_async({TP: n}) for n in range(3)]
        for n, future in reversed(list(enumerate(futures))):
            future.add_done_callback(lambda _, n=n: order.append(n))
        assert all(future.result(WAIT_S) is None for future in futures), "no poll needed"
        assert order == []
        consumer.poll(0)
        assert order == [0, 1, 2]
        futures[0].add_done_callback(lambda _: order.append(9))  # already run: runs at once
        assert order == [0, 1, 2, 9]
    finally:
        consumer.close(0)


def test_commit_returns_once_the_callbacks_of_the_commits_before_it_ran() -> None:
    consumer = consumer_with(Coordinator(delay_s=0.05))
    ran: list[str] = []
    try:
        consumer.commit_async({TP: 1}).add_done_callback(lambda _: ran.append("async"))
        consumer.commit({TP: 2})
        assert ran == ["async"]
    finally:
        consumer.close(0)


def test_close_runs_the_callbacks_of_commits_it_cut_short(caplog: pytest.LogCaptureFixture) -> None:
    consumer = consumer_with(Coordinator(delay_s=None))
    outcomes: list[object] = []

    def failing(_: concurrent.futures.Future[None]) -> None:
        raise RuntimeError("the application's bug")

    future = consumer.commit_async({TP: 1})
    future.add_done_callback(failing)  # logged; the next callback runs all the same
    future.add_done_callback(lambda f: outcomes.append((threading.current_thread(), f.cancelled())))
    with caplog.at_level(logging.ERROR, logger="samsa.client.commit_callbacks"):
        consumer.close(0)
    assert outcomes == [(threading.current_thread(), True)]
    assert "the application's bug" in caplog.text


def test_cancel_cancels_the_commit() -> None:
    consumer = consumer_with(Coordinator(delay_s=None))
    try:
        future = consumer.commit_async({TP: 1})
        assert future.cancel() and future.cancelled()
        with pytest.raises(concurrent.futures.CancelledError):
            future.result(0)
    finally:
        consumer.close(0)
