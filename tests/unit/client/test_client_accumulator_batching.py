"""Goal: the accumulator batches records the way Kafka's does — by batch.size, per
partition, within max.request.size and buffer.memory — encodes exactly what was appended, refuses
bad records without changing anything, and fills whole batches with the sticky partitioner
(KIP-480). Siblings: test_client_accumulator_draining.py (readiness, drain, sequences, expiry,
flush) and test_client_accumulator_outcomes.py (acks, failures, retries, epoch resets).

Method: scenario tests on a RecordAccumulator built from a ProducerConfig (accumulator_helpers.py),
no clock and no sleep. Drained batches are decoded with the real codec, so the tests also check
what would go on the wire; the KIP-480 test drives a StickyPartitioner seeded with random.Random.
"""

from __future__ import annotations

import itertools
import random
import re

import pytest
from accumulator_helpers import (
    LEADERS,
    PRODUCER_EPOCH,
    PRODUCER_ID,
    VALUE,
    append,
    batch_size_for,
    drain_all,
    drain_encoded,
    make,
)

from samsa.client.partitioner import StickyPartitioner
from samsa.client.record_batcher import AppendRefusal, AppendResult
from samsa.common.errors import ErrorCode, InvalidRecordError, RecordTooLargeError
from samsa.common.record import codec, header

# --- batching -------------------------------------------------------------------------------------


def test_records_fill_one_batch_until_batch_size_then_a_new_one_opens() -> None:
    accumulator = make(batch_size=batch_size_for(3))
    results = [append(accumulator) for _ in range(4)]
    assert [(r.batch_id, r.record_index) for r in results] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert [r.new_batch for r in results] == [True, False, False, True]
    # The third record fills batch 0 exactly (no fourth fits): full, wake the sender.
    assert [r.batch_is_full for r in results] == [False, False, True, True]


def test_a_batch_always_takes_its_first_record_even_above_batch_size() -> None:
    accumulator = make(batch_size=10)
    assert append(accumulator, value=b"x" * 500).new_batch
    assert append(accumulator, value=b"x").new_batch


def test_batch_size_zero_means_one_record_per_batch() -> None:
    accumulator = make(batch_size=0)
    assert [append(accumulator).batch_id for _ in range(3)] == [0, 1, 2]


def test_partitions_have_their_own_batches() -> None:
    accumulator = make()
    assert append(accumulator, partition=0).batch_id != append(accumulator, partition=1).batch_id
    assert append(accumulator, partition=0).record_index == 1


def test_size_estimate_is_the_exact_encoded_size() -> None:
    accumulator = make()
    accumulator.append("t", 0, b"key", b"value", [("h", b"x"), ("\u00e9", None)], 5, 0)
    accumulator.append("t", 0, None, None, None, 6, 0)
    accumulator.append("t", 0, b"", b"", [], 7, 0)
    (batch,) = drain_all(accumulator, 0)
    assert batch.encoded is not None and len(batch.encoded) == batch.size_bytes
    assert accumulator.buffered_bytes == batch.size_bytes


def test_drained_batch_decodes_to_the_appended_records() -> None:
    accumulator = make()
    accumulator.append("t", 0, b"k1", b"v1", None, 100, 0)
    accumulator.append("t", 0, None, b"v2", [("trace", b"abc")], 105, 0)
    accumulator.append("t", 0, b"k3", None, None, None, 0)  # timestamp None: now_ms
    (batch,) = drain_all(accumulator, 0)
    decoded = codec.decode_batch(batch.encoded)
    assert decoded.keys == [b"k1", None, b"k3"]
    assert decoded.values == [b"v1", b"v2", None]
    assert decoded.timestamps() == [100, 105, 0]
    assert decoded.headers == [(), (("trace", b"abc"),), ()]
    assert decoded.header.producer_id == PRODUCER_ID
    assert decoded.header.producer_epoch == PRODUCER_EPOCH
    assert decoded.header.base_sequence == 0
    assert not decoded.header.is_transactional


def test_keyless_batches_encode_keys_as_null() -> None:
    accumulator = make()
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    assert codec.decode_batch(batch.encoded).keys == [None]


def test_zstd_batches_are_compressed() -> None:
    accumulator = make(compression_type="zstd")
    for _ in range(50):
        append(accumulator, value=b"the same bytes again " * 4)
    (batch,) = drain_all(accumulator, 0)
    decoded = codec.decode_batch(batch.encoded)
    assert decoded.header.compression == header.COMPRESSION_ZSTD
    assert len(batch.encoded) < batch.size_bytes
    assert decoded.values == [b"the same bytes again " * 4] * 50


def test_transactional_producer_marks_batches_transactional() -> None:
    accumulator = make(transactional_id="tx-1")
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)  # no wait for an add: the leader adds the partition
    assert codec.decode_batch(batch.encoded).header.is_transactional


def test_abort_queued_fails_what_was_not_sent() -> None:
    accumulator = make(transactional_id="tx-1")
    append(accumulator)
    assert len(drain_all(accumulator, 0)) == 1
    append(accumulator)
    (failed,) = accumulator.abort_queued(ErrorCode.INVALID_TXN_STATE, "aborted")
    assert failed.error_code is ErrorCode.INVALID_TXN_STATE
    assert accumulator.in_flight_count == 1, "the sent batch finishes as it does"


def test_non_idempotent_batches_carry_no_producer_fields() -> None:
    accumulator = make(idempotent=False)
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    decoded_header = codec.decode_batch(batch.encoded).header
    assert decoded_header.producer_id == header.NO_PRODUCER_ID
    assert decoded_header.base_sequence == header.NO_SEQUENCE


# --- record checks --------------------------------------------------------------------------------


