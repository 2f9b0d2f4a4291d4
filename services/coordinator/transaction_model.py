"""The transaction coordinator's picture of one transactional id, and the values its operations
return. The transitions and their theory of operation are in transaction_state.py.

A `TransactionMetadata` is exactly the content of one `__transaction_state` record
(transaction_records.proto): every field is persisted, nothing lives only in memory, so the
replay of a partition equals what the coordinator that wrote it held (`==` compares them).

Producer identity: a producer holds (producer_id, producer_epoch). Epochs run 0..32767 (Kafka's
Short.MaxValue). A producer is never handed an epoch above `PRODUCER_EPOCH_EXHAUSTED` (32766),
so one more bump is always possible: a fence, or the bump of the last transaction's end, may take
a marker epoch to 32767, after which the transactional id moves to a new producer id at epoch 0.
"""

from __future__ import annotations

import enum
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import NamedTuple

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import transaction_records_pb2 as t

# Kafka's producer epoch is an int16: RecordBatch carries it in two bytes.
PRODUCER_EPOCH_MAX = limits.producer_epoch_max
# At or above this epoch a bump would leave no room for a fencing bump after it, so the next
# identity comes from a new producer id at epoch 0 (Kafka's TransactionMetadata.isEpochExhausted).
PRODUCER_EPOCH_EXHAUSTED = PRODUCER_EPOCH_MAX - 1
# "No producer id / no epoch" in records and answers (Kafka's RecordBatch.NO_PRODUCER_ID/EPOCH).
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# "No transaction open" in transaction_start_ms.
NO_TIMESTAMP = -1

assert 0 < PRODUCER_EPOCH_EXHAUSTED < PRODUCER_EPOCH_MAX

TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """Where a transactional id's transaction stands; numbers are the proto's."""

    EMPTY = t.TRANSACTION_STATE_EMPTY
    ONGOING = t.TRANSACTION_STATE_ONGOING
    PREPARE_COMMIT = t.TRANSACTION_STATE_PREPARE_COMMIT
    PREPARE_ABORT = t.TRANSACTION_STATE_PREPARE_ABORT
    COMPLETE_COMMIT = t.TRANSACTION_STATE_COMPLETE_COMMIT
    COMPLETE_ABORT = t.TRANSACTION_STATE_COMPLETE_ABORT
    PREPARE_EPOCH_FENCE = t.TRANSACTION_STATE_PREPARE_EPOCH_FENCE
    DEAD = t.TRANSACTION_STATE_DEAD


EMPTY = TransactionState.EMPTY
ONGOING = TransactionState.ONGOING
PREPARE_COMMIT = TransactionState.PREPARE_COMMIT
PREPARE_ABORT = TransactionState.PREPARE_ABORT
COMPLETE_COMMIT = TransactionState.COMPLETE_COMMIT
COMPLETE_ABORT = TransactionState.COMPLETE_ABORT
PREPARE_EPOCH_FENCE = TransactionState.PREPARE_EPOCH_FENCE
DEAD = TransactionState.DEAD

PREPARED = frozenset({PREPARE_COMMIT, PREPARE_ABORT})
COMPLETED = frozenset({COMPLETE_COMMIT, COMPLETE_ABORT})
# States with no transaction open or decided: a new one may begin, the id may expire.
IDLE = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})
# States whose `partitions` is the open or decided transaction's.
WITH_PARTITIONS = frozenset({ONGOING, PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE})


@dataclass(frozen=True)
class TransactionMetadata:
    """One transactional id's state: one `__transaction_state` record (field docs in the proto)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    last_update_ms: int
    partitions: frozenset[TopicPartition] = frozenset()
    transaction_start_ms: int = NO_TIMESTAMP
    previous_producer_id: int = NO_PRODUCER_ID
    previous_producer_epoch: int = NO_PRODUCER_EPOCH
    next_producer_id: int = NO_PRODUCER_ID

    def __post_init__(self) -> None:
        # Programmer errors only: decoding refuses bad records before building one of these.
        assert self.transactional_id, "a transactional id is never empty"
        assert self.producer_id >= 0, self.producer_id
        assert 0 <= self.producer_epoch <= PRODUCER_EPOCH_MAX, self.producer_epoch
        assert (self.state in WITH_PARTITIONS) == bool(self.partitions), (self.state, self)
        assert (self.transaction_start_ms != NO_TIMESTAMP) == (self.state in WITH_PARTITIONS)
        assert self.next_producer_id == NO_PRODUCER_ID or self.state in PREPARED, self

    def answer_identity(self) -> tuple[int, int]:
        """The (producer id, epoch) the producer must use next: what InitProducerId and EndTxn
        answer, and what AddPartitions and EndTxn expect."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """True when the producer's next identity must be a new producer id at epoch 0."""
    return producer_epoch >= PRODUCER_EPOCH_EXHAUSTED


class MarkerWrite(NamedTuple):
    """Phase 2 of a decided transaction: write a COMMIT (or ABORT) control batch with this producer
    id and (bumped) epoch to each partition, then call `transaction_state.markers_written`."""

    transactional_id: str
    txn_commit: bool
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]  # sorted


def marker_write_of(metadata: TransactionMetadata) -> MarkerWrite:
    """The markers a PREPARE_COMMIT or PREPARE_ABORT metadata calls for."""
    assert metadata.state in PREPARED, metadata.state
    return MarkerWrite(
        transactional_id=metadata.transactional_id,
        txn_commit=metadata.state == PREPARE_COMMIT,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        partitions=tuple(sorted(metadata.partitions)),
    )


@dataclass(frozen=True)
class Outcome:
    """What one operation decided. The caller, in this order:
    1. if `metadata` is set: writes it to `__transaction_state` (encode), and once the write is
       durable, `apply`s it (a failed write applies nothing: the old metadata stands);
    2. answers the client with `error` / `message` and, for InitProducerId and EndTxn, the
       producer id and epoch (only meaningful when error is NONE);
    3. if `markers` is set: writes them, then feeds `markers_written` back in.
    A metadata with state DEAD is written as a tombstone."""

    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    metadata: TransactionMetadata | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    markers: MarkerWrite | None = None

    def __post_init__(self) -> None:
        assert self.error == ErrorCode.NONE or self.message, "a refusal says what to do"
        assert self.markers is None or self.metadata is not None or self.error == ErrorCode.NONE


def refusal(error: ErrorCode, message: str) -> Outcome:
    """An answer that writes nothing."""
    assert error != ErrorCode.NONE
    return Outcome(error=error, message=message)


def apply(
    transactions: MutableMapping[str, TransactionMetadata], metadata: TransactionMetadata
) -> None:
    """Make a durably written metadata the current one (DEAD: forget the id). The only mutator:
    the same call runs after a write and while replaying the log."""
    if metadata.state == DEAD:
        transactions.pop(metadata.transactional_id, None)
    else:
        transactions[metadata.transactional_id] = metadata
