"""Goal: the producer state answers every idempotence rule of KIP-98/KIP-360 as specified —
duplicates with their original offsets, gaps, stale retries, fenced and bumped epochs, unknown
producers, sequence wrap, the 5-batch window, multi-batch appends, expiry — and its snapshot
round-trips exactly and refuses every kind of damage with CorruptSnapshotError alone.

Method: pure calls on a ProducerStateTable fed with append_info.PlannedBatch values (the type the
log hands it); one test plans real codec-built batches.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.log.append_info import PlannedBatch, plan_leader_append
from samsa.services.broker.log.producer_state import (
    BATCHES_KEPT,
    NO_PRODUCER_ID,
    PRODUCER_EPOCH_MAX,
    SEQUENCE_MAX,
    AppendRefused,
    BatchMetadata,
    DuplicateAppend,
    ProducerEntry,
    ProducerStateTable,
)


def batch(
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    base_offset: int,
    records: int = 1,
    max_timestamp: int = 0,
) -> PlannedBatch:
    return PlannedBatch(
        position=0,
        base_offset=base_offset,
        last_offset=base_offset + records - 1,
        max_timestamp=max_timestamp,
        size_bytes=100,
        partition_leader_epoch=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=False,
    )


def refused(answer: object, code: ErrorCode, *words: str) -> None:
    assert isinstance(answer, AppendRefused), answer
    assert answer.code == code, answer
    for word in words:
        assert word in answer.message, answer.message


def written(*batches: PlannedBatch) -> ProducerStateTable:
    """A table that applied `batches`, each checked as its own append first."""
    table = ProducerStateTable()
    for item in batches:
        assert table.check_leader_append([item]) is None, item
        table.apply([item], 0)
    return table


def five_batch_table() -> ProducerStateTable:
    """Producer 1, epoch 0: six batches of 3 records (sequences 0..17 at offsets 100..117)."""
    return written(*(batch(1, 0, 3 * i, 100 + 3 * i, records=3) for i in range(6)))


# --- one batch -------------------------------------------------------------------------------


def test_a_new_producer_starts_at_sequence_zero() -> None:
    table = ProducerStateTable()
    assert table.check_leader_append([batch(7, 0, 0, 10, records=4, max_timestamp=5)]) is None
    assert len(table) == 0, "check changes nothing"
    table.apply([batch(7, 0, 0, 10, records=4, max_timestamp=5)], 900)
    metadata = (BatchMetadata(0, 3, 10, 13, 5),)
    assert table.entry(7) == ProducerEntry(7, 0, metadata, 5, last_append_ms=900)


def test_an_unknown_producer_not_at_sequence_zero_must_bump_its_epoch() -> None:
    answer = ProducerStateTable().check_leader_append([batch(7, 2, 12, 10)])
    refused(answer, ErrorCode.UNKNOWN_PRODUCER_ID, "producer 7", "sequence 12", "epoch")


@pytest.mark.parametrize(("epoch", "sequence"), [(-1, 0), (0, -1), (-1, -1), (32768, 0)])
def test_an_idempotent_batch_needs_a_valid_epoch_and_sequence(epoch: int, sequence: int) -> None:
    table = written(batch(7, 0, 0, 0))
    answer = table.check_leader_append([batch(7, epoch, sequence, 1)])
    refused(answer, ErrorCode.INVALID_RECORD, "producer 7", str(epoch), str(sequence))


def test_batches_without_a_producer_id_are_ignored() -> None:
    table = written(batch(7, 0, 0, 0))
    plain = batch(NO_PRODUCER_ID, -1, -1, 1, records=3)
    assert table.check_leader_append([plain]) is None
    assert table.check_leader_append([plain, batch(7, 0, 1, 4)]) is None
    before = table.entries()
    table.apply([plain], 0)
    assert table.entries() == before and len(table) == 1


def test_each_batch_must_continue_the_sequence() -> None:
    table = written(batch(1, 0, 0, 0, records=3))
    assert table.check_leader_append([batch(1, 0, 3, 3, records=2)]) is None
    refused(
        table.check_leader_append([batch(1, 0, 5, 3)]),
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "producer 1",
        "expected sequence 3",
        "got 5",
    )


def test_a_batch_straddling_the_last_sequence_is_out_of_order() -> None:
    table = written(batch(1, 0, 0, 0, records=3))  # sequences 0..2
    answer = table.check_leader_append([batch(1, 0, 2, 3, records=2)])  # 2..3
    refused(answer, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "expected sequence 3")


def test_a_retried_batch_answers_its_original_offsets() -> None:
    table = written(batch(1, 0, 0, 40, records=3), batch(1, 0, 3, 43, records=2))
    before = table.entries()
    assert table.check_leader_append([batch(1, 0, 0, 99, records=3)]) == DuplicateAppend(40, 42)
    assert table.check_leader_append([batch(1, 0, 3, 99, records=2)]) == DuplicateAppend(43, 44)
    assert table.entries() == before


def test_the_window_keeps_five_batches_and_an_older_retry_is_a_duplicate_sequence() -> None:
    table = five_batch_table()
    entry = table.entry(1)
    assert entry is not None and len(entry.batches) == BATCHES_KEPT
    assert [kept.first_sequence for kept in entry.batches] == [3, 6, 9, 12, 15]
    assert table.check_leader_append([batch(1, 0, 3, 500, records=3)]) == DuplicateAppend(103, 105)
    refused(
        table.check_leader_append([batch(1, 0, 0, 500, records=3)]),
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        "producer 1",
        "0..2",
        "17",
    )


def test_a_batch_below_the_last_sequence_that_matches_no_kept_batch_is_a_duplicate_sequence():
    table = five_batch_table()  # kept: 3..5, 6..8, ..., 15..17
    answer = table.check_leader_append([batch(1, 0, 6, 500, records=2)])  # 6..7
    refused(answer, ErrorCode.DUPLICATE_SEQUENCE_NUMBER, "6..7")


def test_sequences_wrap_from_the_maximum_to_zero() -> None:
    table = ProducerStateTable()
    table.apply([batch(1, 0, SEQUENCE_MAX - 1, 0, records=2)], 0)  # a follower's replicated batch
    refused(table.check_leader_append([batch(1, 0, SEQUENCE_MAX + 1, 2)]), ErrorCode.INVALID_RECORD)
    assert table.check_leader_append([batch(1, 0, 0, 2, records=4)]) is None
    straddling = batch(1, 0, SEQUENCE_MAX - 1, 0, records=4)
    table = ProducerStateTable()
    table.apply([straddling], 0)
    entry = table.entry(1)
    assert entry is not None and entry.batches[0][:2] == (SEQUENCE_MAX - 1, 1)
    assert table.check_leader_append([batch(1, 0, 2, 4)]) is None
    assert table.check_leader_append([straddling._replace(base_offset=9, last_offset=12)]) == (
        DuplicateAppend(0, 3)
    )
    refused(table.check_leader_append([batch(1, 0, 3, 4)]), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


# --- epochs ----------------------------------------------------------------------------------


def test_an_older_epoch_is_fenced() -> None:
    table = written(batch(1, 0, 0, 0), batch(1, 3, 0, 1))
    for sequence in (0, 1, 2):
        refused(
            table.check_leader_append([batch(1, 2, sequence, 5)]),
            ErrorCode.INVALID_PRODUCER_EPOCH,
            "producer 1",
            "epoch 2",
            "epoch 3",
        )


def test_a_new_epoch_restarts_at_sequence_zero_and_drops_the_old_batches() -> None:
    table = written(batch(1, 0, 0, 0, records=5, max_timestamp=50), batch(1, 0, 5, 5))
    refused(
        table.check_leader_append([batch(1, 1, 6, 6)]),
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "epoch 1",
        "sequence 6",
        "expected sequence 0",
    )
    assert table.check_leader_append([batch(1, 1, 0, 6)]) is None
    table.apply([batch(1, 1, 0, 6, max_timestamp=7)], 0)
    metadata = (BatchMetadata(0, 0, 6, 6, 7),)
    assert table.entry(1) == ProducerEntry(1, 1, metadata, 50, last_append_ms=0)
    refused(table.check_leader_append([batch(1, 0, 0, 9)]), ErrorCode.INVALID_PRODUCER_EPOCH)


def test_last_timestamp_is_the_largest_batch_timestamp_seen() -> None:
    table = written(batch(1, 0, 0, 0, max_timestamp=100), batch(1, 0, 1, 1, max_timestamp=40))
    entry = table.entry(1)
    assert entry is not None and entry.last_timestamp == 100


# --- expiry ----------------------------------------------------------------------------------


def test_expire_removes_producers_silent_for_the_expiration() -> None:
    table = written(
        batch(3, 0, 0, 0, max_timestamp=1_000),
        batch(1, 0, 0, 1, max_timestamp=1_000),
        batch(2, 0, 0, 2, max_timestamp=1_001),
    )
    assert table.expire(now_ms=1_499, expiration_ms=500) == []
    assert table.expire(now_ms=1_500, expiration_ms=500) == [1, 3]
    assert [entry.producer_id for entry in table.entries()] == [2]
    refused(table.check_leader_append([batch(1, 0, 1, 3)]), ErrorCode.UNKNOWN_PRODUCER_ID)
    assert table.check_leader_append([batch(1, 1, 0, 3)]) is None


def test_expire_keeps_a_producer_at_the_largest_epoch_when_asked() -> None:
    # The coordinator topics' rule: an exhausted writer id's entry is a fence for good.
    table = written(
        batch(1, PRODUCER_EPOCH_MAX, 0, 0, max_timestamp=1_000),
        batch(2, PRODUCER_EPOCH_MAX - 1, 0, 1, max_timestamp=1_000),
    )
    assert table.expire(now_ms=1 << 40, expiration_ms=500, keep_exhausted=True) == [2]
    refused(table.check_leader_append([batch(1, 5, 0, 2)]), ErrorCode.INVALID_PRODUCER_EPOCH)
    assert table.expire(now_ms=1 << 40, expiration_ms=500) == [1]
    assert table.check_leader_append([batch(1, 5, 0, 2)]) is None


# --- appends of several batches --------------------------------------------------------------


def test_new_batches_of_one_append_are_checked_in_order() -> None:
    table = written(batch(1, 0, 0, 0))
    assert table.check_leader_append([batch(1, 0, 1, 1, records=2), batch(1, 0, 3, 3)]) is None
    assert (
        table.check_leader_append([batch(2, 0, 0, 1), batch(2, 0, 1, 2), batch(1, 0, 1, 3)]) is None
    )
    refused(
        table.check_leader_append([batch(1, 0, 1, 1), batch(1, 0, 3, 2)]),
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "expected sequence 2",
    )
    assert table.check_leader_append([batch(1, 1, 0, 1), batch(1, 1, 1, 2)]) is None
    refused(
        table.check_leader_append([batch(1, 1, 0, 1), batch(1, 0, 1, 2)]),
        ErrorCode.INVALID_PRODUCER_EPOCH,
    )
    assert table.check_leader_append([batch(9, 0, 0, 1), batch(9, 0, 1, 2)]) is None
    assert len(table) == 1


def test_six_new_batches_in_one_append_slide_the_window_as_they_go() -> None:
    append = [batch(1, 0, i, i) for i in range(6)]
    table = ProducerStateTable()
    assert table.check_leader_append(append) is None
    table.apply(append, 0)
    entry = table.entry(1)
    assert entry is not None
    assert [kept.first_sequence for kept in entry.batches] == [1, 2, 3, 4, 5]


def test_a_retried_append_of_consecutive_batches_answers_their_span() -> None:
    table = written(batch(1, 0, 0, 0))
    first, second = batch(1, 0, 1, 1, records=2), batch(2, 0, 0, 3, records=3)
    table.apply([first, second], 0)
    retried = [
        first._replace(base_offset=50, last_offset=51),
        second._replace(base_offset=52, last_offset=54),
    ]
    assert table.check_leader_append(retried) == DuplicateAppend(1, 5)


@pytest.mark.parametrize(
    "append",
    [
        [batch(1, 0, 0, 9), batch(1, 0, 4, 10)],  # a retry and a new batch
        [batch(1, 0, 4, 9), batch(1, 0, 0, 10)],  # a new batch and a retry of an older one
        [batch(1, 0, 0, 9), batch(NO_PRODUCER_ID, -1, -1, 10)],  # a retry and a plain batch
        [batch(1, 0, 4, 9), batch(1, 0, 4, 10)],  # the same new batch twice
        [batch(1, 0, 1, 9), batch(1, 0, 0, 10)],  # retries out of log order
        [batch(1, 0, 0, 9), batch(1, 0, 2, 10)],  # retries not consecutive in the log
    ],
)
def test_a_retry_mixed_into_an_append_is_refused(append: list[PlannedBatch]) -> None:
    table = written(*(batch(1, 0, i, i) for i in range(4)))  # sequence i at offset i
    refused(
        table.check_leader_append(append), ErrorCode.INVALID_REQUEST, "send a retried batch alone"
    )


def test_a_refused_batch_refuses_the_whole_append() -> None:
    table = written(batch(1, 0, 0, 0))
    answer = table.check_leader_append([batch(1, 0, 1, 1), batch(2, 0, 5, 2)])
    refused(answer, ErrorCode.UNKNOWN_PRODUCER_ID, "producer 2")


def test_planned_leader_batches_drive_the_table() -> None:
    raw = build_batch([b"a", b"b"], producer_id=7, producer_epoch=1, base_sequence=0)
    raw += build_batch([b"c"], producer_id=7, producer_epoch=1, base_sequence=2)
    plan = plan_leader_append(
        raw,
        log_end_offset=30,
        leader_epoch=0,
        max_message_bytes=10_000,
        segment_bytes=100_000,
        log_append_time_ms=None,
    )
    table = ProducerStateTable()
    assert table.check_leader_append(plan.batches) is None
    table.apply(plan.batches, 0)
    assert table.check_leader_append(plan.batches) == DuplicateAppend(30, 32)
    entry = table.entry(7)
    assert entry is not None
    assert [(kept.first_sequence, kept.last_sequence) for kept in entry.batches] == [(0, 1), (2, 2)]


# --- the table -------------------------------------------------------------------------------


def test_entries_are_sorted_and_tables_compare_by_entries() -> None:
    one = written(batch(5, 0, 0, 0), batch(2, 0, 0, 1))
    other = written(batch(2, 0, 0, 1), batch(5, 0, 0, 0))
    assert [entry.producer_id for entry in one.entries()] == [2, 5]
    assert one == other and len(one) == 2
    other.apply([batch(5, 0, 1, 2)], 0)
    assert one != other
    assert one.entry(3) is None
