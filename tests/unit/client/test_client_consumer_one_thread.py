"""Goal: a sync Consumer is used by one thread at a time, as Kafka's KafkaConsumer (its
acquire(): ConcurrentModificationException, "KafkaConsumer is not safe for multi-threaded
access"). A call made while another thread is inside one raises ConcurrentAccessError; the
thread inside may call again (a listener inside poll() does), another thread may call once it
left, and close() may come from any thread (it ends the other's poll()), the listener it runs
on its thread calling the consumer as a listener inside poll() does. Before, a second
thread's poll() ran alongside the first, taking records from the same buffers and moving the
same positions, without an error.

Method: a Consumer whose cluster is never reached, its condition replaced by one that says when
a poll() on another thread waits inside.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from close_helpers import SignalledCondition, own_partition
from rebalance_helpers import T, answer

from samsa.client import ConcurrentAccessError, Consumer, ConsumerRebalanceListener, KafkaError
from samsa.client.group_driver import now_ms

CONFIG = {"bootstrap.servers": "127.0.0.1:1"}
WAIT_S = 10  # bounds a wait that fails the test
CALLS: dict[str, Callable[[Consumer], Any]] = {
    "poll": lambda c: c.poll(0),
    "assignment": lambda c: c.assignment(),
    "subscription": lambda c: c.subscription(),
    "paused": lambda c: c.paused(),
    "positions": lambda c: c.positions(),
    "assign": lambda c: c.assign([]),
}


def polling_elsewhere(consumer: Consumer) -> tuple[threading.Thread, list[BaseException]]:
    """Start a poll(WAIT_S) on another thread; return once it waits inside."""
    consumer._progress = waiting = SignalledCondition(consumer._driver.lock)
    raised: list[BaseException] = []

    def poll() -> None:
        try:
            consumer.poll(WAIT_S)
        except BaseException as error:  # handed to the test's thread
            raised.append(error)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    assert waiting.waiting.wait(WAIT_S), "the poll() never waited"
    return poller, raised


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_call_while_another_thread_polls_is_refused(name: str) -> None:
    consumer = Consumer(CONFIG)
    try:
        poller, raised = polling_elsewhere(consumer)
        with pytest.raises(ConcurrentAccessError, match="not safe for multi-threaded access"):
            CALLS[name](consumer)
        assert poller.is_alive(), "the refused call disturbed the poll() inside"
    finally:
        consumer.close(0)  # from another thread: allowed, and it ends the poll()
    poller.join(WAIT_S)
    assert not poller.is_alive()
    [error] = raised
    assert isinstance(error, KafkaError) and "closed" in str(error), error


def test_the_error_is_a_kafka_error_that_a_retry_does_not_help() -> None:
    error = ConcurrentAccessError("x")
    assert isinstance(error, KafkaError) and not error.retriable


def test_another_thread_may_call_once_the_first_left() -> None:
    with Consumer(CONFIG) as consumer:
        assert consumer.poll(0) == []
        other: list[object] = []
        thread = threading.Thread(target=lambda: other.append(consumer.poll(0)))
        thread.start()
        thread.join(WAIT_S)
        assert other == [[]]
        assert consumer.assignment() == []


class CallingListener(ConsumerRebalanceListener):
    """Calls the consumer back from inside poll(), as listeners do."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.seen: list[object] = []

    def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
        assert self.consumer is not None
        self.consumer.pause(partitions)
        self.seen += [self.consumer.assignment(), self.consumer.paused(), self.consumer.poll(0)]


def test_the_thread_inside_may_call_again() -> None:
    """A rebalance listener runs inside poll(), on its thread: its calls are that thread's."""
    listener = CallingListener()
    with Consumer({**CONFIG, "group.id": "g", "enable.auto.commit": "false"}) as consumer:
        listener.consumer = consumer
        consumer.subscribe([T], listener=listener)
        group = consumer._driver.group
        assert group is not None
        with consumer._progress:
            group.member.on_heartbeat_answer(answer(1, 0), now_ms())
        assert consumer.poll(0) == []  # runs on_partitions_assigned
        assert listener.seen == [[(T, 0)], [(T, 0)], []]
        consumer.close(0)


class RevokedListener(ConsumerRebalanceListener):
    """Reads the consumer back from on_partitions_revoked, as a listener committing there does."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.seen: list[object] = []

    def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
        assert self.consumer is not None
        try:
            self.seen.append(self.consumer.assignment())
        except Exception as error:
            self.seen.append(error)


def test_the_listener_close_runs_on_another_thread_may_call_while_a_poll_waits() -> None:
    """close() on another thread leaves the group there, running on_partitions_revoked on its
    own thread while the first thread's poll() waits inside: the listener's calls are close()'s,
    not refused as another thread's (they were: ConcurrentAccessError)."""
    listener = RevokedListener()
    consumer = Consumer({**CONFIG, "group.id": "g", "enable.auto.commit": "false"})
    listener.consumer = consumer
    try:
        own_partition(consumer, listener)
        poller, raised = polling_elsewhere(consumer)
    finally:
        consumer.close(0)
    poller.join(WAIT_S)
    assert listener.seen == [[(T, 0)]]
    [error] = raised
    assert isinstance(error, KafkaError) and "closed" in str(error), error
