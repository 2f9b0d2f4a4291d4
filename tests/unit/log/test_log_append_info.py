"""Goal: append planning validates every batch before anything is written, assigns offsets and
stamps headers without breaking a CRC, and copies a large single batch at most once (never, in
fact: a 61-byte header copy plus a view of the rest).

Method: pure calls on codec-built batches; the planned pieces are joined and re-checked with
header.check_batch, and their types show what was copied.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import InvalidRecordError
from samsa.common.record.codec import build_batch, decode_batches
from samsa.common.record.header import HEADER_BYTES, check_batch, stamp_log_append_time
from samsa.services.broker.log.append_info import plan_follower_appends, plan_leader_append


def leader_plan(data: bytes, *, log_append_time_ms: int | None = None, **allowed: bool):
    return plan_leader_append(
        data,
        log_end_offset=500,
        leader_epoch=7,
        max_message_bytes=10_000,
        segment_bytes=100_000,
        log_append_time_ms=log_append_time_ms,
        **allowed,
    )


def test_single_batch_is_stamped_through_a_header_copy() -> None:
    raw = build_batch([b"x" * 5000], timestamps=3)
    plan = leader_plan(raw)
    assert [type(piece) for piece in plan.pieces] == [bytearray, memoryview]
    assert len(plan.pieces[0]) == HEADER_BYTES
    assert plan.pieces[1].obj is raw, "the payload is a view of the caller's bytes"
    stored = b"".join(plan.pieces)
    header = check_batch(stored)
    assert (header.base_offset, header.partition_leader_epoch) == (500, 7)
    assert plan.info.first_offset == plan.info.last_offset == 500
    assert plan.info.size_bytes == len(raw)


def test_several_batches_get_consecutive_offsets_and_stay_valid() -> None:
    data = build_batch([b"a", b"b"], timestamps=[5, 9]) + build_batch([b"c"], timestamps=4)
    plan = leader_plan(data)
    stored = b"".join(plan.pieces)
    assert [b.header.base_offset for b in decode_batches(stored)] == [500, 502]
    assert [(b.position, b.base_offset, b.last_offset) for b in plan.batches] == [
        (0, 500, 501),
        (len(data) - len(build_batch([b"c"], timestamps=4)), 502, 502),
    ]
    assert (plan.info.max_timestamp, plan.info.offset_of_max_timestamp) == (9, 501)
    assert plan.info.record_count == 3


def test_log_append_time_is_stamped_and_signed() -> None:
    plan = leader_plan(build_batch([b"a"], timestamps=5), log_append_time_ms=1234)
    stored = b"".join(plan.pieces)
    header = check_batch(stored)
    assert header.is_log_append_time and header.max_timestamp == 1234
    assert plan.info.log_append_time_ms == 1234


def test_a_producer_batch_marked_log_append_time_is_refused_on_a_create_time_topic() -> None:
    # Its max_timestamp would go unchecked against its records, and the time index, lookups
    # and retention trust it: a producer cannot choose the topic's timestamp type.
    marked = bytearray(build_batch([b"a"], timestamps=5))
    stamp_log_append_time(marked, 0, len(marked), 10**12)
    with pytest.raises(InvalidRecordError, match="LogAppendTime"):
        leader_plan(bytes(marked))
    assert leader_plan(bytes(marked), log_append_time_ms=1234).info.max_timestamp == 1234


def test_follower_plan_keeps_the_bytes_and_checks_order() -> None:
    data = build_batch([b"a"], base_offset=600) + build_batch([b"b"], base_offset=605)
    (plan,) = plan_follower_appends(data, log_end_offset=600, segment_bytes=100_000)
    assert plan.pieces == [data]
    assert (plan.info.first_offset, plan.info.last_offset) == (600, 605)
    with pytest.raises(InvalidRecordError, match="below 601"):
        plan_follower_appends(
            build_batch([b"a"], base_offset=600) + build_batch([b"b"], base_offset=600),
            log_end_offset=600,
            segment_bytes=100_000,
        )


def test_planned_batches_carry_the_producer_fields_the_producer_state_checks() -> None:
    idempotent = build_batch([b"a", b"b"], producer_id=7, producer_epoch=2, base_sequence=40)
    transactional = build_batch(
        [b"c"], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True
    )
    plain = build_batch([b"d"])
    plan = leader_plan(idempotent + transactional + plain, allow_transactional=True)
    fields = [
        (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) for b in plan.batches
    ]
    assert fields == [(7, 2, 40, False), (8, 0, 0, True), (-1, -1, -1, False)]
    stored = b"".join(bytes(piece) for piece in plan.pieces)
    (replicated,) = plan_follower_appends(stored, log_end_offset=500, segment_bytes=100_000)
    assert [b[6:] for b in replicated.batches] == [b[6:] for b in plan.batches]
