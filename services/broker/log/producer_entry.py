"""One producer's entry in a partition's producer state (producer_state.py), and how one written
batch or transaction marker changes it. Pure.

An entry holds what the partition remembers of one idempotent producer (Kafka's ProducerStateEntry):
its epoch, the metadata of its last BATCHES_KEPT batches (the dedupe window), the largest batch
timestamp seen (`last_timestamp`, for expiry), the first offset of its open transaction here,
`last_append_ms`, and the type of the marker written at its current epoch (`last_marker_type`: a
marker at that epoch again is a retry only when of the same type). `next_entry` and `after_marker`
are the one way an entry changes, for the table's apply and for its checks alike; the invariants are
producer_state.py's.

`last_append_ms` is the broker's own clock when it last appended a batch or marker of the
producer here, the leader's at its append and each follower's at its own. `last_timestamp` is the
producer's clock under CreateTime (Kafka's lastTimestamp, which DescribeProducers shows and
expiry reads): a producer may stamp any time there (message.timestamp.before.max.ms is unlimited
by default), so it cannot say how long the producer has been silent, and AbortTransaction's guard
(services/coordinator/hanging_transactions.py) reads `last_append_ms` instead. Where the true
append time is unknown (batches replayed at an open or a truncation, entries of a snapshot
written before version 4) the state takes the time of that open or truncation, which no append
before it exceeds: the age then reads too young, never too old. Too young only makes an operator
wait up to transaction.max.timeout.ms longer; too old would let an abort of a live transaction
through, whose records would be lost.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from samsa.common import limits
from samsa.common.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_OFFSET = -1  # a producer with no open transaction on this partition
NO_APPEND_TIME = -1  # ProducerEntry.last_append_ms unknown: read as "just now" (the safe side)
# ProducerEntry.last_marker_type when no marker of its epoch is known (none written, or an entry
# of a snapshot older than version 5); else CONTROL_TYPE_ABORT or CONTROL_TYPE_COMMIT.
NO_MARKER_TYPE = -1
BATCHES_KEPT = limits.producer_state_batches_max  # the dedupe window, per producer and partition
SEQUENCE_MAX = 2**31 - 1  # sequences wrap from SEQUENCE_MAX to 0
PRODUCER_EPOCH_MAX = limits.producer_epoch_max  # an int16, as in Kafka
SEQUENCE_MODULUS = SEQUENCE_MAX + 1


class ProducerBatchInfo(Protocol):
    """The producer fields of one stored batch (append_info.PlannedBatch has them). Read-only
    properties, so that NamedTuples satisfy the protocol."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


class BatchMetadata(NamedTuple):
    """One kept batch: its sequence range (last_sequence wrapped) and its offsets (inclusive)."""

    first_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class ProducerEntry(NamedTuple):
    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]  # oldest first, at most BATCHES_KEPT
    last_timestamp: int  # the largest max_timestamp of its batches seen (Kafka's rule)
    # The offset of the first batch of the producer's open transaction here; NO_OFFSET: none.
    current_txn_first_offset: int = NO_OFFSET
    # The broker's clock when it last appended a batch or marker of the producer here (module
    # docstring); NO_APPEND_TIME only in an entry built by hand, which counts as just written.
    last_append_ms: int = NO_APPEND_TIME
    # The control type of the marker written at producer_epoch here; NO_MARKER_TYPE: none known.
    last_marker_type: int = NO_MARKER_TYPE


class CompletedTransaction(NamedTuple):
    """A transaction a marker ended on this partition: its records span first_offset to the
    marker at last_offset. Whether it committed or aborted is in the marker's record, which the
    log reads (this table sees batch headers only)."""

    producer_id: int
    first_offset: int
    last_offset: int


class MarkerWrittenBefore(NamedTuple):
    """A retried marker (same producer epoch, no transaction open since): write nothing, answer
    success."""


class DuplicateAppend(NamedTuple):
    """The whole append is already in the log, at these offsets (inclusive)."""

    base_offset: int
    last_offset: int


class AppendRefused(NamedTuple):
    code: ErrorCode
    message: str  # says what happened and what the producer should do


class CorruptSnapshotError(ValueError):
    """Snapshot bytes that do not decode: the caller rebuilds the state from the log instead."""


def last_sequence_of(batch: ProducerBatchInfo) -> int:
    """Kafka's baseSequence + lastOffsetDelta, wrapped past SEQUENCE_MAX to 0."""
    return (batch.base_sequence + batch.last_offset - batch.base_offset) % SEQUENCE_MODULUS


def next_entry(entry: ProducerEntry | None, batch: ProducerBatchInfo, now_ms: int) -> ProducerEntry:
    """The entry after `batch` is written at `now_ms` (the broker's clock): the same for apply
    and for checking an append."""
    assert batch.last_offset >= batch.base_offset, batch
    metadata = BatchMetadata(
        batch.base_sequence,
        last_sequence_of(batch),
        batch.base_offset,
        batch.last_offset,
        batch.max_timestamp,
    )
    open_at = NO_OFFSET if entry is None else entry.current_txn_first_offset
    if open_at == NO_OFFSET and batch.is_transactional:
        open_at = batch.base_offset  # the producer's first batch of a transaction here
    if entry is None:
        return ProducerEntry(
            batch.producer_id,
            batch.producer_epoch,
            (metadata,),
            batch.max_timestamp,
            open_at,
            now_ms,
        )
    same_epoch = entry.producer_epoch == batch.producer_epoch
    return ProducerEntry(
        entry.producer_id,
        batch.producer_epoch,
        (*(entry.batches if same_epoch else ()), metadata)[-BATCHES_KEPT:],
        max(entry.last_timestamp, batch.max_timestamp),
        open_at,
        now_ms,
        entry.last_marker_type if same_epoch else NO_MARKER_TYPE,
    )


def after_marker(
    entry: ProducerEntry | None, marker: ProducerBatchInfo, now_ms: int, marker_type: int
) -> ProducerEntry:
    """The entry after a transaction marker of `marker_type` written at `now_ms`: the
    transaction is closed and the marker's epoch (bumped at every transaction end, KIP-890) is
    the producer's; a new epoch restarts the sequences, as for data batches."""
    if entry is None:
        return ProducerEntry(
            marker.producer_id,
            marker.producer_epoch,
            (),
            marker.max_timestamp,
            NO_OFFSET,
            now_ms,
            marker_type,
        )
    kept = entry.batches if entry.producer_epoch == marker.producer_epoch else ()
    return ProducerEntry(
        entry.producer_id,
        marker.producer_epoch,
        kept,
        max(entry.last_timestamp, marker.max_timestamp),
        NO_OFFSET,
        now_ms,
        marker_type,
    )
