"""What an attempt's answer (or its absence) does to a batch — a pure core under the accumulator.

An ack completes the batch with its offsets (and, with idempotence, completes the queued retries
ahead of it that the ack proves written: producer_sequences.py). A failure either puts the batch
back at its place in its partition's queue after a backoff, or completes it with the error
(retry_policy.py decides which). A queued batch past its delivery deadline completes with
REQUEST_TIMED_OUT (`expire`), and a close or an aborted transaction completes batches at once
(`abort_all`, `abort_queued`). Each completion frees the batch's memory and returns a
`Completed`, which the driver settles (the futures are not in here).

Too large (Kafka's batch split). MESSAGE_TOO_LARGE or RECORD_LIST_TOO_LARGE for a batch sent
alone in its partition's part of the request, holding more than one record, halves what one
attempt of it carries and puts it back at its place at once, without counting a retry: it goes
on in pieces (producer_batch.py), each acked piece settling its records, in order, with the
sequences the batch had (gap-free: the broker wrote none of it). The cap doubles after each
piece acked, so that one oversize record costs a few round trips, not one per record after it.
A single record too large fails with the sizes. Answered for a partition whose part carried
several batches, the answer cannot say which one: each goes again, alone.

The accumulator (accumulator.py) owns the batches' tables and shares them with this module: the
batcher's queues and memory, the sequences, and the batches in flight by id.
"""

from __future__ import annotations

from samsa.client.producer_batch import (
    NO_OFFSET,
    NO_TIMESTAMP,
    BatchState,
    Completed,
    PartitionState,
    ProducerBatch,
)
from samsa.client.producer_sequences import SEQUENCE_MODULUS, ProducerSequences
from samsa.client.record_batcher import RecordBatcher
from samsa.client.retry_policy import RetryPolicy
from samsa.common.errors import ErrorCode
from samsa.common.record import header

# The broker refused the append as too large: smaller pieces may pass (Kafka splits the batch).
TOO_LARGE_ERRORS = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})
# No answer from the broker (a stream that failed, also with a status not retried): the attempt
# may have been written, on a first attempt too, so it is never taken as a refusal.
UNKNOWN_OUTCOME_ERRORS = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})


