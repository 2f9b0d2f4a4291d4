"""Goal: the accumulator batches records the way Kafka's does — by batch.size and linger.ms, per
leader, within max.request.size and buffer.memory — and keeps every partition in order through
retries, sequence numbers, expiry and producer-id resets, reporting every outcome as data.

Method: scenario tests on a RecordAccumulator built from a ProducerConfig, time passed as plain
numbers (no clock, no sleep), a seeded random.Random (or a fixed one) for jitter. Drained batches
are decoded with the real codec, so the tests also check what would go on the wire.
"""

from __future__ import annotations

import itertools
import random
import re

import pytest

from samsa.client.accumulator import RecordAccumulator
from samsa.client.config import ProducerConfig
from samsa.client.partitioner import StickyPartitioner
from samsa.client.producer_batch import (
    BATCH_OVERHEAD_BYTES,
    RECORD_OVERHEAD_BYTES,
    Completed,
    ProducerBatch,
)
from samsa.client.producer_sequences import PRODUCER_EPOCH_MAX, bumped_producer_epoch
from samsa.client.record_batcher import AppendRefusal, AppendResult
from samsa.common.errors import ErrorCode, InvalidRecordError, RecordTooLargeError
from samsa.common.record import codec, header

LEADERS = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2, ("u", 0): 2}
VALUE = b"v" * 10
RECORD_BYTES = RECORD_OVERHEAD_BYTES + len(VALUE)  # keyless, headerless
PRODUCER_ID, PRODUCER_EPOCH = 1000, 0


class FixedRandom:
    """random() always 0.5: the jitter factor is exactly 1, so backoffs are exact."""

    def random(self) -> float:
        return 0.5


def make(idempotent: bool = True, random_source: object = None, **settings: object):
    config = ProducerConfig.from_dict(
        {
            "bootstrap.servers": "localhost:9092",
            "linger.ms": 0,
            "enable.idempotence": idempotent,
            **{key.replace("_", "."): value for key, value in settings.items()},
        }
    )
    accumulator = RecordAccumulator(config, random_source or random.Random(0))
    if idempotent:
        accumulator.set_producer_id(PRODUCER_ID, PRODUCER_EPOCH)
    return accumulator


def batch_size_for(record_count: int) -> int:
    return BATCH_OVERHEAD_BYTES + record_count * RECORD_BYTES


def append(
    accumulator: RecordAccumulator,
    partition: int = 0,
    now_ms: int = 0,
    topic: str = "t",
    value: bytes = VALUE,
    **options: object,
) -> AppendResult:
    result = accumulator.append(topic, partition, None, value, None, None, now_ms, **options)
    assert isinstance(result, AppendResult), result
    return result


def drain_all(
    accumulator: RecordAccumulator, now_ms: int, max_request_bytes: int = 1 << 20
) -> list[ProducerBatch]:
    ready = accumulator.ready(now_ms, LEADERS)
    drained = []
    for node in sorted(ready.ready_nodes):
        drained += accumulator.drain(node, max_request_bytes, now_ms)
    return drained


def values_of(batch: ProducerBatch) -> list[bytes | None]:
    assert batch.encoded is not None
    return codec.decode_batch(batch.encoded).values


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
    (batch,) = drain_all(accumulator, 0)
    assert codec.decode_batch(batch.encoded).header.is_transactional


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


# --- linger and readiness -------------------------------------------------------------------------


def test_a_batch_lingers_then_becomes_ready() -> None:
    accumulator = make(linger_ms=10)
    append(accumulator, now_ms=100)
    waiting = accumulator.ready(105, LEADERS)
    assert waiting.ready_nodes == frozenset()
    assert waiting.next_check_ms == 110
    assert accumulator.drain(1, 1 << 20, 105) == []
    assert accumulator.ready(110, LEADERS).ready_nodes == {1}


def test_linger_counts_from_the_batchs_first_record() -> None:
    accumulator = make(linger_ms=10)
    append(accumulator, now_ms=0)
    append(accumulator, now_ms=9)
    assert accumulator.ready(10, LEADERS).ready_nodes == {1}


def test_a_full_batch_is_ready_before_linger() -> None:
    accumulator = make(linger_ms=1000, batch_size=batch_size_for(2))
    append(accumulator)
    assert accumulator.ready(0, LEADERS).ready_nodes == frozenset()
    append(accumulator)  # exactly full
    assert accumulator.ready(0, LEADERS).ready_nodes == {1}


