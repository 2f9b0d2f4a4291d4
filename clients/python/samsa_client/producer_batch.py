"""A producer batch, its states and the one table of its moves — a pure core.

Theory of operation. A batch holds records of one partition as Python lists of values, keys,
timestamps and headers: appending is a few list appends and no encoding (the SDK's per-record
cost is what the produce benchmark measures). It is encoded once, by
`samsa.common.record.codec.build_batch`, when first drained; a retry re-sends the same bytes (same
producer id, epoch and sequence). Its estimated size is the exact uncompressed encoded size: the
61-byte header plus 24 bytes of per-record arrays plus key, value and header bytes.

Split (Kafka's splitAndReenqueue, without new batches). When the broker finds a batch too large
(MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE), the batch is sent on in *pieces*: `split_records`
caps how many of its records one attempt carries (halved at each such answer), and the batch
keeps its id, so its place in its partition's queue, and its sequence. A piece acked (or failed
for good) while records remain settles its records (`settle_piece`), drops them and moves the
batch's base sequence past them; the rest goes next, in order. `first_index` is the index, in
the batch's outcome (the records' futures), of the first record still held.

A batch's life, one table (STYLE habit 4); `transition` asserts every move:

    OPEN       taking records; the last batch of its partition's queue   -> IN_FLIGHT, DONE, QUEUED
    QUEUED     closed, waiting in its partition's queue (maybe backing off) -> IN_FLIGHT, DONE
    IN_FLIGHT  drained, awaiting the driver's outcome                    -> QUEUED, DONE
    DONE       completed (acked, failed, expired or aborted); forgotten

`PartitionState` holds one partition's unfinished batches (its queue, oldest first, and what is
in flight) and its sequence bookkeeping (producer_sequences.py).
"""

from __future__ import annotations

import enum
from collections import deque
from typing import NamedTuple

from samsa.common.errors import ErrorCode
from samsa.common.record import codec, header

# Estimated (= exact, uncompressed) encoded size: the batch header once, then per record its
# fixed-width array entries plus key and value bytes, per header its two lengths plus its bytes.
BATCH_OVERHEAD_BYTES = header.HEADER_BYTES
RECORD_OVERHEAD_BYTES = codec.ARRAY_BYTES_PER_RECORD
HEADER_OVERHEAD_BYTES = codec.ARRAY_BYTES_PER_HEADER

NO_OFFSET = -1
NO_TIMESTAMP = -1

TopicPartition = tuple[str, int]


class BatchState(enum.Enum):
    OPEN = "open"
    QUEUED = "queued"
    IN_FLIGHT = "in flight"
    DONE = "done"


_TRANSITIONS: dict[BatchState, frozenset[BatchState]] = {
    BatchState.OPEN: frozenset({BatchState.IN_FLIGHT, BatchState.DONE, BatchState.QUEUED}),
    BatchState.QUEUED: frozenset({BatchState.IN_FLIGHT, BatchState.DONE}),
    BatchState.IN_FLIGHT: frozenset({BatchState.QUEUED, BatchState.DONE}),
    BatchState.DONE: frozenset(),
}


class Completed(NamedTuple):
    """The outcome of every record of one batch."""

    batch_id: int
    topic: str
    partition: int
    record_count: int
    base_offset: int  # NO_OFFSET on error (and with acks=0)
    log_append_time_ms: int  # NO_TIMESTAMP unless the topic uses LogAppendTime
    error_code: ErrorCode  # ErrorCode.NONE on success
    error_message: str
    # A split batch settles in pieces: the index of this one's first record in the batch's
    # outcome, and whether it is the batch's last.
    first_index: int = 0
    batch_done: bool = True


