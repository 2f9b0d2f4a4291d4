"""Goal: the accumulator turns every ack and failure into an outcome reported as data, and
keeps every partition in order through retries (with exponential, jittered backoff), sequence
numbers, the delivery timeout and producer-epoch resets, the way Kafka's does. Siblings:
test_client_accumulator_batching.py (what goes into a batch) and
test_client_accumulator_draining.py (readiness, drain, sequences, expiry, flush).

Method: scenario tests on a RecordAccumulator built from a ProducerConfig (accumulator_helpers.py);
the driver's part (acks, failures, new producer epochs) is played by the test, at times given as
plain numbers (no clock, no sleep). A FixedRandom makes backoffs exact; a seeded random.Random
checks the jitter's bounds.
"""

from __future__ import annotations

import random

import pytest
from accumulator_helpers import (
    LEADERS,
    PRODUCER_EPOCH,
    PRODUCER_ID,
    FixedRandom,
    append,
    batch_size_for,
    drain_all,
    make,
)

from samsa.client.producer_batch import Completed, ProducerBatch
from samsa.client.producer_sequences import PRODUCER_EPOCH_MAX, bumped_producer_epoch
from samsa.common.errors import ErrorCode
from samsa.common.record import codec, header

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
    (completed,) = accumulator.on_batch_failed(batch.batch_id, ErrorCode.INVALID_RECORD, False, 5)
    assert completed.error_code is ErrorCode.INVALID_RECORD
    assert completed.base_offset == -1
    assert completed.error_message == "INVALID_RECORD for t-0 after 1 attempt(s): not retriable"
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
