"""The producer state of one partition: idempotent producers' epochs and last batches (KIP-98).

Theory of operation (Kafka's ProducerStateManager and ProducerAppendInfo). An idempotent producer
stamps each batch with (producer_id, producer_epoch, base_sequence); sequences count records per
partition and wrap from SEQUENCE_MAX to 0. For each producer the table keeps one ProducerEntry:
its current epoch, the metadata of its last BATCHES_KEPT batches (the dedupe window) and the
largest batch timestamp seen (for expiry). Validate, then apply:

- `check_leader_append(batches)` changes nothing. It answers None (write the append),
  DuplicateAppend (the append was written before: answer with its original offsets) or
  AppendRefused (write nothing). Each batch is checked against the state the earlier batches of
  the same append would leave:
  * no entry: the batch must start at sequence 0, else UNKNOWN_PRODUCER_ID (the entry expired or
    was never written; the producer bumps its epoch and restarts at 0, KIP-360);
  * an older epoch: INVALID_PRODUCER_EPOCH (a newer instance fenced this one);
  * a newer epoch: it must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
  * the same epoch: a duplicate when a kept batch has the same first and last sequence; written
    when it continues the last kept sequence; DUPLICATE_SEQUENCE_NUMBER when it lies at or below
    the last kept sequence but left the window (written, offsets forgotten); else
    OUT_OF_ORDER_SEQUENCE_NUMBER (a gap).
  A duplicate is answered only when the whole append is duplicates whose original batches are
  consecutive in the log; a retried batch mixed with others is refused with INVALID_REQUEST.
- `apply(batches)` is the only mutator and checks nothing: the leader calls it after a successful
  write, followers for replicated batches, the log for replay at load (one code path, DESIGN §5).
  A new epoch drops the old epoch's batches, as in Kafka.
- `expire(now_ms, expiration_ms)` forgets producers silent for expiration_ms
  (transactional.id.expiration / producer.id.expiration.ms in Kafka).
- `encode_snapshot` / `decode_snapshot`: every entry with all its kept batches, so that a table
  rebuilt from a snapshot plus the batches after it equals the one that saw everything.

Batches whose producer_id is negative (NO_PRODUCER_ID) are not idempotent and are ignored by both
check and apply, as are control batches (transaction markers: a producer id and epoch, no
sequence). Transactions (is_transactional) come later and are ignored here.

Invariants: entries are keyed by producer_id >= 0; each holds 1 to BATCHES_KEPT batches (apply
creates an entry with its first batch), oldest first, all of its current epoch, each with
last_offset >= base_offset; last_timestamp is at least the max_timestamp of every kept batch.
Pure: no I/O, no clock (the caller passes now_ms).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import NamedTuple, Protocol

import crc32c

from samsa.common import limits
from samsa.common.errors import ErrorCode

NO_PRODUCER_ID = -1
BATCHES_KEPT = limits.producer_state_batches_max  # the dedupe window, per producer and partition
SEQUENCE_MAX = 2**31 - 1  # sequences wrap from SEQUENCE_MAX to 0
PRODUCER_EPOCH_MAX = 32767
SNAPSHOT_VERSION = 1

_SEQUENCE_MODULUS = SEQUENCE_MAX + 1


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


class DuplicateAppend(NamedTuple):
    """The whole append is already in the log, at these offsets (inclusive)."""

    base_offset: int
    last_offset: int


class AppendRefused(NamedTuple):
    code: ErrorCode
    message: str  # says what happened and what the producer should do


class CorruptSnapshotError(ValueError):
    """Snapshot bytes that do not decode: the caller rebuilds the state from the log instead."""


def _last_sequence(batch: ProducerBatchInfo) -> int:
    """Kafka's baseSequence + lastOffsetDelta, wrapped past SEQUENCE_MAX to 0."""
    return (batch.base_sequence + batch.last_offset - batch.base_offset) % _SEQUENCE_MODULUS