def test_bytearray_and_memoryview_are_copied_to_bytes() -> None:
    accumulator = make()
    buffer = bytearray(b"abc")
    accumulator.append("t", 0, memoryview(b"key"), buffer, [("h", bytearray(b"x"))], 0, 0)
    buffer[:] = b"zzz"  # the caller reuses its buffer: the record must not change
    (batch,) = drain_all(accumulator, 0)
    decoded = codec.decode_batch(batch.encoded)
    assert (decoded.keys, decoded.values, decoded.headers) == (
        [b"key"],
        [b"abc"],
        [(("h", b"x"),)],
    )


@pytest.mark.parametrize(
    ("key", "value", "headers", "timestamp_ms", "phrase"),
    [
        (None, "text", None, 0, "value must be bytes or None, got str"),
        (5, b"v", None, 0, "key must be bytes or None, got int"),
        (None, b"v", [("h", "text")], 0, "header 'h' must be bytes or None"),
        (None, b"v", [(b"h", b"x")], 0, "header key must be str"),
        (None, b"v", [("h",)], 0, "must be a (str, bytes | None) pair"),
        (None, b"v", [("\ud800", b"x")], 0, "is not UTF-8"),
        (None, b"v", None, -1, "invalid timestamp -1"),
        (None, b"v", None, 2**63, "invalid timestamp"),
    ],
)
def test_bad_records_are_refused_and_change_nothing(
    key: object, value: object, headers: object, timestamp_ms: int, phrase: str
) -> None:
    accumulator = make()
    with pytest.raises(InvalidRecordError, match=re.escape(phrase)):
        accumulator.append("t", 0, key, value, headers, timestamp_ms, 0)  # type: ignore[arg-type]
    assert accumulator.buffered_bytes == 0 and not accumulator.has_unfinished()


def test_record_larger_than_max_request_size_raises() -> None:
    accumulator = make(max_request_size=1000, batch_size=500)
    with pytest.raises(RecordTooLargeError, match=r"larger than max.request.size \(1000\)"):
        append(accumulator, value=b"x" * 1000)
    assert not accumulator.has_unfinished()


def test_record_larger_than_buffer_memory_raises() -> None:
    accumulator = make(buffer_memory=20_000, batch_size=1000)
    with pytest.raises(RecordTooLargeError, match=r"larger than buffer.memory \(20000\)"):
        append(accumulator, value=b"x" * 30_000)


# --- memory ---------------------------------------------------------------------------------------


def test_buffer_memory_bounds_buffered_bytes() -> None:
    memory = 3 * batch_size_for(2)
    accumulator = make(linger_ms=10_000, buffer_memory=memory, batch_size=batch_size_for(2))
    appended = 0
    while True:
        result = accumulator.append("t", 0, None, VALUE, None, None, 0)
        if result is AppendRefusal.BUFFER_FULL:
            break
        appended += 1
        assert accumulator.buffered_bytes <= memory
    assert appended == 6
    before = accumulator.buffered_bytes
    assert accumulator.append("t", 0, None, VALUE, None, None, 0) is AppendRefusal.BUFFER_FULL
    assert accumulator.buffered_bytes == before  # a refusal changes nothing
    # While an append waits for memory every batch is sendable (Kafka's "exhausted" rule).
    assert accumulator.ready(0, LEADERS).ready_nodes == {1}
    (oldest, *_) = drain_encoded(accumulator, 1, 1 << 20, 0)
    accumulator.on_batch_acked(oldest.batch_id, 0)
    assert isinstance(accumulator.append("t", 0, None, VALUE, None, None, 0), AppendResult)
    assert accumulator.ready(0, LEADERS).ready_nodes == frozenset()  # lingering again


# --- sticky partitioning with the accumulator -----------------------------------------------------


def test_abort_on_new_batch_refuses_without_changing_anything() -> None:
    accumulator = make(batch_size=batch_size_for(1))
    assert (
        accumulator.append("t", 0, None, VALUE, None, None, 0, abort_on_new_batch=True)
        is AppendRefusal.NEW_BATCH_NEEDED
    )
    assert not accumulator.has_unfinished()
    append(accumulator)
    assert (
        accumulator.append("t", 0, None, VALUE, None, None, 0, abort_on_new_batch=True)
        is AppendRefusal.NEW_BATCH_NEEDED
    )
    assert accumulator.buffered_bytes == batch_size_for(1)


def test_keyless_records_fill_whole_batches_across_partitions() -> None:
    """The driver's KIP-480 dance: append with abort_on_new_batch, and on NEW_BATCH_NEEDED tell
    the sticky partitioner the batch closed, pick again and append for real."""
    accumulator = make(batch_size=batch_size_for(4), linger_ms=1000)
    sticky = StickyPartitioner(random.Random(4))
    placements = []
    for _ in range(40):
        partition = sticky.partition("t", 3)
        result = accumulator.append("t", partition, None, VALUE, None, None, 0, True)
        if result is AppendRefusal.NEW_BATCH_NEEDED:
            sticky.on_batch_closed("t", partition)
            partition = sticky.partition("t", 3)
            result = accumulator.append("t", partition, None, VALUE, None, None, 0, False)
        assert isinstance(result, AppendResult)
        placements.append((result.batch_id, partition))
    batch_sizes: dict[int, int] = {}
    for batch_id, _ in placements:
        batch_sizes[batch_id] = batch_sizes.get(batch_id, 0) + 1
    assert list(batch_sizes.values()) == [4] * 10  # every batch full, none left half-empty
    partitions_in_order = [partition for _, partition in placements[::4]]
    assert all(a != b for a, b in itertools.pairwise(partitions_in_order))
    assert len(set(partitions_in_order)) == 3