def test_a_closed_batch_is_ready_before_linger() -> None:
    # Room for an empty record after two, but not for a third VALUE: not full, then closed.
    accumulator = make(linger_ms=1000, batch_size=batch_size_for(2) + RECORD_OVERHEAD_BYTES)
    append(accumulator)
    append(accumulator)
    assert accumulator.ready(0, LEADERS).ready_nodes == frozenset()
    append(accumulator)  # does not fit: batch 0 closes, batch 1 opens
    assert accumulator.ready(0, LEADERS).ready_nodes == {1}
    drained = accumulator.drain(1, 1 << 20, 0)
    # The whole node's queue goes: the closed batch and (piggybacked) the open one.
    assert [len(values_of(batch)) for batch in drained] == [2, 1]


def test_next_check_is_the_earliest_deadline() -> None:
    accumulator = make(linger_ms=50, delivery_timeout_ms=60_000, request_timeout_ms=1000)
    append(accumulator, partition=0, now_ms=10)
    append(accumulator, partition=2, now_ms=20)
    assert accumulator.ready(30, LEADERS).next_check_ms == 60
    assert accumulator.ready(30, {}).next_check_ms == 60_010  # no leaders: only expiry


def test_nothing_buffered_means_nothing_to_check() -> None:
    result = make().ready(0, LEADERS)
    assert result.ready_nodes == frozenset() and result.next_check_ms is None


def test_unknown_leader_is_reported_and_not_ready() -> None:
    accumulator = make()
    append(accumulator, topic="orphan")
    result = accumulator.ready(0, LEADERS)
    assert result.unknown_leader_topics == {"orphan"}
    assert result.ready_nodes == frozenset()


def test_ready_and_drain_are_per_leader() -> None:
    accumulator = make()
    append(accumulator, partition=0)
    append(accumulator, partition=1)
    append(accumulator, partition=2)
    append(accumulator, topic="u", partition=0)
    assert accumulator.ready(0, LEADERS).ready_nodes == {1, 2}
    to_node_1 = accumulator.drain(1, 1 << 20, 0)
    to_node_2 = accumulator.drain(2, 1 << 20, 0)
    assert sorted((b.topic, b.partition) for b in to_node_1) == [("t", 0), ("t", 1)]
    assert sorted((b.topic, b.partition) for b in to_node_2) == [("t", 2), ("u", 0)]
    assert accumulator.drain(1, 1 << 20, 0) == []


def test_a_ready_node_also_takes_its_lingering_partitions() -> None:
    """Kafka's drain takes every partition of the node: the request is going anyway."""
    accumulator = make(linger_ms=1000, batch_size=batch_size_for(1))
    append(accumulator, partition=0)  # full: ready
    append(accumulator, partition=1, value=b"")  # lingering
    assert accumulator.ready(0, LEADERS).ready_nodes == {1}
    assert sorted(b.partition for b in accumulator.drain(1, 1 << 20, 0)) == [0, 1]


# --- request size and fairness --------------------------------------------------------------------


def test_drain_respects_max_request_bytes() -> None:
    accumulator = make(batch_size=batch_size_for(2))
    for _ in range(6):
        append(accumulator)  # 3 full batches on t-0
    accumulator.ready(0, LEADERS)
    first = accumulator.drain(1, 2 * batch_size_for(2), 0)
    assert len(first) == 2
    assert sum(batch.size_bytes for batch in first) <= 2 * batch_size_for(2)
    assert len(accumulator.drain(1, 2 * batch_size_for(2), 0)) == 1


def test_the_first_batch_always_goes_even_if_larger_than_the_request_limit() -> None:
    accumulator = make()
    append(accumulator, value=b"x" * 1000)
    accumulator.ready(0, LEADERS)
    assert len(accumulator.drain(1, 100, 0)) == 1


def test_drain_rotates_its_starting_partition() -> None:
    accumulator = make(idempotent=False, max_in_flight_requests_per_connection=50, batch_size=0)
    leaders = {("t", p): 1 for p in range(4)}
    for partition in range(4):
        for _ in range(3):
            append(accumulator, partition=partition)
    firsts = []
    for _ in range(4):
        accumulator.ready(0, leaders)
        (batch,) = accumulator.drain(1, 1, 0)  # one batch per request
        firsts.append(batch.partition)
    assert firsts == [0, 1, 2, 3]


