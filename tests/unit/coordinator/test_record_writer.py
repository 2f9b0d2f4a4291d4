"""Goal: a coordinator's writes to its `__consumer_offsets` partition keep their order, carry the
assignment's fencing identity with gap-free sequences, go out one batch at a time with the writes
that queued meanwhile, and never answer before every earlier write is durable; a fatal failure
fails everything waiting and every later write.

Method: drive the pure RecordWriter by hand (what the adapter does: next_batch, then on_success /
on_fatal) and check batches, sequences, offsets and completions exactly.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.record_writer import (
    Completed,
    RecordWriter,
    WriterFailedError,
)


def writer(**overrides: int) -> RecordWriter[str]:
    settings = {"max_batch_records": 100, "max_batch_bytes": 1 << 20} | overrides
    return RecordWriter(7, 3, **settings)


def test_a_write_is_sent_with_the_assignment_identity_and_completes_at_its_offset() -> None:
    w = writer()
    assert w.append([(b"k1", b"v1"), (b"k2", None)], "a") == []
    batch = w.next_batch()
    assert batch is not None
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 0)
    assert batch.keys == [b"k1", b"k2"] and batch.values == [b"v1", None]
    assert w.next_batch() is batch, "while in flight the same batch is the one to (re)send"
    assert w.on_success(40) == [Completed("a", 40)]
    assert w.next_sequence == 2 and w.end_offset == 42 and w.idle


def test_writes_queued_behind_a_batch_in_flight_leave_together_in_order() -> None:
    w = writer()
    w.append([(b"a", b"1")], "a")
    first = w.next_batch()
    w.append([(b"b", b"2")], "b")
    w.append([(b"c", b"3"), (b"d", b"4")], "c")
    assert w.on_success(0) == [Completed("a", 0)]
    second = w.next_batch()
    assert first is not None and second is not None
    assert second.base_sequence == 1 and second.keys == [b"b", b"c", b"d"]
    assert w.on_success(1) == [Completed("b", 1), Completed("c", 2)]
    assert w.next_sequence == 4


def test_a_batch_is_cut_at_the_record_and_byte_bounds_but_never_splits_a_write() -> None:
    w = writer(max_batch_records=3)
    w.append([(b"a", b"1"), (b"b", b"2")], "a")
    w.append([(b"c", b"3"), (b"d", b"4")], "b")
    batch = w.next_batch()
    assert batch is not None and batch.keys == [b"a", b"b"]
    w.on_success(0)
    batch = w.next_batch()
    assert batch is not None and batch.keys == [b"c", b"d"] and batch.base_sequence == 2

    big = writer(max_batch_bytes=10)
    big.append([(b"k", b"x" * 50)], "huge")
    batch = big.next_batch()
    assert batch is not None and batch.keys == [b"k"], "one write larger than the bound still goes"


def test_an_empty_write_completes_at_once_when_nothing_is_pending() -> None:
    w = writer()
    assert w.append([], "read") == [Completed("read", 0)]
    w.append([(b"a", b"1")], "a")
    w.next_batch()
    w.on_success(5)
    assert w.append([], "read2") == [Completed("read2", 6)]


def test_an_empty_write_waits_for_the_writes_before_it() -> None:
    w = writer()
    w.append([(b"a", b"1")], "a")
    w.next_batch()
    assert w.append([], "answer-after-a") == []
    w.append([(b"b", b"2")], "b")
    assert w.append([], "answer-after-b") == []
    assert w.on_success(10) == [Completed("a", 10), Completed("answer-after-a", 10)]
    assert w.next_batch() is not None
    assert w.on_success(11) == [Completed("b", 11), Completed("answer-after-b", 11)]


def test_a_fatal_failure_fails_everything_waiting_and_every_later_write() -> None:
    w = writer()
    w.append([(b"a", b"1")], "a")
    w.next_batch()
    w.append([], "read")
    w.append([(b"b", b"2")], "b")
    failed = w.on_fatal(ErrorCode.INVALID_PRODUCER_EPOCH, "fenced by epoch 4")
    assert failed == ["a", "read", "b"]
    assert w.next_batch() is None
    with pytest.raises(WriterFailedError) as raised:
        w.append([(b"c", b"3")], "c")
    assert raised.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequences_wrap_at_int32_as_in_kafka() -> None:
    w = RecordWriter(1, 0, max_batch_records=10, max_batch_bytes=1000, first_sequence=2**31 - 1)
    w.append([(b"a", b"1"), (b"b", b"2")], "a")
    batch = w.next_batch()
    assert batch is not None and batch.base_sequence == 2**31 - 1
    w.on_success(0)
    assert w.next_sequence == 1


def test_a_merged_batch_refused_as_too_large_is_sent_again_one_write_per_batch() -> None:
    w = writer()
    w.append([(b"a", b"1")], "a")
    w.next_batch()
    w.append([(b"b", b"2"), (b"b", b"3")], "b")
    w.append([(b"c", b"4")], "c")
    w.append([], "read")  # waits behind "c"
    w.on_success(10)
    merged = w.next_batch()
    assert merged is not None and merged.keys == [b"b", b"b", b"c"]
    assert w.split_in_flight(), "a batch of two writes is split"
    first = w.next_batch()
    assert first is not None and first.keys == [b"b", b"b"]
    assert first.base_sequence == merged.base_sequence == 1, "the refused batch used no sequence"
    assert w.on_success(11) == [Completed("b", 11)]
    w.append([(b"d", b"5")], "d")  # queued meanwhile: not merged with "c" either
    second = w.next_batch()
    assert second is not None and second.keys == [b"c"] and second.base_sequence == 3
    assert w.on_success(13) == [Completed("c", 13), Completed("read", 13)]
    third = w.next_batch()
    assert third is not None and third.keys == [b"d"]


def test_a_single_write_refused_as_too_large_names_its_own_token_only() -> None:
    w = writer()
    w.append([(b"big", b"x")], "big")
    w.append([], "read")  # an empty write waiting on it is not its request
    w.next_batch()
    assert not w.split_in_flight()
    assert w.refused_token() == "big"
    assert w.on_fatal(ErrorCode.MESSAGE_TOO_LARGE, "too large") == ["big", "read"]
