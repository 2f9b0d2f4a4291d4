"""The bytes of a producer-state snapshot (producer_state.py's table at one offset). Pure.

Layout, big-endian, fixed-width (the widths of the batch header's fields):

    crc uint32 (CRC-32C of everything after it) | version int16 | entry_count int32
    entry_count x (producer_id int64 | producer_epoch int16 | last_timestamp int64 |
                   last_append_ms int64 (version 4 on) | last_marker_type int8 (version 5) |
                   current_txn_first_offset int64 (version 2 on) |
                   batch_count uint8 | batch_count x
                   (first_sequence int32 | last_sequence int32 | base_offset int64 |
                    last_offset int64 | max_timestamp int64))
    unsettled_count int32 (version 3 on) | unsettled_count x
                   (producer_id int64 | first_offset int64 | last_offset int64)

Entries are sorted by producer id, batches oldest first. Version 2 added the first offset of the
producer's open transaction (-1: none; Kafka keeps it in its snapshots too), and entries with no
batch (a producer known only from a transaction marker). Version 3 added the transactions ended
by a marker the high watermark had not passed yet, in marker order (the last stable offset still
stops at them: transaction_index.UnstableTransactions; a restart must not forget them, and
nothing but the snapshot says where they began). Version 4 added each producer's last append
time by the broker's clock (producer_entry.py), version 5 the type of the marker written at its
epoch (-1: none known). Older snapshots still load: a version 1 one was written before
transactions, a version 2 one lists no unsettled transaction (as the open before version 3
assumed), and the entries of one before version 4 take the loader's clock as their last append
(`loaded_ms`): later than the true one, so the producer looks silent for less time than it was,
which only delays an operator's abort of a hanging transaction; the record timestamp instead
could look far older and let an abort of a live one through. The entries of one before version 5
know no marker type, so a marker at an entry's epoch is refused rather than taken for a retry
(its coordinator counts a refused marker as moot: nothing is lost).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import crc32c

from samsa.common.record.codec import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT
from samsa.services.broker.log.producer_state import (
    BATCHES_KEPT,
    NO_APPEND_TIME,
    NO_MARKER_TYPE,
    NO_OFFSET,
    SEQUENCE_MAX,
    BatchMetadata,
    CompletedTransaction,
    CorruptSnapshotError,
    ProducerEntry,
    ProducerStateTable,
)

SNAPSHOT_VERSION = 5
_VERSION_WITHOUT_MARKER_TYPE = 4
_VERSION_WITHOUT_APPEND_TIME = 3
_VERSION_WITHOUT_UNSETTLED = 2
_VERSION_WITHOUT_TRANSACTIONS = 1

_CRC = struct.Struct(">I")
_HEADER = struct.Struct(">hi")
_ENTRY_V1 = struct.Struct(">qhqB")
_ENTRY_V2 = struct.Struct(">qhqqB")
_ENTRY_V4 = struct.Struct(">qhqqqB")
_ENTRY = struct.Struct(">qhqqbqB")
_BATCH = struct.Struct(">iiqqq")
_COUNT = struct.Struct(">i")
_UNSETTLED = struct.Struct(">qqq")


class ProducerSnapshot(NamedTuple):
    """What a snapshot holds: the producer table, and the transactions ended by a marker that
    the high watermark had not passed when it was written (in marker order)."""

    producers: ProducerStateTable
    unsettled: tuple[CompletedTransaction, ...] = ()


def encode_snapshot(
    table: ProducerStateTable, unsettled: Sequence[CompletedTransaction] = ()
) -> bytes:
    """Every entry with all its kept batches, so that a table rebuilt from a snapshot plus the
    batches after it equals the one that saw everything, then the `unsettled` transactions."""
    entries = table.entries()
    parts = [_HEADER.pack(SNAPSHOT_VERSION, len(entries))]
    for entry in entries:
        assert len(entry.batches) <= BATCHES_KEPT, entry
        parts.append(
            _ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                entry.last_timestamp,
                entry.last_append_ms,
                entry.last_marker_type,
                entry.current_txn_first_offset,
                len(entry.batches),
            )
        )
        parts.extend(_BATCH.pack(*batch) for batch in entry.batches)
    parts.append(_COUNT.pack(len(unsettled)))
    parts.extend(_UNSETTLED.pack(*transaction) for transaction in unsettled)
    body = b"".join(parts)
    return _CRC.pack(crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes, *, loaded_ms: int) -> ProducerSnapshot:
    """The table and unsettled transactions a snapshot holds; CorruptSnapshotError for anything
    malformed. `loaded_ms` (the loader's clock) is the last append time of the entries of a
    snapshot older than version 4."""
    entries, unsettled = _decode(data, loaded_ms)
    return ProducerSnapshot(ProducerStateTable.from_entries(entries), unsettled)


def _decode(
    data: bytes, loaded_ms: int
) -> tuple[list[ProducerEntry], tuple[CompletedTransaction, ...]]:
    """The entries of a snapshot, sorted by producer id, and its unsettled transactions.
    Allocates at most one entry per entry-header size of input."""
    view = memoryview(data)
    if len(view) < _CRC.size + _HEADER.size:
        raise CorruptSnapshotError(f"producer snapshot of {len(view)} bytes is truncated")
    (crc,) = _CRC.unpack_from(view, 0)
    if crc32c.crc32c(view[_CRC.size :]) != crc:
        raise CorruptSnapshotError("producer snapshot fails its CRC-32C check")
    version, entry_count = _HEADER.unpack_from(view, _CRC.size)
    if version == SNAPSHOT_VERSION:
        entry_format = _ENTRY
    elif version == _VERSION_WITHOUT_MARKER_TYPE:
        entry_format = _ENTRY_V4
    elif version in (_VERSION_WITHOUT_APPEND_TIME, _VERSION_WITHOUT_UNSETTLED):
        entry_format = _ENTRY_V2
    elif version == _VERSION_WITHOUT_TRANSACTIONS:
        entry_format = _ENTRY_V1
    else:
        raise CorruptSnapshotError(f"producer snapshot version {version} is unknown")
    position = _CRC.size + _HEADER.size
    if not 0 <= entry_count <= (len(view) - position) // entry_format.size:
        raise CorruptSnapshotError(
            f"producer snapshot declares {entry_count} entries in {len(view) - position} bytes"
        )
    entries: list[ProducerEntry] = []
    for _ in range(entry_count):
        entry, position = _decode_entry(view, position, entry_format, loaded_ms)
        if entries and entry.producer_id <= entries[-1].producer_id:
            raise CorruptSnapshotError(
                f"producer snapshot lists producer {entry.producer_id} after "
                f"{entries[-1].producer_id}: entries must be sorted and unique"
            )
        entries.append(entry)
    unsettled: tuple[CompletedTransaction, ...] = ()
    if version >= _VERSION_WITHOUT_APPEND_TIME:
        unsettled, position = _decode_unsettled(view, position)
    if position != len(view):
        raise CorruptSnapshotError(
            f"producer snapshot has {len(view) - position} bytes after its last entry"
        )
    return entries, unsettled


def _decode_unsettled(
    view: memoryview, position: int
) -> tuple[tuple[CompletedTransaction, ...], int]:
    if position + _COUNT.size > len(view):
        raise CorruptSnapshotError(f"producer snapshot is truncated at byte {position}")
    (count,) = _COUNT.unpack_from(view, position)
    position += _COUNT.size
    if not 0 <= count <= (len(view) - position) // _UNSETTLED.size:
        raise CorruptSnapshotError(
            f"producer snapshot declares {count} unsettled transactions in "
            f"{len(view) - position} bytes"
        )
    found: list[CompletedTransaction] = []
    for _ in range(count):
        transaction = CompletedTransaction(*_UNSETTLED.unpack_from(view, position))
        position += _UNSETTLED.size
        if not (
            transaction.producer_id >= 0
            and 0 <= transaction.first_offset < transaction.last_offset
            and (not found or found[-1].last_offset < transaction.last_offset)
        ):
            raise CorruptSnapshotError(
                f"producer snapshot holds an inconsistent unsettled transaction {transaction}"
            )
        found.append(transaction)
    return tuple(found), position


def _decode_entry(
    view: memoryview, position: int, entry_format: struct.Struct, loaded_ms: int
) -> tuple[ProducerEntry, int]:
    if position + entry_format.size > len(view):
        raise CorruptSnapshotError(f"producer snapshot is truncated at byte {position}")
    last_append_ms, marker_type, least_batches = loaded_ms, NO_MARKER_TYPE, 0
    if entry_format is _ENTRY:
        (
            producer_id,
            epoch,
            last_timestamp,
            last_append_ms,
            marker_type,
            txn_first_offset,
            batch_count,
        ) = entry_format.unpack_from(view, position)
    elif entry_format is _ENTRY_V4:
        producer_id, epoch, last_timestamp, last_append_ms, txn_first_offset, batch_count = (
            entry_format.unpack_from(view, position)
        )
    elif entry_format is _ENTRY_V2:
        producer_id, epoch, last_timestamp, txn_first_offset, batch_count = (
            entry_format.unpack_from(view, position)
        )
    else:
        producer_id, epoch, last_timestamp, batch_count = entry_format.unpack_from(view, position)
        txn_first_offset, least_batches = NO_OFFSET, 1
    position += entry_format.size
    if producer_id < 0 or not least_batches <= batch_count <= BATCHES_KEPT:
        raise CorruptSnapshotError(
            f"producer snapshot entry for producer {producer_id} with {batch_count} batches: "
            f"ids are >= 0 and an entry keeps {least_batches} to {BATCHES_KEPT} batches"
        )
    if last_append_ms < NO_APPEND_TIME:
        raise CorruptSnapshotError(
            f"producer snapshot entry for producer {producer_id} was last appended at "
            f"{last_append_ms} ms"
        )
    if marker_type not in (NO_MARKER_TYPE, CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise CorruptSnapshotError(
            f"producer snapshot entry for producer {producer_id} has marker type {marker_type}"
        )
    if txn_first_offset < NO_OFFSET:
        raise CorruptSnapshotError(
            f"producer snapshot entry for producer {producer_id} has an open transaction at "
            f"offset {txn_first_offset}"
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
            or batch.last_sequence != (batch.first_sequence + delta) % (SEQUENCE_MAX + 1)
            or batch.max_timestamp > last_timestamp
        ):
            raise CorruptSnapshotError(
                f"producer snapshot entry for producer {producer_id} holds an inconsistent "
                f"batch {batch}"
            )
        batches.append(batch)
    entry = ProducerEntry(
        producer_id,
        epoch,
        tuple(batches),
        last_timestamp,
        txn_first_offset,
        last_append_ms,
        marker_type,
    )
    return entry, position