# --- idempotence: sequences and in-flight limits --------------------------------------------------


def test_nothing_is_sent_before_a_producer_id() -> None:
    config = ProducerConfig.from_dict({"bootstrap.servers": "a:1", "linger.ms": 0})
    accumulator = RecordAccumulator(config, random.Random(0))
    append(accumulator)
    result = accumulator.ready(0, LEADERS)
    assert result.producer_id_required and result.ready_nodes == frozenset()
    accumulator.set_producer_id(7, 3)
    assert not accumulator.ready(0, LEADERS).producer_id_required
    (batch,) = accumulator.drain(1, 1 << 20, 0)
    assert codec.decode_batch(batch.encoded).header.producer_id == 7


def test_sequences_are_assigned_per_partition_at_drain() -> None:
    accumulator = make(batch_size=batch_size_for(3))
    for _ in range(5):
        append(accumulator, partition=0)  # batches of 3 and 2
    append(accumulator, partition=1)
    drained = drain_all(accumulator, 0)
    sequences = {(b.partition, b.batch_id): b.base_sequence for b in drained}
    assert sequences == {(0, 0): 0, (0, 1): 3, (1, 2): 0}
    for batch in drained:
        assert codec.decode_batch(batch.encoded).header.base_sequence == batch.base_sequence


def test_sequences_wrap_at_int32_like_kafka() -> None:
    accumulator = make()
    append(accumulator)
    append(accumulator)
    accumulator._batcher.partitions[("t", 0)].next_sequence = 2**31 - 1
    (batch,) = drain_all(accumulator, 0)
    assert batch.base_sequence == 2**31 - 1
    assert accumulator._batcher.partitions[("t", 0)].next_sequence == 1


def test_at_most_five_batches_of_a_partition_in_flight_with_idempotence() -> None:
    accumulator = make(batch_size=0)
    for _ in range(7):
        append(accumulator)
    assert len(drain_all(accumulator, 0)) == 5
    assert drain_all(accumulator, 0) == []
    (first, *_) = accumulator._batcher.partitions[("t", 0)].in_flight
    accumulator.on_batch_acked(first.batch_id, 0)
    assert len(drain_all(accumulator, 0)) == 1


def test_max_in_flight_one_sends_one_batch_per_partition_at_a_time() -> None:
    accumulator = make(idempotent=False, batch_size=0, max_in_flight_requests_per_connection=1)
    for _ in range(3):
        append(accumulator, partition=0)
        append(accumulator, partition=1)
    assert sorted(b.partition for b in drain_all(accumulator, 0)) == [0, 1]
    assert drain_all(accumulator, 0) == []


# --- outcomes -------------------------------------------------------------------------------------


def test_ack_completes_every_record_of_the_batch() -> None:
    accumulator = make()
    handles = [append(accumulator) for _ in range(3)]
    (batch,) = drain_all(accumulator, 0)
    (completed,) = accumulator.on_batch_acked(batch.batch_id, 500, 1234)
    assert completed == Completed(
        batch_id=handles[0].batch_id,
        topic="t",
        partition=0,
        record_count=3,
        base_offset=500,
        log_append_time_ms=1234,
        error_code=ErrorCode.NONE,
        error_message="",
    )
    assert accumulator.buffered_bytes == 0 and not accumulator.has_unfinished()


def test_an_outcome_for_a_batch_not_in_flight_is_a_programmer_error() -> None:
    accumulator = make()
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    accumulator.on_batch_acked(batch.batch_id, 0)
    with pytest.raises(AssertionError, match="not in flight"):
        accumulator.on_batch_acked(batch.batch_id, 0)


