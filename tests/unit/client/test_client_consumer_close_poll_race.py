"""Goal: a close() that lands between poll()'s open check and its wait still ends that poll() at
once (c92e59e). poll() checks `_closed` outside the lock at the top of each turn, then takes the
lock and waits on the condition without looking again; close() sets `_closed` and notifies in
between, so the notification is lost and poll() sleeps min(timeout, max.poll.interval.ms / 2)
(150 s by default) after the consumer is closed.

Method: a real Consumer (no group, bootstrap refusing connections), assigned a partition. Its
open check is wrapped so that poll()'s first check passes and then close() runs right there, on
the polling thread, deterministically inside the window (what another thread's close() does
when it is scheduled at that moment). poll(timeout=POLL_S) must raise the closed consumer's
error well before POLL_S.
"""

from __future__ import annotations

import time

import pytest
from rebalance_helpers import T

from samsa.client import Consumer
from samsa.client.errors import KafkaError

POLL_S = 10.0
ENDED_WITHIN_S = 5.0  # close(timeout=0) and the driver's stop, far under POLL_S


def test_a_close_between_polls_open_check_and_its_wait_ends_the_poll() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1"})
    with consumer._progress:
        consumer._state.assign([(T, 0)])
        consumer._state.seek((T, 0), 5)
    check_open = consumer._check_open
    closed_in_the_window: list[bool] = []

    def check_then_close() -> None:
        check_open()
        if not closed_in_the_window:  # poll()'s first check: close() lands right after it
            closed_in_the_window.append(True)
            consumer.close(timeout=0)

    consumer._check_open = check_then_close  # type: ignore[method-assign]
    began = time.monotonic()
    with pytest.raises(KafkaError, match="closed"):
        consumer.poll(POLL_S)
    assert closed_in_the_window
    assert time.monotonic() - began < ENDED_WITHIN_S, "poll() slept through close()"