class BatchCompletion:
    """Outcomes back into the accumulator's tables (see the module docstring)."""

    def __init__(
        self,
        batcher: RecordBatcher,
        sequences: ProducerSequences,
        retry: RetryPolicy,
        in_flight: dict[int, ProducerBatch],
        max_request_size: int,
    ) -> None:
        self._max_request_size = max_request_size
        self.batch_splits = 0  # too-large answers that split a batch (Kafka's batch-split)
        self._batcher = batcher
        self._sequences = sequences
        self._retry = retry
        self._in_flight = in_flight

    def on_batch_acked(
        self, batch_id: int, base_offset: int, log_append_time_ms: int = NO_TIMESTAMP
    ) -> list[Completed]:
        """The broker appended the batch at `base_offset` (NO_OFFSET with acks=0). Also completes
        the older batches of the partition this ack proves written (producer_sequences.py)."""
        batch, state = self._take_in_flight(batch_id)
        if batch.piece_count < batch.record_count:  # a piece; the rest goes next
            completed = self._piece_written(state, batch, base_offset, log_append_time_ms)
        else:
            completed = [self._complete(batch, base_offset, log_append_time_ms, ErrorCode.NONE, "")]
        if self._sequences.on_acked(state, batch):
            completed += self._complete_known_written(state)
        return completed

    def on_batch_failed(
        self,
        batch_id: int,
        error_code: ErrorCode | int,
        retriable: bool,
        now_ms: int,
        *,
        retry_now: bool = False,
        alone: bool = True,
    ) -> list[Completed]:
        """The attempt failed. A retriable failure within `retries` and delivery.timeout.ms puts
        the batch back at its place in its partition's queue, after an exponential backoff —
        none with `retry_now` (the answer named the new leader, KIP-951); otherwise the batch
        completes with `error_code`. A too-large answer splits the batch (module docstring);
        `alone` False: the attempt carried other batches of its partition too."""
        batch, state = self._take_in_flight(batch_id)
        error_code = ErrorCode(error_code)
        # Refused unwritten, as far as every attempt's answer shows (producer_sequences.py).
        refused = not (retriable or batch.maybe_written or error_code in UNKNOWN_OUTCOME_ERRORS)
        batch.maybe_written |= error_code not in TOO_LARGE_ERRORS
        if self._sequences.written_before(state, batch, error_code):
            # Written by an earlier attempt, and this answer does not say where: a success
            # without an offset (Kafka's rule for DUPLICATE_SEQUENCE_NUMBER), never re-sent.
            # A duplicate piece proves that piece written, not the rest of its batch. As an
            # ack, it resolves the partition's sequence and proves older batches written.
            if batch.piece_count < batch.record_count and not self._sequences.known_written(
                state, batch
            ):
                completed = self._piece_written(state, batch, NO_OFFSET, NO_TIMESTAMP)
            else:
                completed = [self._complete(batch, NO_OFFSET, NO_TIMESTAMP, ErrorCode.NONE, "")]
            if self._sequences.on_acked(state, batch):
                completed += self._complete_known_written(state)
            return completed
        if error_code in TOO_LARGE_ERRORS and (not alone or batch.piece_count > 1):
            # Alone: half as many records per attempt. Not alone: the same, alone.
            batch.split_records = batch.piece_count // 2 if alone else batch.piece_count
            self.batch_splits += alone
            self._requeue_piece(state, batch)
            return []
        if self._sequences.on_sequence_error(state, batch, error_code):
            retriable = True
        retry_at_ms = self._retry.retry_at_ms(batch, retriable, now_ms, retry_now)
        if retry_at_ms is not None:
            batch.retry_at_ms = retry_at_ms
            self._batcher.requeue(state, batch)
            return []
        if error_code in TOO_LARGE_ERRORS:
            message = self._too_large_message(batch, error_code)
        else:
            message = (
                f"{error_code.name} for {batch.topic}-{batch.partition} after {batch.attempts} "
                f"attempt(s): {self._retry.final_reason(batch, retriable, now_ms)}"
            )
        if batch.piece_count < batch.record_count:  # the piece fails; the rest goes on
            # Maybe written: the rest keeps the sequences after the piece's, so a broker that
            # wrote it takes the rest in order, and one that did not finds the gap.
            self._sequences.on_final_failure(state, batch, refused)
            count = batch.piece_count
            piece = batch.settle_piece(NO_OFFSET, NO_TIMESTAMP, error_code, message)
            if batch.base_sequence != header.NO_SEQUENCE:
                batch.base_sequence = (batch.base_sequence + count) % SEQUENCE_MODULUS
            self._requeue_piece(state, batch)
            return [piece]
        return [self._complete(batch, NO_OFFSET, NO_TIMESTAMP, error_code, message, refused)]

    def _too_large_message(self, batch: ProducerBatch, error_code: ErrorCode) -> str:
        """A batch of one record the broker refused: the sizes, and what to change."""
        size = len(batch.encoded) if batch.encoded is not None else batch.size_bytes
        return (
            f"{error_code.name} for {batch.topic}-{batch.partition}: the record is {size} bytes "
            f"in a batch of its own, within max.request.size ({self._max_request_size}) but "
            "over the broker's limit for the topic (max.message.bytes): raise the topic's "
            "max.message.bytes or send a smaller record"
        )

    def _piece_written(
        self, state: PartitionState, batch: ProducerBatch, base_offset: int, log_append_time_ms: int
    ) -> list[Completed]:
        """The piece in flight was written: settle it; the rest goes next, its sequence right
        after the piece's, and twice as many records may try their luck."""
        count = batch.piece_count
        piece = batch.settle_piece(base_offset, log_append_time_ms, ErrorCode.NONE, "")
        if batch.base_sequence != header.NO_SEQUENCE:
            batch.base_sequence = (batch.base_sequence + count) % SEQUENCE_MODULUS
        batch.split_records *= 2
        self._requeue_piece(state, batch)
        return [piece]

    def _requeue_piece(self, state: PartitionState, batch: ProducerBatch) -> None:
        """Back at its place, sendable at once, its next piece to be encoded. Attempts start
        again (a split is not a retry, as in Kafka); `split_records` makes it go alone."""
        assert batch.split_records > 0
        batch.attempts = 0
        batch.retry_at_ms = 0
        batch.encoded = None
        self._batcher.requeue(state, batch)

    def expire(self, now_ms: int) -> list[Completed]:
        """Fail every queued batch created delivery.timeout.ms or more ago (Kafka's
        TimeoutException "Expiring N record(s) ..."): REQUEST_TIMED_OUT."""
        completed: list[Completed] = []
        for topic_partition, state in list(self._batcher.queued.items()):
            while state.queue and self._retry.expired(state.queue[0], now_ms):
                batch = self._batcher.take_head(topic_partition, state)
                message = (
                    f"Expiring {len(batch.values)} record(s) for {batch.topic}-{batch.partition}: "
                    f"{now_ms - batch.created_ms} ms has passed since batch creation"
                )
                completed.append(
                    self._complete(
                        batch, NO_OFFSET, NO_TIMESTAMP, ErrorCode.REQUEST_TIMED_OUT, message
                    )
                )
        return completed

    def abort_all(self, error_code: ErrorCode, message: str) -> list[Completed]:
        """Complete every unfinished batch, in flight or not, with `error_code` (a forced close,
        or a fatal producer error). Outcomes of requests already sent must not be fed back."""
        return self._abort(error_code, message, in_flight_too=True)

    def abort_queued(self, error_code: ErrorCode, message: str) -> list[Completed]:
        """Fail every batch not yet sent (abort_transaction); in-flight ones finish as they do."""
        return self._abort(error_code, message, in_flight_too=False)

    def _abort(
        self, error_code: ErrorCode, message: str, *, in_flight_too: bool
    ) -> list[Completed]:
        completed = []
        for batch in list(self._batcher.unfinished.values()):
            state = self._batcher.partitions[(batch.topic, batch.partition)]
            if batch.state is not BatchState.IN_FLIGHT:
                state.queue.remove(batch)
            elif in_flight_too:
                self._take_in_flight(batch.batch_id)
            else:
                continue
            if batch is state.open_batch:
                state.open_batch = None
            completed.append(self._complete(batch, NO_OFFSET, NO_TIMESTAMP, error_code, message))
        self._batcher.queued.clear()
        return completed

    def _take_in_flight(self, batch_id: int) -> tuple[ProducerBatch, PartitionState]:
        batch = self._in_flight.pop(batch_id, None)
        assert batch is not None, f"batch {batch_id} is not in flight: an outcome fed twice?"
        state = self._batcher.partitions[(batch.topic, batch.partition)]
        state.in_flight.remove(batch)
        return batch, state

    def _complete_known_written(self, state: PartitionState) -> list[Completed]:
        """A newer batch was just acked: the queued retries ahead of it were written (lost
        responses). They complete now, as successes without offset, and are never sent again."""
        completed = []
        while state.queue and state.queue[0].batch_id < state.last_acked_batch_id:
            batch = state.queue[0]
            assert batch.base_sequence != header.NO_SEQUENCE, "an older batch was never sent"
            self._batcher.take_head((batch.topic, batch.partition), state)
            completed.append(self._complete(batch, NO_OFFSET, NO_TIMESTAMP, ErrorCode.NONE, ""))
        return completed

    def _complete(
        self,
        batch: ProducerBatch,
        base_offset: int,
        log_append_time_ms: int,
        error_code: ErrorCode,
        message: str,
        refused: bool = False,
    ) -> Completed:
        if error_code is not ErrorCode.NONE:
            state = self._batcher.partitions[(batch.topic, batch.partition)]
            self._sequences.on_final_failure(state, batch, refused)
        self._batcher.release(batch)
        return batch.complete(base_offset, log_append_time_ms, error_code, message)