def test_retry_keeps_order_sequence_and_bytes() -> None:
    """Three batches in flight; the first fails (NOT_LEADER), the others are rejected behind it
    (OUT_OF_ORDER_SEQUENCE): all go back in order, keep their sequences and their bytes, and the
    retries are sent one at a time."""
    accumulator = make(batch_size=batch_size_for(2), random_source=FixedRandom())
    for _ in range(6):
        append(accumulator)
    first, second, third = drain_all(accumulator, 0)
    sent = {b.batch_id: (b.base_sequence, b.encoded) for b in (first, second, third)}
    assert [sequence for sequence, _ in sent.values()] == [0, 2, 4]

    assert (
        accumulator.on_batch_failed(first.batch_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, True, 10)
        == []
    )
    assert (
        accumulator.on_batch_failed(
            third.batch_id, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, 11
        )
        == []
    )  # behind an unfinished batch: retried even though the driver said not retriable
    assert (
        accumulator.on_batch_failed(
            second.batch_id, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, 12
        )
        == []
    )
    assert not accumulator.ready(12, LEADERS).producer_id_required  # no reset needed

    waiting = accumulator.ready(50, LEADERS)
    assert waiting.ready_nodes == frozenset() and waiting.next_check_ms == 110  # 10 + 100
    resent = []
    now_ms = 200
    for _ in range(3):
        (batch,) = drain_all(accumulator, now_ms)  # one at a time: a retry goes alone
        assert drain_all(accumulator, now_ms) == []
        resent.append(batch.batch_id)
        assert (batch.base_sequence, batch.encoded) == sent[batch.batch_id]
        assert batch.attempts == 2
        accumulator.on_batch_acked(batch.batch_id, 0)
    assert resent == [first.batch_id, second.batch_id, third.batch_id]


def test_a_retry_waits_for_its_partitions_in_flight_batches() -> None:
    accumulator = make(batch_size=0, random_source=FixedRandom(), retry_backoff_ms=0)
    for _ in range(3):
        append(accumulator)
    first, second, third = drain_all(accumulator, 0)
    accumulator.on_batch_failed(second.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 1)
    assert drain_all(accumulator, 5) == []  # `third` is still in flight
    accumulator.on_batch_acked(first.batch_id, 0)
    assert drain_all(accumulator, 5) == []
    accumulator.on_batch_failed(third.batch_id, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, 6)
    (again,) = drain_all(accumulator, 6)  # the retries, one at a time
    assert again.batch_id == second.batch_id


def test_a_batch_older_than_an_acked_one_was_written() -> None:
    """The broker takes sequences only in order: once `second` is acked, `first` (whose
    response was lost) is known written. It completes as a success without offset and is never
    re-sent — whether it was waiting to retry, or its failure arrives afterwards."""
    accumulator = make(batch_size=0, random_source=FixedRandom())
    for _ in range(3):
        append(accumulator)
    first, second, third = drain_all(accumulator, 0)
    assert accumulator.on_batch_failed(first.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 1) == []
    acked_second, written_first = accumulator.on_batch_acked(second.batch_id, 7)
    assert (acked_second.batch_id, acked_second.base_offset) == (second.batch_id, 7)
    assert written_first.batch_id == first.batch_id
    assert (written_first.error_code, written_first.base_offset) == (ErrorCode.NONE, -1)
    accumulator.on_batch_acked(third.batch_id, 8)
    assert drain_all(accumulator, 1_000) == [] and not accumulator.has_unfinished()

    # Same proof when the failure of the older batch arrives after the newer ack.
    for _ in range(2):
        append(accumulator)
    older, newer = drain_all(accumulator, 1_000)
    accumulator.on_batch_acked(newer.batch_id, 9)
    (written,) = accumulator.on_batch_failed(
        older.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, 1_001
    )
    assert (written.error_code, written.base_offset) == (ErrorCode.NONE, -1)
    assert not accumulator.ready(1_001, LEADERS).producer_id_required


def test_duplicate_sequence_is_a_success_without_offset() -> None:
    accumulator = make()
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    (completed,) = accumulator.on_batch_failed(
        batch.batch_id, ErrorCode.DUPLICATE_SEQUENCE_NUMBER, False, 0
    )
    assert (completed.error_code, completed.base_offset) == (ErrorCode.NONE, -1)


