"""Goal: a sync Consumer's seek(), pause(), resume(), assign(), subscribe(), unsubscribe() and
position() that a close() on another thread overtakes end with the closed consumer's error (or
return, when close() lands only after them), never RuntimeError('Event loop is closed'). Each
checked `_closed` without the driver's lock and then woke a driver, a hand-off to the loop: a
close() finishing in between had closed that loop.

Method: a real Consumer whose bootstrap server refuses connections. close() is made to land right
after the call's first open check: at once on the calling thread when that check is made
without the lock (another thread's close() running to its end there), else on a closer thread
that the test lets reach the lock the caller holds (it then lands as soon as the caller lets go).
The consumer's condition is replaced by one that knows its owner and sees the closer arrive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from close_helpers import own_partition
from rebalance_helpers import Recorder, T

from samsa.client import Consumer
from samsa.client.errors import KafkaError

TP = (T, 0)
PLAIN = {"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "earliest"}
GROUP = {**PLAIN, "group.id": "g", "enable.auto.commit": "false"}
WAIT_S = 5.0  # a bound on each wait for the other thread: reached only when the test fails


class OwnedCondition(threading.Condition):
    """The consumer's condition, on the driver's lock: it knows which thread holds it (through
    itself) and says when the closer thread is about to take it."""

    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self.owner: int | None = None
        self.closer: int | None = None
        self.closer_at_lock = threading.Event()

    def __enter__(self) -> bool:
        if threading.get_ident() == self.closer:
            self.closer_at_lock.set()
        entered = super().__enter__()
        self.owner = threading.get_ident()
        return entered

    def __exit__(self, *exc: object) -> None:
        self.owner = None
        super().__exit__(*exc)

    def wait(self, timeout: float | None = None) -> bool:
        self.owner = None
        try:
            return super().wait(timeout)
        finally:
            self.owner = threading.get_ident()

    def held_here(self) -> bool:
        return self.owner == threading.get_ident()


class CloseAfterFirstCheck:
    """Wraps consumer._check_open: close() lands right after the first check of the caller."""

    def __init__(self, consumer: Consumer, condition: OwnedCondition) -> None:
        self.consumer, self.condition = consumer, condition
        self.check_open = consumer._check_open
        self.caller = threading.get_ident()
        self.closer: threading.Thread | None = None
        self.landed = False
        self.close_errors: list[BaseException] = []

    def __call__(self) -> None:
        self.check_open()
        if self.landed or threading.get_ident() != self.caller:
            return
        self.landed = True
        if not self.condition.held_here():  # no lock held: a close() may run to its end here
            self.consumer.close(timeout=0)
            return
        self.closer = threading.Thread(target=self._close, daemon=True)
        self.closer.start()
        assert self.condition.closer_at_lock.wait(WAIT_S), "the closer never reached the lock"

    def _close(self) -> None:
        self.condition.closer = threading.get_ident()
        self.condition.closer_at_lock.clear()
        try:
            self.consumer.close(timeout=0)
        except BaseException as error:  # reported by the test
            self.close_errors.append(error)


def assigned(consumer: Consumer) -> None:
    with consumer._progress:
        consumer._state.assign([TP])


def owning(consumer: Consumer) -> None:
    """A member of group "g" owning TP at epoch 1, its on_partitions_assigned run."""
    own_partition(consumer, Recorder())


def known_topic(consumer: Consumer) -> None:
    """assign()'s metadata check passes without a cluster: T has one partition."""
    consumer._metadata.refresh = lambda *_: None  # type: ignore[method-assign]
    consumer._metadata.partition_counts[T] = 1


Setup = Callable[[Consumer], None]
CALLS: dict[str, tuple[dict[str, str], Setup | None, Callable[[Consumer], Any]]] = {
    "seek": (PLAIN, assigned, lambda c: c.seek(TP, 3)),
    "pause": (PLAIN, assigned, lambda c: c.pause([TP])),
    "resume": (PLAIN, assigned, lambda c: c.resume([TP])),
    "position": (PLAIN, assigned, lambda c: c.position(TP)),
    "assign": (PLAIN, known_topic, lambda c: c.assign([TP])),
    "subscribe": (GROUP, None, lambda c: c.subscribe([T])),
    "unsubscribe": (GROUP, owning, lambda c: c.unsubscribe()),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_call_that_a_close_overtakes_raises_the_closed_error(name: str) -> None:
    config, setup, call = CALLS[name]
    consumer = Consumer(config)
    try:
        if setup is not None:
            setup(consumer)
        condition = OwnedCondition(consumer._driver.lock)
        consumer._progress = condition
        hook = CloseAfterFirstCheck(consumer, condition)
        consumer._check_open = hook  # type: ignore[method-assign]
        try:
            call(consumer)
        except KafkaError as error:
            assert "closed" in str(error), error
        assert hook.landed, "close() was never made to land"
        if hook.closer is not None:
            hook.closer.join(WAIT_S)
            assert not hook.closer.is_alive(), "close() did not end"
        assert hook.close_errors == []
        assert consumer._closed
    finally:
        consumer.close(timeout=0)