def _next_entry(entry: ProducerEntry | None, batch: ProducerBatchInfo) -> ProducerEntry:
    """The entry after `batch` is written: the same for apply and for checking an append."""
    assert batch.last_offset >= batch.base_offset, batch
    metadata = BatchMetadata(
        batch.base_sequence,
        _last_sequence(batch),
        batch.base_offset,
        batch.last_offset,
        batch.max_timestamp,
    )
    if entry is None:
        return ProducerEntry(
            batch.producer_id, batch.producer_epoch, (metadata,), batch.max_timestamp
        )
    kept = entry.batches if entry.producer_epoch == batch.producer_epoch else ()
    return ProducerEntry(
        entry.producer_id,
        batch.producer_epoch,
        (*kept, metadata)[-BATCHES_KEPT:],
        max(entry.last_timestamp, batch.max_timestamp),
    )


def _check_batch(
    entry: ProducerEntry | None, batch: ProducerBatchInfo
) -> BatchMetadata | AppendRefused | None:
    """One idempotent batch against its producer's entry: None when it is new and may be
    written, the kept BatchMetadata it duplicates, or why it is refused."""
    producer_id, epoch, sequence = batch.producer_id, batch.producer_epoch, batch.base_sequence
    last_sequence = _last_sequence(batch)
    if not (0 <= epoch <= PRODUCER_EPOCH_MAX and 0 <= sequence <= SEQUENCE_MAX):
        return AppendRefused(
            ErrorCode.INVALID_RECORD,
            f"producer {producer_id}'s batch carries producer_epoch {epoch} and base_sequence "
            f"{sequence}: an idempotent batch needs an epoch in 0..{PRODUCER_EPOCH_MAX} and a "
            f"sequence in 0..{SEQUENCE_MAX}; fix the producer",
        )
    if entry is None:
        if sequence == 0:
            return None
        return AppendRefused(
            ErrorCode.UNKNOWN_PRODUCER_ID,
            f"producer {producer_id} (epoch {epoch}) has no state on this partition (expired or "
            f"never written) and its batch starts at sequence {sequence}, not 0: bump the "
            "producer epoch and restart this partition's sequence at 0 (KIP-360)",
        )
    if epoch < entry.producer_epoch:
        return AppendRefused(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"producer {producer_id} sent epoch {epoch} but this partition has seen epoch "
            f"{entry.producer_epoch}: a newer instance of the producer fenced this one; stop "
            "sending with it",
        )
    if epoch > entry.producer_epoch:
        if sequence == 0:
            return None
        return AppendRefused(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {producer_id} starts epoch {epoch} (after {entry.producer_epoch}) at "
            f"sequence {sequence}: expected sequence 0, a new epoch restarts the sequence",
        )
    return _check_same_epoch(entry, batch, last_sequence)


def _check_same_epoch(
    entry: ProducerEntry, batch: ProducerBatchInfo, last_sequence: int
) -> BatchMetadata | AppendRefused | None:
    sequence = batch.base_sequence
    for kept in entry.batches:
        if kept.first_sequence == sequence and kept.last_sequence == last_sequence:
            return kept
    latest = entry.batches[-1].last_sequence if entry.batches else -1
    expected = (latest + 1) % _SEQUENCE_MODULUS
    if sequence == expected:
        return None
    where = f"producer {entry.producer_id} epoch {entry.producer_epoch}: batch "
    where += f"{sequence}..{last_sequence}"
    # No wrap reasoning: the unwrapped end of a stale retry lies at or below the latest sequence.
    if sequence + batch.last_offset - batch.base_offset <= latest:
        return AppendRefused(
            ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
            f"{where} lies at or below the last written sequence {latest} but matches none of "
            f"the last {BATCHES_KEPT} batches kept (from sequence "
            f"{entry.batches[0].first_sequence}): it was written before and its offsets are "
            "forgotten; treat it as written and do not resend it",
        )
    return AppendRefused(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        f"{where}: expected sequence {expected}, got {sequence}; a batch before it is missing, "
        f"resend from sequence {expected} or bump the producer epoch",
    )


