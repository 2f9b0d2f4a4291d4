"""Goal: a sync Consumer's close() that another close() overlaps returns, as a close() after it
does: two threads closing at once (a shutdown thread and the application's `with` block), or
a listener that calls close() from the close()'s own on_partitions_revoked. Before, each went
on past the open check to stop and close the loop: the second one's stop was handed to a loop
the first had closed (RuntimeError('Event loop is closed')), or to one it had stopped (a wait
out to STOP_TIMEOUT_S, then TimeoutError), or its cancel_other_tasks cancelled the other's stop
(CancelledError); and the listener's close() waited out the leave (its own on_revoked had not
returned), closed the consumer under the outer close(), whose commit at close then raised the
closed consumer's error.

Method: a real Consumer whose bootstrap server refuses connections. Two threads call close()
and are held, both past the open check, until both are there. The listener's case: a member
owning one partition (close_helpers.own_partition) whose on_partitions_revoked calls close().
"""

from __future__ import annotations

import threading

import pytest
from close_helpers import TP, own_partition

from samsa.client import Consumer, consumer_loop
from samsa.client import consumer as consumer_module
from samsa.client.rebalance import ConsumerRebalanceListener

PLAIN = {"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "earliest"}
GROUP = {**PLAIN, "group.id": "g", "enable.auto.commit": "false"}
WAIT_S = 5.0  # a bound on each wait for the other thread: reached only when the test fails
CLOSE_TIMEOUT_S = 0.5  # close()'s budget for the cluster, which never answers here


def test_two_closes_at_once_both_return(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_loop, "STOP_TIMEOUT_S", 1.0)  # the old code's wait, cut short
    consumer = Consumer(PLAIN)
    both_past_the_check = threading.Barrier(2, timeout=WAIT_S)
    close_deadline = consumer_module.close_deadline

    def held_deadline(timeout: float | None) -> float:
        both_past_the_check.wait()
        return close_deadline(timeout)

    monkeypatch.setattr(consumer_module, "close_deadline", held_deadline)
    errors: list[BaseException] = []

    def close() -> None:
        try:
            consumer.close(CLOSE_TIMEOUT_S)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    closers = [threading.Thread(target=close, daemon=True) for _ in range(2)]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join(WAIT_S * 2)
    assert not any(closer.is_alive() for closer in closers), "a close() never returned"
    assert errors == []
    assert consumer._loop.is_closed()


class ClosingListener(ConsumerRebalanceListener):
    """Closes the consumer from on_partitions_revoked, as an application tearing down may."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.revoked: list[list[tuple[str, int]]] = []

    def on_partitions_revoked(self, revoked: list[tuple[str, int]]) -> None:
        self.revoked.append(list(revoked))
        assert self.consumer is not None
        self.consumer.close(CLOSE_TIMEOUT_S)


def test_a_listener_closing_during_close_leaves_the_close_to_it() -> None:
    consumer = Consumer(GROUP)
    listener = ClosingListener()
    listener.consumer = consumer
    try:
        own_partition(consumer, listener)
        consumer.close(CLOSE_TIMEOUT_S)
        assert listener.revoked == [[TP]]
        assert consumer._loop.is_closed()
    finally:
        consumer.close()


def test_a_close_that_raised_before_closing_can_be_called_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one-close rule must not turn a close() that failed (its commit at close raised, an
    interrupt) into a consumer no later close() closes."""
    consumer = Consumer(PLAIN)
    leave_at_close = consumer._leave_at_close

    def interrupted(deadline: float) -> None:
        monkeypatch.setattr(consumer, "_leave_at_close", leave_at_close)
        raise KeyboardInterrupt

    monkeypatch.setattr(consumer, "_leave_at_close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        consumer.close(CLOSE_TIMEOUT_S)
    assert not consumer._loop.is_closed()
    consumer.close(CLOSE_TIMEOUT_S)
    assert consumer._loop.is_closed()
