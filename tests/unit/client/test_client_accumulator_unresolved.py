"""Goal: a batch that fails for good after it went out with a sequence leaves its partition's
sequence *unresolved* (Kafka's markSequenceUnresolved / maybeResolveSequences), not reset at
once: the batches after it whose own outcome is unknown go again with the epoch and sequence
they were sent with, so a broker that wrote them answers with a duplicate, not a second copy.
The partition moves to a new epoch only when the broker says the sequence has a gap
(OUT_OF_ORDER_SEQUENCE_NUMBER for the oldest batch left) or when nothing sequenced is left and
no later batch was acked.

Method: scenario tests on a RecordAccumulator (accumulator_helpers.py); the test plays the broker
and the driver, with times as plain numbers and exact backoffs (FixedRandom).
"""

from __future__ import annotations

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

from samsa.client.accumulator import RecordAccumulator
from samsa.client.producer_batch import ProducerBatch
from samsa.common.errors import ErrorCode
from samsa.common.record import codec

DELIVERY_TIMEOUT_MS = 1_000
BACKOFF_MS = 100


def _identity(batch: ProducerBatch) -> tuple[int, int]:
    assert batch.encoded is not None
    return codec.decode_batch(batch.encoded).header.producer_epoch, batch.base_sequence


def _first_times_out_with_the_second() -> tuple[RecordAccumulator, ProducerBatch]:
    """Two batches of t-0 in one request; it goes unanswered until the first's delivery
    deadline (produce_sender.py), so the first fails for good and the second is retried. The
    broker may have written both."""
    accumulator = make(
        random_source=FixedRandom(),
        batch_size=batch_size_for(1),
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        request_timeout_ms=500,
        retry_backoff_ms=BACKOFF_MS,
        retry_backoff_max_ms=BACKOFF_MS,
    )
    append(accumulator, now_ms=0)
    append(accumulator, now_ms=400)
    first, second = drain_all(accumulator, 400)
    (failed,) = accumulator.on_batch_failed(
        first.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, DELIVERY_TIMEOUT_MS
    )
    assert failed.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert (
        accumulator.on_batch_failed(
            second.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, DELIVERY_TIMEOUT_MS
        )
        == []
    )
    return accumulator, second


def test_a_retry_behind_a_batch_that_timed_out_keeps_its_epoch_and_sequence() -> None:
    accumulator, second = _first_times_out_with_the_second()
    now_ms = DELIVERY_TIMEOUT_MS + BACKOFF_MS
    append(accumulator, now_ms=now_ms)  # new: waits until the sequence is resolved
    ready = accumulator.ready(now_ms, LEADERS)
    assert not ready.producer_id_required, "the second may be in the log: no new epoch yet"
    (retry,) = drain_all(accumulator, now_ms)
    assert retry is second and _identity(retry) == (PRODUCER_EPOCH, 1)  # as first sent
    # The broker had written both: the retry is a duplicate, answered with its offset.
    accumulator.on_batch_acked(second.batch_id, 1)
    (new,) = drain_all(accumulator, now_ms)  # resolved: the partition runs on in its epoch
    assert _identity(new) == (PRODUCER_EPOCH, 2)
    assert not accumulator.ready(now_ms, LEADERS).producer_id_required


def test_a_gap_found_behind_a_batch_that_timed_out_moves_to_a_new_epoch() -> None:
    accumulator, second = _first_times_out_with_the_second()
    now_ms = DELIVERY_TIMEOUT_MS + BACKOFF_MS
    (retry,) = drain_all(accumulator, now_ms)
    # The broker never got the first: the second, now the oldest batch left, is out of order.
    accumulator.on_batch_failed(
        retry.batch_id, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, now_ms
    )
    assert accumulator.ready(now_ms, LEADERS).producer_id_required
    accumulator.set_producer_id(PRODUCER_ID, PRODUCER_EPOCH + 1)
    (again,) = drain_all(accumulator, now_ms + BACKOFF_MS)
    assert again is second and _identity(again) == (PRODUCER_EPOCH + 1, 0)


def test_nothing_sequenced_left_and_nothing_acked_after_the_failure_moves_to_a_new_epoch() -> None:
    accumulator, second = _first_times_out_with_the_second()
    now_ms = DELIVERY_TIMEOUT_MS + BACKOFF_MS
    append(accumulator, now_ms=now_ms)
    (retry,) = drain_all(accumulator, now_ms)
    assert retry is second
    accumulator.on_batch_failed(retry.batch_id, ErrorCode.INVALID_RECORD, False, now_ms)
    assert accumulator.ready(now_ms, LEADERS).producer_id_required
    accumulator.set_producer_id(PRODUCER_ID, PRODUCER_EPOCH + 1)
    (new,) = drain_all(accumulator, now_ms)
    assert _identity(new) == (PRODUCER_EPOCH + 1, 0)