def _duplicate_append(
    duplicates: list[BatchMetadata], batch_count: int
) -> DuplicateAppend | AppendRefused:
    """The answer to an append in which `duplicates` of `batch_count` batches were written."""
    if len(duplicates) != batch_count:
        return AppendRefused(
            ErrorCode.INVALID_REQUEST,
            f"the append mixes {len(duplicates)} retried (duplicate) batches with "
            f"{batch_count - len(duplicates)} new or non-idempotent ones: send a retried batch "
            "alone, in an append of its own",
        )
    for previous, kept in pairwise(duplicates):
        if kept.base_offset != previous.last_offset + 1:
            return AppendRefused(
                ErrorCode.INVALID_REQUEST,
                f"the append's retried batches were written at offsets "
                f"{previous.base_offset}..{previous.last_offset} and "
                f"{kept.base_offset}..{kept.last_offset}, not consecutively: send a retried "
                "batch alone, in an append of its own",
            )
    return DuplicateAppend(duplicates[0].base_offset, duplicates[-1].last_offset)


class ProducerStateTable:
    """The entries of one partition, keyed by producer id. See the module docstring."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, ProducerEntry] = {}

    def check_leader_append(
        self, batches: Sequence[ProducerBatchInfo]
    ) -> DuplicateAppend | AppendRefused | None:
        """Whether the leader may write `batches` (None), answers with the offsets of an earlier
        write (DuplicateAppend), or refuses them. Changes nothing."""
        pending: dict[int, ProducerEntry] = {}
        duplicates: list[BatchMetadata] = []
        for batch in batches:
            if batch.producer_id < 0 or batch.is_control:
                continue
            entry = pending.get(batch.producer_id, self._entries.get(batch.producer_id))
            outcome = _check_batch(entry, batch)
            if isinstance(outcome, AppendRefused):
                return outcome
            if outcome is None:
                pending[batch.producer_id] = _next_entry(entry, batch)
            else:
                duplicates.append(outcome)
        if not duplicates:
            return None
        return _duplicate_append(duplicates, len(batches))

    def apply(self, batches: Iterable[ProducerBatchInfo]) -> None:
        """Record written batches, unchecked: after a leader write, on followers, in replay."""
        entries = self._entries
        for batch in batches:
            if batch.producer_id >= 0 and not batch.is_control:
                entries[batch.producer_id] = _next_entry(entries.get(batch.producer_id), batch)

    def expire(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers whose last batch timestamp is expiration_ms or more before now_ms;
        the removed producer ids, sorted."""
        expired = sorted(
            producer_id
            for producer_id, entry in self._entries.items()
            if entry.last_timestamp + expiration_ms <= now_ms
        )
        for producer_id in expired:
            del self._entries[producer_id]
        return expired

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def entries(self) -> list[ProducerEntry]:
        """Every entry, sorted by producer id."""
        return [self._entries[producer_id] for producer_id in sorted(self._entries)]

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateTable):
            return NotImplemented
        return self._entries == other._entries

    def __repr__(self) -> str:
        return f"ProducerStateTable({self.entries()!r})"

    def encode_snapshot(self) -> bytes:
        return _encode_snapshot(self.entries())

    @classmethod
    def decode_snapshot(cls, data: bytes) -> ProducerStateTable:
        """The table a snapshot holds; CorruptSnapshotError for anything malformed."""
        table = cls()
        table._entries = {entry.producer_id: entry for entry in _decode_snapshot(data)}
        return table


# Snapshot layout, big-endian, fixed-width (the widths of the batch header's fields):
#   crc uint32 (CRC-32C of everything after it) | version int16 | entry_count int32
#   entry_count x (producer_id int64 | producer_epoch int16 | last_timestamp int64 |
#                  batch_count uint8 | batch_count x
#                  (first_sequence int32 | last_sequence int32 | base_offset int64 |
#                   last_offset int64 | max_timestamp int64))
# Entries are sorted by producer id, batches oldest first.
_CRC = struct.Struct(">I")
_HEADER = struct.Struct(">hi")
_ENTRY = struct.Struct(">qhqB")
_BATCH = struct.Struct(">iiqqq")