def test_new_batches_wait_behind_a_queued_retry() -> None:
    accumulator = make(batch_size=0, random_source=FixedRandom())
    append(accumulator)
    (first,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(first.batch_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, True, 0)
    append(accumulator, now_ms=1)  # a newer batch, immediately sendable (linger 0)
    assert drain_all(accumulator, 50) == []  # the head is backing off: nothing overtakes it
    # The retry goes first and alone: the newer batch waits for its outcome (a broker refuses a
    # request mixing a duplicate with new batches, and another request could overtake it).
    assert [b.batch_id for b in drain_all(accumulator, 100)] == [first.batch_id]
    assert drain_all(accumulator, 100) == []
    accumulator.on_batch_acked(first.batch_id, 0)
    assert [b.batch_id for b in drain_all(accumulator, 100)] == [1]


def test_a_retry_shares_its_request_with_other_partitions_only() -> None:
    accumulator = make(batch_size=0, random_source=FixedRandom(), retry_backoff_ms=0)
    append(accumulator, partition=0)
    (first,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(first.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 0)
    for partition in (0, 0, 1):  # partitions 0 and 1 share a leader
        append(accumulator, partition=partition, now_ms=1)
    drained = drain_all(accumulator, 1)
    assert sorted((b.partition, b.batch_id, b.attempts) for b in drained) == [
        (0, first.batch_id, 2),
        (1, 3, 1),
    ]


def test_an_idempotent_producer_bumps_its_own_epoch_until_int16_runs_out() -> None:
    assert bumped_producer_epoch(header.NO_PRODUCER_ID, header.NO_PRODUCER_EPOCH) is None
    assert bumped_producer_epoch(PRODUCER_ID, 0) == 1
    assert bumped_producer_epoch(PRODUCER_ID, PRODUCER_EPOCH_MAX - 1) == PRODUCER_EPOCH_MAX
    assert bumped_producer_epoch(PRODUCER_ID, PRODUCER_EPOCH_MAX) is None


def test_a_retry_to_a_named_new_leader_skips_the_backoff() -> None:
    accumulator = make(random_source=FixedRandom(), retry_backoff_ms=10_000)
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(
        batch.batch_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, True, 5, retry_now=True
    )
    assert [b.batch_id for b in drain_all(accumulator, 5)] == [batch.batch_id]


def test_backoff_grows_exponentially_to_its_max() -> None:
    accumulator = make(random_source=FixedRandom(), retry_backoff_ms=100, retry_backoff_max_ms=1000)
    append(accumulator)
    now_ms, backoffs = 0, []
    for _ in range(6):
        (batch,) = drain_all(accumulator, now_ms)
        accumulator.on_batch_failed(batch.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, now_ms)
        queued = accumulator._batcher.partitions[("t", 0)].queue[0]
        backoffs.append(queued.retry_at_ms - now_ms)
        now_ms = queued.retry_at_ms
    assert backoffs == [100, 200, 400, 800, 1000, 1000]


def test_backoff_jitter_stays_within_twenty_percent() -> None:
    accumulator = make(
        random_source=random.Random(1), retry_backoff_ms=1000, retry_backoff_max_ms=100_000
    )
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    seen = set()
    for attempt in range(30):
        accumulator.on_batch_failed(batch.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, 0)
        queued = accumulator._batcher.partitions[("t", 0)].queue[0]
        expected = min(1000 * 2**attempt, 100_000)
        assert 0.8 * expected <= queued.retry_at_ms <= min(1.2 * expected, 100_000)
        seen.add(queued.retry_at_ms)
        (batch,) = drain_all(accumulator, queued.retry_at_ms)
    assert len(seen) > 10


def test_backoff_above_max_is_static() -> None:
    accumulator = make(random_source=random.Random(1), retry_backoff_ms=5000)
    append(accumulator)
    for now_ms in (0, 1000, 2000):
        (batch,) = drain_all(accumulator, now_ms)
        accumulator.on_batch_failed(batch.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, now_ms)
        assert accumulator._batcher.partitions[("t", 0)].queue[0].retry_at_ms == now_ms + 1000


def test_non_retriable_failure_completes_the_batch_with_its_error() -> None:
    accumulator = make(idempotent=False)
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    (completed,) = accumulator.on_batch_failed(
        batch.batch_id, ErrorCode.MESSAGE_TOO_LARGE, False, 5
    )
    assert completed.error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert completed.base_offset == -1
    assert completed.error_message == "MESSAGE_TOO_LARGE for t-0 after 1 attempt(s): not retriable"
    assert accumulator.buffered_bytes == 0


def test_retries_are_bounded_by_the_retries_setting() -> None:
    accumulator = make(idempotent=False, retries=2, retry_backoff_ms=0)
    append(accumulator)
    outcomes = []
    for now_ms in range(3):
        (batch,) = drain_all(accumulator, now_ms)
        outcomes = accumulator.on_batch_failed(
            batch.batch_id, ErrorCode.NOT_ENOUGH_REPLICAS, True, now_ms
        )
    (completed,) = outcomes
    assert completed.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert "after 3 attempt(s): retries exhausted" in completed.error_message


def test_a_retriable_failure_after_the_delivery_timeout_is_final() -> None:
    accumulator = make(idempotent=False, delivery_timeout_ms=31_000, request_timeout_ms=30_000)
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    (completed,) = accumulator.on_batch_failed(
        batch.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, 31_000
    )
    assert "delivery.timeout.ms passed" in completed.error_message


def test_queued_batches_expire_after_the_delivery_timeout() -> None:
    accumulator = make(delivery_timeout_ms=40_000, request_timeout_ms=30_000)
    append(accumulator, partition=0, now_ms=0)
    append(accumulator, partition=0, now_ms=10)
    append(accumulator, partition=1, now_ms=5_000)
    assert accumulator.expire(39_999) == []
    (expired,) = accumulator.expire(40_000)
    assert (expired.partition, expired.record_count) == (0, 2)
    assert expired.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert expired.error_message == (
        "Expiring 2 record(s) for t-0: 40000 ms has passed since batch creation"
    )
    assert [c.partition for c in accumulator.expire(45_000)] == [1]
    assert accumulator.buffered_bytes == 0 and not accumulator.has_unfinished()
    # A new record after expiry opens a new batch.
    assert append(accumulator, now_ms=45_001).new_batch


def test_in_flight_batches_do_not_expire_here() -> None:
    """The driver's request deadline reports them; expire() only fails what is queued."""
    accumulator = make(delivery_timeout_ms=40_000, request_timeout_ms=30_000)
    append(accumulator)
    drain_all(accumulator, 0)
    assert accumulator.expire(100_000) == []


def test_a_final_failure_with_a_sequence_requires_a_new_producer_epoch() -> None:
    """Batch 0 fails for good after it went out with sequence 0: later batches have a gap. The
    core stops sending, lets in-flight batches finish, asks for a new epoch, then re-sequences."""
    accumulator = make(batch_size=0, random_source=FixedRandom())
    for _ in range(3):
        append(accumulator)
    first, second, third = drain_all(accumulator, 0)
    (failed,) = accumulator.on_batch_failed(first.batch_id, ErrorCode.INVALID_RECORD, False, 1)
    assert failed.error_code is ErrorCode.INVALID_RECORD
    append(accumulator, now_ms=1)  # sendable, but nothing is sent while a reset is pending
    waiting = accumulator.ready(1, LEADERS)
    assert waiting.ready_nodes == frozenset() and not waiting.producer_id_required
    for batch in (second, third):  # rejected by the broker: their predecessor never arrived
        assert (
            accumulator.on_batch_failed(
                batch.batch_id, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, 2
            )
            == []
        )
    assert accumulator.ready(2, LEADERS).producer_id_required
    accumulator.set_producer_id(PRODUCER_ID, PRODUCER_EPOCH + 1)
    resent = drain_all(accumulator, 500)
    assert [(b.batch_id, b.base_sequence) for b in resent] == [(second.batch_id, 0)]
    assert codec.decode_batch(resent[0].encoded).header.producer_epoch == PRODUCER_EPOCH + 1
    accumulator.on_batch_acked(second.batch_id, 0)
    resent = drain_all(accumulator, 500)  # the retried third, alone
    assert [(b.batch_id, b.base_sequence) for b in resent] == [(third.batch_id, 1)]
    assert drain_all(accumulator, 500) == []  # nothing overtakes a retry in flight
    accumulator.on_batch_acked(third.batch_id, 2)
    resent = drain_all(accumulator, 500)  # then the new batch behind it
    assert [(b.batch_id, b.base_sequence) for b in resent] == [(3, 2)]


def test_out_of_order_at_the_head_means_the_broker_lost_our_state() -> None:
    accumulator = make(random_source=FixedRandom())
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    assert (
        accumulator.on_batch_failed(batch.batch_id, ErrorCode.UNKNOWN_PRODUCER_ID, False, 0) == []
    )
    assert accumulator.ready(0, LEADERS).producer_id_required
    accumulator.set_producer_id(PRODUCER_ID, PRODUCER_EPOCH + 1)
    (again,) = drain_all(accumulator, 100)
    assert (again.batch_id, again.base_sequence, again.attempts) == (batch.batch_id, 0, 2)


def test_only_the_partition_that_lost_its_state_moves_to_the_new_epoch() -> None:
    """Partition 1's answer was lost (its leader was killed): its batch may be in the log. When
    partition 0 needs a new epoch, partition 1 keeps its epoch and sequence, so its retry is
    one the broker can recognise; moved to the new epoch it would be stored a second time."""
    accumulator = make(random_source=FixedRandom())
    append(accumulator, partition=0)
    append(accumulator, partition=1)
    lost_state, in_doubt = drain_all(accumulator, 0)
    assert (lost_state.partition, in_doubt.partition) == (0, 1)
    accumulator.on_batch_failed(in_doubt.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 1)
    accumulator.on_batch_failed(lost_state.batch_id, ErrorCode.UNKNOWN_PRODUCER_ID, False, 1)
    assert accumulator.ready(1, LEADERS).producer_id_required
    accumulator.set_producer_id(PRODUCER_ID, PRODUCER_EPOCH + 1)
    resent = {batch.partition: batch for batch in drain_all(accumulator, 500)}

    def identity(batch: ProducerBatch) -> tuple[int, int]:
        return codec.decode_batch(batch.encoded).header.producer_epoch, batch.base_sequence

    assert identity(resent[0]) == (PRODUCER_EPOCH + 1, 0)
    assert identity(resent[1]) == (PRODUCER_EPOCH, 0)  # as first sent
    accumulator.on_batch_acked(resent[1].batch_id, 0)
    append(accumulator, partition=1, now_ms=500)
    (after,) = drain_all(accumulator, 500)
    assert identity(after) == (PRODUCER_EPOCH, 1)  # partition 1 runs on in its epoch


def test_expiring_a_sent_batch_requires_a_new_epoch() -> None:
    accumulator = make(random_source=FixedRandom(), delivery_timeout_ms=30_000)
    append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(batch.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 0)
    assert not accumulator.ready(0, LEADERS).producer_id_required
    (expired,) = accumulator.expire(30_005)
    assert expired.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert accumulator.ready(30_005, LEADERS).producer_id_required


def test_abort_all_completes_everything() -> None:
    accumulator = make(batch_size=0)
    for partition in (0, 0, 1):
        append(accumulator, partition=partition)
    drain_all(accumulator, 0)
    append(accumulator)
    completed = accumulator.abort_all(ErrorCode.UNKNOWN_SERVER_ERROR, "producer closed")
    assert sorted(c.batch_id for c in completed) == [0, 1, 2, 3]
    assert {c.error_message for c in completed} == {"producer closed"}
    assert not accumulator.has_unfinished() and accumulator.in_flight_count == 0
    assert accumulator.buffered_bytes == 0
    assert append(accumulator).new_batch


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
    (oldest, *_) = accumulator.drain(1, 1 << 20, 0)
    accumulator.on_batch_acked(oldest.batch_id, 0)
    assert isinstance(accumulator.append("t", 0, None, VALUE, None, None, 0), AppendResult)
    assert accumulator.ready(0, LEADERS).ready_nodes == frozenset()  # lingering again


# --- flush ----------------------------------------------------------------------------------------


def test_flush_makes_everything_ready_and_tracks_completion() -> None:
    accumulator = make(linger_ms=60_000, batch_size=batch_size_for(2))
    for partition in (0, 2, 2, 2):
        append(accumulator, partition=partition)
    assert accumulator.ready(0, LEADERS).ready_nodes == {2}  # t-2 has a full batch
    target = accumulator.begin_flush()
    assert accumulator.ready(0, LEADERS).ready_nodes == {1, 2}
    drained = drain_all(accumulator, 0)
    append(accumulator, partition=0)  # after begin_flush: not part of this flush
    assert len(drained) == 3
    for batch in drained:
        assert not accumulator.is_flush_complete(target)
        accumulator.on_batch_acked(batch.batch_id, 0)
    assert accumulator.is_flush_complete(target)
    assert accumulator.has_unfinished()
    accumulator.flush_done()
    assert accumulator.ready(1, LEADERS).ready_nodes == frozenset()  # linger applies again


def test_flush_with_nothing_buffered_is_complete_at_once() -> None:
    accumulator = make()
    target = accumulator.begin_flush()
    assert accumulator.is_flush_complete(target)
    accumulator.flush_done()
    with pytest.raises(AssertionError):
        accumulator.flush_done()


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
