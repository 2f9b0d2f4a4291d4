"""DeleteRecords' refusals, decided before anything is deleted: internal topics, compacted-only
topics, offsets that are not committed yet, timeouts out of bounds. Each names what to fix."""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode
from samsa.services.broker.requests.delete_records import delete_refusal, timeout_refusal


def refusal(topic: str = "t", offset: int = 5, hw: int = 10, deletes: bool = True):
    return delete_refusal(topic, offset, high_watermark=hw, cleanup_deletes=deletes)


@pytest.mark.parametrize("offset", [-1, 0, 5, 10])
def test_offsets_up_to_the_high_watermark_are_accepted(offset: int) -> None:
    assert refusal(offset=offset) is None


@pytest.mark.parametrize("offset", [-2, 11, 2**62])
def test_offsets_above_the_high_watermark_or_below_minus_one_are_out_of_range(offset: int) -> None:
    code, message = refusal(offset=offset)
    assert code == ErrorCode.OFFSET_OUT_OF_RANGE and "high watermark 10" in message


def test_internal_and_compacted_only_topics_are_a_policy_violation() -> None:
    code, message = refusal(topic="__consumer_offsets")
    assert code == ErrorCode.POLICY_VIOLATION and "internal" in message
    code, message = refusal(topic="__transaction_state")
    assert code == ErrorCode.POLICY_VIOLATION
    code, message = refusal(deletes=False)
    assert code == ErrorCode.POLICY_VIOLATION and "cleanup.policy=compact" in message


def test_timeouts_are_bounded() -> None:
    assert timeout_refusal(0) is None and timeout_refusal(300_000) is None
    assert "300000" in (timeout_refusal(300_001) or "")
    assert timeout_refusal(-1) is not None
