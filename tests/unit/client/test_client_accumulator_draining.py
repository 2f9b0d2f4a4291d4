"""Goal: the accumulator hands batches to the sender the way Kafka's does — when linger.ms
passed or a batch is full or closed, per leader, within max.request.size and rotating its starting
partition — assigns idempotent sequences per partition at drain within the in-flight limits,
expires queued batches after delivery.timeout.ms, and makes everything ready on flush. Siblings:
test_client_accumulator_batching.py (what goes into a batch) and
test_client_accumulator_outcomes.py (acks, failures, retries, epoch resets).

Method: scenario tests on a RecordAccumulator built from a ProducerConfig (accumulator_helpers.py);
time is a plain number passed to ready(), drain() and expire() (no clock, no sleep), and the
leaders are a fixed map of partitions to two nodes. Sequences are read back from the encoded
batches, so the tests also check what would go on the wire.
"""

from __future__ import annotations

import random

import pytest
from accumulator_helpers import (
    LEADERS,
    append,
    batch_size_for,
    drain_all,
    drain_encoded,
    make,
    values_of,
)

from samsa.client.accumulator import RecordAccumulator
from samsa.client.config import ProducerConfig
from samsa.client.producer_batch import RECORD_OVERHEAD_BYTES
from samsa.common.errors import ErrorCode
from samsa.common.record import codec

# --- linger and readiness -------------------------------------------------------------------------


def test_a_batch_lingers_then_becomes_ready() -> None:
    accumulator = make(linger_ms=10)
    append(accumulator, now_ms=100)
    waiting = accumulator.ready(105, LEADERS)
    assert waiting.ready_nodes == frozenset()
    assert waiting.next_check_ms == 110
    assert drain_encoded(accumulator, 1, 1 << 20, 105) == []
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
    drained = drain_encoded(accumulator, 1, 1 << 20, 0)
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
    to_node_1 = drain_encoded(accumulator, 1, 1 << 20, 0)
    to_node_2 = drain_encoded(accumulator, 2, 1 << 20, 0)
    assert sorted((b.topic, b.partition) for b in to_node_1) == [("t", 0), ("t", 1)]
    assert sorted((b.topic, b.partition) for b in to_node_2) == [("t", 2), ("u", 0)]
    assert drain_encoded(accumulator, 1, 1 << 20, 0) == []


def test_a_ready_node_also_takes_its_lingering_partitions() -> None:
    """Kafka's drain takes every partition of the node: the request is going anyway."""
    accumulator = make(linger_ms=1000, batch_size=batch_size_for(1))
    append(accumulator, partition=0)  # full: ready
    append(accumulator, partition=1, value=b"")  # lingering
    assert accumulator.ready(0, LEADERS).ready_nodes == {1}
    assert sorted(b.partition for b in drain_encoded(accumulator, 1, 1 << 20, 0)) == [0, 1]


# --- request size and fairness --------------------------------------------------------------------


def test_drain_respects_max_request_bytes() -> None:
    accumulator = make(batch_size=batch_size_for(2))
    for _ in range(6):
        append(accumulator)  # 3 full batches on t-0
    accumulator.ready(0, LEADERS)
    first = drain_encoded(accumulator, 1, 2 * batch_size_for(2), 0)
    assert len(first) == 2
    assert sum(batch.size_bytes for batch in first) <= 2 * batch_size_for(2)
    assert len(drain_encoded(accumulator, 1, 2 * batch_size_for(2), 0)) == 1


def test_the_first_batch_always_goes_even_if_larger_than_the_request_limit() -> None:
    accumulator = make()
    append(accumulator, value=b"x" * 1000)
    accumulator.ready(0, LEADERS)
    assert len(drain_encoded(accumulator, 1, 100, 0)) == 1


def test_drain_rotates_its_starting_partition() -> None:
    accumulator = make(idempotent=False, max_in_flight_requests_per_connection=50, batch_size=0)
    leaders = {("t", p): 1 for p in range(4)}
    for partition in range(4):
        for _ in range(3):
            append(accumulator, partition=partition)
    firsts = []
    for _ in range(4):
        accumulator.ready(0, leaders)
        (batch,) = drain_encoded(accumulator, 1, 1, 0)  # one batch per request
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
    (batch,) = drain_encoded(accumulator, 1, 1 << 20, 0)
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


# --- expiry of queued batches ---------------------------------------------------------------------


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
