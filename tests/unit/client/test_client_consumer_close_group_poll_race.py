"""Goal: a sync Consumer's poll() that a close() on another thread overtakes while it does its
group work (the poll timer and auto-commit, the rebalance listener steps) ends with the closed
consumer's error, never a RuntimeError or a hang. That work ran outside the lock close() sets
`_closed` under, and handed calls to the loop (the auto-commit, the group and fetch drivers'
wakes, the commit before revocation) after close() had stopped and closed it: RuntimeError('Event
loop is closed'), or on a stopped loop not yet closed a call that never ran, waited for ever.

Method: a real Consumer with a group.id whose bootstrap server refuses connections (the group
driver never finds a coordinator, so the member moves only as the test moves it, under the lock).
close() is made to land at each point: from a wrapper of the group's on_poll() (on the polling
thread, right after the auto-commit was found due), on the main thread while the listener waits
on an event (close() ends before the listener returns), and from a wrapper of the consumer's
_on_loop() (on the polling thread, as poll() hands the commit before revocation to the loop).
Each poll() must raise the closed consumer's error, and leave no coroutine never awaited.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from rebalance_helpers import Recorder, T, answer

from samsa.client import Consumer
from samsa.client.errors import KafkaError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver, now_ms
from samsa.client.group_member import CallbackKind, Subscription
from samsa.client.rebalance import begin_step, end_step

# A coroutine never awaited warns from its __del__, where an error is unraisable: fail on both.
pytestmark = [
    pytest.mark.filterwarnings("error:coroutine .* was never awaited:RuntimeWarning"),
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]
CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "auto.offset.reset": "earliest"}
POLL_S = 5.0


def group_of(consumer: Consumer) -> GroupDriver:
    group = consumer._driver.group
    assert group is not None
    return group


def poll_raises_closed(poll: Callable[[], object]) -> None:
    """poll() raises the closed error, and no coroutine it made was left unawaited."""
    with pytest.raises(KafkaError, match="closed"):
        poll()
    gc.collect()  # a coroutine never awaited warns when collected (see pytestmark)


def subscribed_with_pending(consumer: Consumer, kind: CallbackKind) -> None:
    """Under the lock, as the group driver would: the member joined and owns T-0, and with
    REVOKED the next answer took it back; that listener call is now pending."""
    group = group_of(consumer)
    with consumer._progress:
        member, now = group.member, now_ms()
        member.subscribe(Subscription(topics=frozenset({T})), now)
        assert member.heartbeat_request(now) is not None
        member.on_heartbeat_answer(answer(1, 0), now)
        if kind is CallbackKind.REVOKED:
            step = begin_step(member, consumer._state, auto_commit=False)
            assert step is not None
            end_step(member, consumer._state, step, now)
            consumer._state.seek((T, 0), 5)  # consumed: committed before the revocation
            assert member.heartbeat_request(now) is not None
            member.on_heartbeat_answer(answer(2), now)
        pending = member.pending_callback()
        assert pending is not None and pending.kind is kind


def test_a_close_after_the_auto_commit_fell_due_ends_the_poll() -> None:
    consumer = Consumer(CONFIG)
    group = group_of(consumer)
    with consumer._progress:
        consumer._state.assign([(T, 0)])
        consumer._state.seek((T, 0), 5)
    group._auto_commit_due_ms = 0  # due at this poll
    on_poll = group.on_poll

    def on_poll_then_close() -> tuple[bool, dict[Any, OffsetAndMetadata] | None]:
        was_stale, due = on_poll()
        assert due, "the auto-commit is due"
        consumer.close(timeout=0)  # another thread's close() landing right here
        return was_stale, due

    group.on_poll = on_poll_then_close  # type: ignore[method-assign]
    poll_raises_closed(lambda: consumer.poll(POLL_S))


def test_a_close_while_the_listener_runs_ends_the_poll() -> None:
    consumer = Consumer(CONFIG)
    subscribed_with_pending(consumer, CallbackKind.ASSIGNED)
    in_listener, release = threading.Event(), threading.Event()

    class Waiting(Recorder):
        def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
            super().on_partitions_assigned(partitions)
            in_listener.set()
            assert release.wait(POLL_S)

    consumer._listener = Waiting()
    outcome: list[BaseException | None] = []

    def poll() -> None:
        try:
            poll_raises_closed(lambda: consumer.poll(POLL_S))
            outcome.append(None)
        except BaseException as error:  # reported by the main thread
            outcome.append(error)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    assert in_listener.wait(POLL_S)
    consumer.close(timeout=0)  # to its end, the loop closed, while the listener runs
    release.set()
    poller.join(POLL_S)
    assert not poller.is_alive(), "poll() still running after close()"
    assert outcome == [None], outcome


def test_a_close_as_the_commit_before_revocation_is_handed_over_ends_the_poll() -> None:
    consumer = Consumer(CONFIG)
    subscribed_with_pending(consumer, CallbackKind.REVOKED)
    on_loop = consumer._on_loop
    closed_in_the_window: list[bool] = []

    def close_then_hand_over(coroutine: Coroutine[Any, Any, Any]) -> Any:
        if not closed_in_the_window:  # poll()'s commit before revocation (not close()'s own)
            closed_in_the_window.append(True)
            consumer.close(timeout=0)  # another thread's close() landing as poll() hands it over
        return on_loop(coroutine)

    consumer._on_loop = close_then_hand_over  # type: ignore[method-assign]
    poll_raises_closed(lambda: consumer.poll(POLL_S))
    assert closed_in_the_window
