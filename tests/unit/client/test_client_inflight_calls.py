"""Goal: the pure bookkeeping behind a client's close() (inflight_calls.py) closes the channels
exactly once, and only when no call is in flight or being issued; it hands back the calls to
cancel, says to cancel one issued while close() came, and refuses calls after close().

Method: InFlightCalls driven directly, with strings for calls, through each interleaving of a
call's begin/started/end with close().
"""

from __future__ import annotations

import pytest

from samsa.client.errors import KafkaError
from samsa.client.inflight_calls import InFlightCalls
from samsa.common.errors import ErrorCode


def test_idle_channels_close_at_once_and_only_once() -> None:
    calls: InFlightCalls[str] = InFlightCalls()
    assert calls.close() == ([], True)
    assert calls.close() == ([], False)


def test_a_call_in_flight_is_cancelled_and_its_end_closes_the_channels() -> None:
    calls: InFlightCalls[str] = InFlightCalls()
    calls.begin()
    assert calls.started("a") is False
    calls.begin()
    assert calls.started("b") is False
    assert calls.end("b") is False, "not closing: nothing to close"
    assert calls.close() == (["a"], False), "a is in flight: cancel it, close later"
    assert calls.end("a") is True, "the last call leaves: close now"
    assert calls.close() == ([], False), "closed once"


def test_a_call_being_issued_holds_the_channels_and_is_cancelled_once_issued() -> None:
    calls: InFlightCalls[str] = InFlightCalls()
    calls.begin()
    assert calls.close() == ([], False), "issued meanwhile: not closed under it"
    assert calls.started("a") is True, "close() came while it was issued: cancel it"
    assert calls.end("a") is True


def test_a_call_that_failed_to_start_lets_the_channels_close() -> None:
    calls: InFlightCalls[str] = InFlightCalls()
    calls.begin()
    assert calls.close() == ([], False)
    assert calls.end(None) is True


def test_a_call_after_close_is_refused() -> None:
    calls: InFlightCalls[str] = InFlightCalls()
    calls.close()
    with pytest.raises(KafkaError, match="closed") as refused:
        calls.begin()
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert calls.issuing == 0