def test_a_piece_that_fails_for_good_leaves_its_sequences_behind() -> None:
    """A split batch's piece fails for good (maybe written): the rest goes on with the
    sequences after the piece's, so a broker that wrote the piece takes the rest in order."""
    accumulator = make(random_source=FixedRandom(), retries=1, retry_backoff_ms=0)
    for _ in range(4):
        append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(batch.batch_id, ErrorCode.MESSAGE_TOO_LARGE, False, 0)
    (piece,) = drain_all(accumulator, 0)  # records 0-1, sequence 0
    accumulator.on_batch_failed(piece.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 0)
    (piece,) = drain_all(accumulator, 0)  # its one retry
    (failed,) = accumulator.on_batch_failed(piece.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 0)
    assert (failed.record_count, failed.error_code) == (2, ErrorCode.NETWORK_EXCEPTION)
    assert not accumulator.ready(0, LEADERS).producer_id_required
    (rest,) = drain_all(accumulator, 0)
    assert _identity(rest) == (PRODUCER_EPOCH, 2)


def test_a_stream_that_failed_on_a_first_attempt_leaves_the_outcome_unknown() -> None:
    """NETWORK_EXCEPTION not retriable is a produce stream that ended with a status the client
    does not retry (UNKNOWN: the broker's handler raised, maybe after the append;
    produce_stream.py), not the broker's refusal: the batch may be in the log even on its first
    attempt. The batch after it, whose own answer was lost, keeps its epoch and sequence: in a
    new epoch it would be written a second time by a broker that has both."""
    accumulator = make(
        random_source=FixedRandom(),
        batch_size=batch_size_for(1),
        retry_backoff_ms=BACKOFF_MS,
        retry_backoff_max_ms=BACKOFF_MS,
    )
    append(accumulator, now_ms=0)
    append(accumulator, now_ms=0)
    accumulator.ready(0, LEADERS)
    (first,) = accumulator.drain(1, 1, 0)  # one batch per request
    (second,) = accumulator.drain(1, 1, 0)
    accumulator.encode([first, second])
    assert accumulator.on_batch_failed(second.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, 0) == []
    (failed,) = accumulator.on_batch_failed(first.batch_id, ErrorCode.NETWORK_EXCEPTION, False, 0)
    assert failed.error_code is ErrorCode.NETWORK_EXCEPTION
    assert not accumulator.ready(BACKOFF_MS, LEADERS).producer_id_required
    (retry,) = drain_all(accumulator, BACKOFF_MS)
    assert retry is second and _identity(retry) == (PRODUCER_EPOCH, 1)  # as first sent


def test_a_retry_answered_as_a_duplicate_resolves_the_sequence_as_an_ack_does() -> None:
    """DUPLICATE_SEQUENCE_NUMBER (written, offsets forgotten) proves the batch and so the one
    that failed before it written, as its ack would: the partition runs on in its epoch."""
    accumulator, second = _first_times_out_with_the_second()
    now_ms = DELIVERY_TIMEOUT_MS + BACKOFF_MS
    (retry,) = drain_all(accumulator, now_ms)
    assert retry is second
    (written,) = accumulator.on_batch_failed(
        retry.batch_id, ErrorCode.DUPLICATE_SEQUENCE_NUMBER, False, now_ms
    )
    assert written.error_code is ErrorCode.NONE
    append(accumulator, now_ms=now_ms)
    assert not accumulator.ready(now_ms, LEADERS).producer_id_required
    (new,) = drain_all(accumulator, now_ms)
    assert _identity(new) == (PRODUCER_EPOCH, 2)


def test_a_piece_refused_after_its_batch_went_out_whole_leaves_the_outcome_unknown() -> None:
    """A split starts a batch's attempts again, but not what its earlier sends may have
    written: the batch went out whole (no answer), was refused as too large when retried (the
    topic's max.message.bytes was lowered), and its first piece is refused on the piece's first
    attempt. The whole batch may be in the log, so the rest keeps its sequences: renumbered in a
    new epoch, a broker that has the batch would write those records again."""
    accumulator = make(random_source=FixedRandom(), retries=3, retry_backoff_ms=0)
    for _ in range(4):
        append(accumulator)
    (batch,) = drain_all(accumulator, 0)
    assert accumulator.on_batch_failed(batch.batch_id, ErrorCode.REQUEST_TIMED_OUT, True, 0) == []
    (retry,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(retry.batch_id, ErrorCode.MESSAGE_TOO_LARGE, False, 0)
    (piece,) = drain_all(accumulator, 0)  # records 0-1, sequence 0, the piece's first attempt
    (failed,) = accumulator.on_batch_failed(piece.batch_id, ErrorCode.INVALID_RECORD, False, 0)
    assert (failed.record_count, failed.error_code) == (2, ErrorCode.INVALID_RECORD)
    assert not accumulator.ready(0, LEADERS).producer_id_required
    (rest,) = drain_all(accumulator, 0)
    assert _identity(rest) == (PRODUCER_EPOCH, 2)
