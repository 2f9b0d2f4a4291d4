"""The record codec of `__transaction_state`: TransactionMetadata ⇄ (key bytes, value bytes).

Theory of operation. One record holds the whole state of one transactional id
(transaction_records.proto), so a partition's state is its last record per key: `replay` folds
records in log order, later records win, a tombstone (null value) forgets the id. It uses
transaction_model.apply, the same call the coordinator makes after each durable write, so a
coordinator that loads the partition holds exactly what the writer held (one code path).

Both sides are serialized with `deterministic=True` and the partitions in one canonical order
(topics sorted, partition numbers ascending), so equal metadata is equal bytes: log compaction
compares key bytes, and a re-encoded record is the record that was read.

`decode` is the gate between the disk and the state machine: it accepts exactly what `encode`
can produce and raises ValueError, saying what is wrong, for anything else — bytes that do not
parse, an empty transactional id, an unknown or forbidden state, out-of-range ids or epochs,
partitions where the state has none (or none where it must), duplicate partitions. It never lets
garbage reach TransactionMetadata's assertions.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import DecodeError

from samsa.services.coordinator.transaction_model import (
    DEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    PREPARED,
    PRODUCER_EPOCH_MAX,
    WITH_PARTITIONS,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    apply,
)
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g
from samsa.v1 import transaction_records_pb2 as t

# A decoded record: the transactional id and its metadata, or None for a tombstone.
TransactionRecord = tuple[str, TransactionMetadata | None]

_KNOWN_STATES = {state.value: state for state in TransactionState if state != DEAD}


def encode_key(transactional_id: str) -> bytes:
    assert transactional_id
    key = t.TransactionRecordKey(transactional_id=transactional_id)
    return key.SerializeToString(deterministic=True)


def encode(metadata: TransactionMetadata) -> tuple[bytes, bytes | None]:
    """Key and value bytes; a DEAD metadata is a tombstone (value None)."""
    key = encode_key(metadata.transactional_id)
    if metadata.state == DEAD:
        return key, None
    value = t.TransactionRecordValue(
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        previous_producer_id=metadata.previous_producer_id,
        previous_producer_epoch=metadata.previous_producer_epoch,
        next_producer_id=metadata.next_producer_id,
        transaction_timeout_ms=metadata.transaction_timeout_ms,
        state=int(metadata.state),  # type: ignore[arg-type]
        partitions=_to_topic_partitions(metadata.partitions),
        transaction_start_ms=metadata.transaction_start_ms,
        last_update_ms=metadata.last_update_ms,
    )
    return key, value.SerializeToString(deterministic=True)


def encode_writer_epoch(coordinator_id: int, assignment_epoch: int) -> tuple[bytes, bytes]:
    """The record a new owner of the partition writes first (the fence; see the proto)."""
    key = t.TransactionRecordKey(writer_epoch=g.WriterEpochKey())
    value = g.WriterEpochValue(coordinator_id=coordinator_id, assignment_epoch=assignment_epoch)
    return key.SerializeToString(deterministic=True), value.SerializeToString(deterministic=True)


def is_writer_epoch(key: bytes) -> bool:
    """Whether `key` is a writer-epoch record's: it holds no transaction state, and replay skips
    it. (A key that does not parse is not: `decode` says what is wrong with it.)"""
    parsed = t.TransactionRecordKey()
    try:
        parsed.ParseFromString(key)
    except DecodeError:
        return False
    return parsed.WhichOneof("key") == "writer_epoch"


def decode(key: bytes, value: bytes | None) -> TransactionRecord:
    """The record the bytes hold; ValueError for anything `encode` could not have written."""
    parsed_key = t.TransactionRecordKey()
    try:
        parsed_key.ParseFromString(key)
    except DecodeError as error:
        raise ValueError(f"transaction record key does not parse: {error}") from error
    transactional_id = parsed_key.transactional_id
    if not transactional_id:
        raise ValueError("transaction record key has an empty transactional id")
    if value is None:
        return transactional_id, None
    parsed_value = t.TransactionRecordValue()
    try:
        parsed_value.ParseFromString(value)
    except DecodeError as error:
        raise ValueError(
            f"transaction record value of {transactional_id!r} does not parse: {error}"
        ) from error
    try:
        return transactional_id, _metadata_of(transactional_id, parsed_value)
    except ValueError as error:
        raise ValueError(f"transaction record of {transactional_id!r}: {error}") from error


def _metadata_of(transactional_id: str, value: t.TransactionRecordValue) -> TransactionMetadata:
    state = _KNOWN_STATES.get(value.state)
    if state is None:
        raise ValueError(f"state {value.state} is not a state a value may hold")
    if value.producer_id < 0:
        raise ValueError(f"producer id {value.producer_id} is negative")
    if not 0 <= value.producer_epoch <= PRODUCER_EPOCH_MAX:
        raise ValueError(f"producer epoch {value.producer_epoch} is outside 0..32767")
    if value.previous_producer_id < NO_PRODUCER_ID:
        raise ValueError(f"previous producer id {value.previous_producer_id} is below -1")
    if not NO_PRODUCER_EPOCH <= value.previous_producer_epoch <= PRODUCER_EPOCH_MAX:
        raise ValueError(f"previous producer epoch {value.previous_producer_epoch} out of range")
    if value.next_producer_id < NO_PRODUCER_ID:
        raise ValueError(f"next producer id {value.next_producer_id} is below -1")
    if value.next_producer_id != NO_PRODUCER_ID and state not in PREPARED:
        raise ValueError(f"a next producer id in state {state.name}")
    if value.transaction_timeout_ms <= 0:
        raise ValueError(f"transaction timeout {value.transaction_timeout_ms} ms is not positive")
    partitions = _from_topic_partitions(value.partitions)
    if bool(partitions) != (state in WITH_PARTITIONS):
        raise ValueError(f"{len(partitions)} partitions in state {state.name}")
    if state in WITH_PARTITIONS and value.transaction_start_ms < 0:
        raise ValueError(f"transaction start {value.transaction_start_ms} in state {state.name}")
    if state not in WITH_PARTITIONS and value.transaction_start_ms != NO_TIMESTAMP:
        raise ValueError(f"a transaction start time in state {state.name}")
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        transaction_timeout_ms=value.transaction_timeout_ms,
        state=state,
        last_update_ms=value.last_update_ms,
        partitions=partitions,
        transaction_start_ms=value.transaction_start_ms,
        previous_producer_id=value.previous_producer_id,
        previous_producer_epoch=value.previous_producer_epoch,
        next_producer_id=value.next_producer_id,
    )


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, TransactionMetadata]:
    """The state of a partition of `__transaction_state` from its records in log order."""
    transactions: dict[str, TransactionMetadata] = {}
    for key, value in records:
        if is_writer_epoch(key):
            continue
        transactional_id, metadata = decode(key, value)
        if metadata is None:
            transactions.pop(transactional_id, None)  # a tombstone of a compacted id: no-op
        else:
            apply(transactions, metadata)
    return transactions


def _to_topic_partitions(partitions: frozenset[TopicPartition]) -> list[c.TopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [
        c.TopicPartitions(topic=topic, partitions=numbers) for topic, numbers in by_topic.items()
    ]


def _from_topic_partitions(entries: Iterable[c.TopicPartitions]) -> frozenset[TopicPartition]:
    partitions: set[TopicPartition] = set()
    count = 0
    for entry in entries:
        if not entry.topic:
            raise ValueError("a partition entry has an empty topic name")
        for number in entry.partitions:
            if number < 0:
                raise ValueError(f"partition {entry.topic!r}/{number} is negative")
            partitions.add((entry.topic, number))
            count += 1
    if count != len(partitions):
        raise ValueError("a partition is listed twice")
    return frozenset(partitions)