class ProducerBatch:
    """One batch of one partition. The driver reads `encoded` (after drain) and the identity
    fields; everything else belongs to the accumulator."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "batch_id",
        "created_ms",
        "encoded",
        "first_index",
        "headers",
        "keys",
        "maybe_written",
        "node_id",
        "partition",
        "retry_at_ms",
        "size_bytes",
        "split_records",
        "state",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(self, batch_id: int, topic: str, partition: int, created_ms: int) -> None:
        self.batch_id = batch_id
        self.topic = topic
        self.partition = partition
        self.created_ms = created_ms
        self.state = BatchState.OPEN
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] = []
        self.timestamps: list[int] = []
        # None until a record with headers arrives; then one tuple of pairs per record.
        self.headers: list[tuple[tuple[str, bytes | None], ...]] | None = None
        self.size_bytes = BATCH_OVERHEAD_BYTES
        self.attempts = 0  # times drained (since its last split: a split is no retry)
        # An attempt failed with an answer that does not prove it unwritten (all but a
        # too-large refusal): kept across splits, since it may have written the batch whole.
        self.maybe_written = False
        self.retry_at_ms = 0  # not sendable before this (retry backoff)
        self.base_sequence = header.NO_SEQUENCE
        self.encoded: bytes | None = None
        self.node_id = -1  # the node of the last attempt
        # 0, or the most records one attempt carries: the broker found the batch too large.
        self.split_records = 0
        self.first_index = 0  # the outcome's index of values[0] (earlier pieces are settled)

    @property
    def record_count(self) -> int:
        """The records not yet settled."""
        return len(self.values)

    @property
    def piece_count(self) -> int:
        """The records the next (or current) attempt carries: the first ones held."""
        count = len(self.values)
        return min(self.split_records, count) if self.split_records else count

    def __repr__(self) -> str:
        return (
            f"ProducerBatch(batch_id={self.batch_id}, {self.topic}-{self.partition}, "
            f"records={len(self.values)}, state={self.state.value}, attempts={self.attempts}, "
            f"base_sequence={self.base_sequence})"
        )

    def encode(
        self, compression: int, producer_id: int, producer_epoch: int, transactional: bool
    ) -> bytes:
        """The batch's bytes (a split batch's: its next piece's) for its current sequence; a
        retry re-sends them unchanged."""
        values, keys, timestamps, headers = self.values, self.keys, self.timestamps, self.headers
        if self.split_records:
            count = self.piece_count
            values, keys, timestamps = values[:count], keys[:count], timestamps[:count]
            headers = None if headers is None else headers[:count]
        # All-null keys are the common keyless case: one C-level count instead of a column.
        if keys.count(None) == len(keys):
            keys = None
        encoded = codec.build_batch(
            values,
            keys=keys,
            timestamps=timestamps,
            headers=headers,
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=self.base_sequence,
            transactional=transactional,
        )
        assert compression or self.split_records or len(encoded) == self.size_bytes, (
            "size estimate drifted"
        )
        return encoded

    def settle_piece(
        self, base_offset: int, log_append_time_ms: int, error_code: ErrorCode, message: str
    ) -> Completed:
        """The attempt carried a piece and records remain: settle the piece's records and drop
        them (their memory stays counted until the batch is done). The caller moves the base
        sequence and puts the batch back in its queue."""
        count = self.piece_count
        assert 0 < count < len(self.values), f"{self!r}: not a piece"
        done = Completed(
            self.batch_id,
            self.topic,
            self.partition,
            count,
            base_offset,
            log_append_time_ms,
            error_code,
            message,
            self.first_index,
            batch_done=False,
        )
        del self.values[:count], self.keys[:count], self.timestamps[:count]
        if self.headers is not None:
            del self.headers[:count]
        self.first_index += count
        self.encoded = None
        return done

    def complete(
        self, base_offset: int, log_append_time_ms: int, error_code: ErrorCode, message: str
    ) -> Completed:
        """DONE: free the records (the driver keeps its futures, not our columns)."""
        transition(self, BatchState.DONE)
        record_count = len(self.values)
        self.values, self.keys, self.timestamps, self.headers = [], [], [], None
        self.encoded = None
        return Completed(
            self.batch_id,
            self.topic,
            self.partition,
            record_count,
            base_offset,
            log_append_time_ms,
            error_code,
            message,
            self.first_index,
        )


class PartitionState:
    """The batches of one partition that are not done, its sequence counter, and the producer
    (id, epoch) its sequences belong to: a partition moves to a new epoch only when it needs
    to (producer_sequences.py), as in Kafka, where each partition keeps its own."""

    __slots__ = (
        "in_flight",
        "last_acked_batch_id",
        "next_sequence",
        "open_batch",
        "producer_epoch",
        "producer_id",
        "queue",
        "reset_required",
        "unresolved_batch_id",
    )

    def __init__(self) -> None:
        # Not in flight, ascending batch id; the open batch, if any, is last.
        self.queue: deque[ProducerBatch] = deque()
        # In flight, ascending batch id (a retry is only sent when this is empty).
        self.in_flight: list[ProducerBatch] = []
        self.open_batch: ProducerBatch | None = None
        self.next_sequence = 0
        # The newest batch acked under the current producer epoch: the broker only accepts
        # sequences in order, so every older batch sent in this epoch was written.
        self.last_acked_batch_id = -1
        self.producer_id = header.NO_PRODUCER_ID  # set at the first sequenced drain
        self.producer_epoch = header.NO_PRODUCER_EPOCH
        # The broker lost our sequence here, or a sequenced batch failed for good: this
        # partition's next batches need a new epoch, starting again at sequence 0.
        self.reset_required = False
        # The newest batch that failed for good after it went out with a sequence, until a
        # later batch is acked (no gap) or a reset; -1 when none (producer_sequences.py).
        self.unresolved_batch_id = -1

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a failed batch back at its place: the queue stays sorted by batch id."""
        transition(batch, BatchState.QUEUED)
        position = 0
        for queued in self.queue:
            if queued.batch_id > batch.batch_id:
                break
            position += 1
        self.queue.insert(position, batch)


def transition(batch: ProducerBatch, target: BatchState) -> None:
    assert target in _TRANSITIONS[batch.state], f"{batch!r}: illegal move to {target.value}"
    batch.state = target