def _encode_snapshot(entries: Sequence[ProducerEntry]) -> bytes:
    parts = [_HEADER.pack(SNAPSHOT_VERSION, len(entries))]
    for entry in entries:
        assert 1 <= len(entry.batches) <= BATCHES_KEPT, entry
        parts.append(
            _ENTRY.pack(
                entry.producer_id, entry.producer_epoch, entry.last_timestamp, len(entry.batches)
            )
        )
        parts.extend(_BATCH.pack(*batch) for batch in entry.batches)
    body = b"".join(parts)
    return _CRC.pack(crc32c.crc32c(body)) + body


def _decode_snapshot(data: bytes) -> list[ProducerEntry]:
    """The entries of a snapshot, sorted by producer id; CorruptSnapshotError for anything
    malformed. Allocates at most one entry per _ENTRY.size bytes of input."""
    view = memoryview(data)
    if len(view) < _CRC.size + _HEADER.size:
        raise CorruptSnapshotError(f"producer snapshot of {len(view)} bytes is truncated")
    (crc,) = _CRC.unpack_from(view, 0)
    if crc32c.crc32c(view[_CRC.size :]) != crc:
        raise CorruptSnapshotError("producer snapshot fails its CRC-32C check")
    version, entry_count = _HEADER.unpack_from(view, _CRC.size)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"producer snapshot version {version} is unknown")
    position = _CRC.size + _HEADER.size
    if not 0 <= entry_count <= (len(view) - position) // _ENTRY.size:
        raise CorruptSnapshotError(
            f"producer snapshot declares {entry_count} entries in {len(view) - position} bytes"
        )
    entries: list[ProducerEntry] = []
    for _ in range(entry_count):
        entry, position = _decode_entry(view, position)
        if entries and entry.producer_id <= entries[-1].producer_id:
            raise CorruptSnapshotError(
                f"producer snapshot lists producer {entry.producer_id} after "
                f"{entries[-1].producer_id}: entries must be sorted and unique"
            )
        entries.append(entry)
    if position != len(view):
        raise CorruptSnapshotError(
            f"producer snapshot has {len(view) - position} bytes after its last entry"
        )
    return entries


def _decode_entry(view: memoryview, position: int) -> tuple[ProducerEntry, int]:
    if position + _ENTRY.size > len(view):
        raise CorruptSnapshotError(f"producer snapshot is truncated at byte {position}")
    producer_id, epoch, last_timestamp, batch_count = _ENTRY.unpack_from(view, position)
    position += _ENTRY.size
    if producer_id < 0 or not 1 <= batch_count <= BATCHES_KEPT:
        raise CorruptSnapshotError(
            f"producer snapshot entry for producer {producer_id} with {batch_count} batches: "
            f"ids are >= 0 and an entry keeps 1 to {BATCHES_KEPT} batches"
        )
    if position + batch_count * _BATCH.size > len(view):
        raise CorruptSnapshotError(f"producer snapshot is truncated in producer {producer_id}")
    batches = []
    for _ in range(batch_count):
        batch = BatchMetadata(*_BATCH.unpack_from(view, position))
        position += _BATCH.size
        delta = batch.last_offset - batch.base_offset
        if (
            delta < 0
            or batch.last_sequence != (batch.first_sequence + delta) % _SEQUENCE_MODULUS
            or batch.max_timestamp > last_timestamp
        ):
            raise CorruptSnapshotError(
                f"producer snapshot entry for producer {producer_id} holds an inconsistent "
                f"batch {batch}"
            )
        batches.append(batch)
    return ProducerEntry(producer_id, epoch, tuple(batches), last_timestamp), position
