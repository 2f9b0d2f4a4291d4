"""Producer-state snapshot files, and rebuilding the state from them and the log (the I/O half).

Theory of operation. The producer state of a partition (producer_state.py, a pure table) must
survive restarts, or a producer retrying after a broker restart would write its batch twice. It
is rebuilt as Kafka rebuilds it: load the newest snapshot at or below the log end offset, then
replay the headers of every batch from the snapshot's offset to the log end (`rebuild`).
A snapshot named `<offset>.snapshot` holds the state after every batch below that offset.

When snapshots are written (log.py decides, producer_log_state.py writes them):
- at each segment roll, at the new segment's base offset, so that a restart after a crash
  replays at most the active segment. Written without fsync, so that appends pay none; each
  one holding producers is fsynced once, later (`sync_snapshot`, ProducerLogState decides):
  before a flush moves the recovery point to or past it, since recovery trusts the snapshots
  at or below the recovery point, and before retention or DeleteRecords deletes the segments
  below it, since it is then the only record of their producers (Kafka fsyncs it in the flush
  that follows the roll). A snapshot above the recovery point that an OS crash tore or lost
  fails its CRC or is missing, and the rebuild falls back to an older one or the log start
  (slower, never wrong);
- at `close`, at the log end offset and durably, so that a clean restart replays nothing. A log
  whose state is empty at close keeps no snapshot at all, and a clean open without one starts
  empty: 10,000 partitions that never saw an idempotent producer cost no file each.

Only the newest `SNAPSHOTS_KEPT` snapshots are kept. Truncation deletes those above the new log
end and rebuilds from what remains; retention deletes no state (KIP-360: a producer idle past
the log's retention keeps its sequence until `producer.id.expiration.ms`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import NamedTuple

from samsa.common.record.codec import CONTROL_TYPE_ABORT, decode_batch, read_control_marker
from samsa.services.broker.log.checkpoint_file import (
    TEMP_SUFFIX,
    read_if_exists,
    write_all,
    write_atomically,
)
from samsa.services.broker.log.producer_snapshot_codec import decode_snapshot, encode_snapshot
from samsa.services.broker.log.producer_state import (
    CompletedTransaction,
    CorruptSnapshotError,
    ProducerBatchInfo,
    ProducerStateTable,
)
from samsa.services.broker.log.segment import Segment, parse_base_offset, segment_path
from samsa.services.broker.log.transaction_index import AbortedTransaction, apply_batches

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
# Two, so that a follower truncating into the segment before the active one still finds a
# snapshot below its new end (truncations reach back at most a few batches).
SNAPSHOTS_KEPT = 2


def snapshot_offsets(names: Iterable[str]) -> list[int]:
    """The offsets of the snapshot files among a directory's file names, ascending."""
    found = (parse_base_offset(name, SNAPSHOT_SUFFIX) for name in names)
    return sorted(offset for offset in found if offset is not None)


def write_snapshot(
    directory: Path, offset: int, state: ProducerStateTable, *, durable: bool
) -> None:
    """Write the state as `<offset>.snapshot`, atomically (temp file, rename); fsynced, with the
    directory, only when `durable`."""
    data = encode_snapshot(state)
    path = segment_path(directory, offset, SNAPSHOT_SUFFIX)
    if durable:
        write_atomically(path, data)
        return
    temporary = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def sync_snapshot(directory: Path, offset: int) -> None:
    """fsync `<offset>.snapshot`, written by `write_snapshot` without (its directory entry is
    the caller's to fsync)."""
    fd = os.open(segment_path(directory, offset, SNAPSHOT_SUFFIX), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def delete_snapshots(directory: Path, offsets: Iterable[int]) -> None:
    for offset in offsets:
        segment_path(directory, offset, SNAPSHOT_SUFFIX).unlink(missing_ok=True)


class Rebuilt(NamedTuple):
    """The producer state at the log end, and what the replay that rebuilt it passed over."""

    producers: ProducerStateTable
    replayed_from: int  # where the replay started (the log end when nothing was replayed)
    completed: list[CompletedTransaction]  # transactions markers ended in the replayed part
    aborted: list[tuple[int, AbortedTransaction]]  # (segment base offset, index entry)


def rebuild(
    directory: Path,
    offsets: list[int],
    segments: Sequence[Segment],
    *,
    empty_without_snapshot: bool,
    newest_usable: int | None = None,
) -> Rebuilt:
    """The producer state at the log end: the newest readable snapshot at or below it (those
    above it, or unreadable, are deleted from `offsets` and the directory), then a replay of the
    batches after it. With no snapshot, `empty_without_snapshot` (a clean open: close keeps a
    snapshot whenever the state is not empty) starts empty; otherwise the whole log is replayed.
    `newest_usable` deletes the snapshots above it too: after an unclean stop the replay must
    start at or below the recovery point, so that it rebuilds the transaction index entries a
    crash may have lost above it (transaction_log_state.py)."""
    log_end_offset = segments[-1].next_offset
    limit = log_end_offset if newest_usable is None else min(newest_usable, log_end_offset)
    above = [offset for offset in offsets if offset > limit]
    delete_snapshots(directory, above)
    del offsets[len(offsets) - len(above) :]
    # A snapshot below the first segment is unusable: the batches between it and that segment
    # were deleted (DeleteRecords or retention), so a replay from it would miss them and keep a
    # stale state, e.g. a transaction whose marker was deleted still open (a hanging LSO).
    # Kafka drops such snapshots too; the whole log is replayed instead.
    below = [offset for offset in offsets if offset < segments[0].base_offset]
    delete_snapshots(directory, below)
    del offsets[: len(below)]
    for offset in reversed(list(offsets)):
        data = read_if_exists(segment_path(directory, offset, SNAPSHOT_SUFFIX))
        try:
            state = decode_snapshot(data or b"")
        except CorruptSnapshotError as error:
            log.warning(
                "producer-state snapshot unreadable; using an older one",
                extra={"directory": str(directory), "offset": offset, "error": str(error)},
            )
            delete_snapshots(directory, [offset])
            offsets.remove(offset)
            continue
        return Rebuilt(state, offset, *replay(state, segments, offset))
    state = ProducerStateTable()
    if empty_without_snapshot:
        return Rebuilt(state, log_end_offset, [], [])
    start = segments[0].base_offset
    return Rebuilt(state, start, *replay(state, segments, start))


def replay(
    state: ProducerStateTable, segments: Sequence[Segment], from_offset: int
) -> tuple[list[CompletedTransaction], list[tuple[int, AbortedTransaction]]]:
    """Apply the header of every idempotent batch at or after `from_offset` (reads headers, and
    the one record of each marker that ends a transaction); returns the transactions ended and
    the aborted ones' index entries with the base offset of the segment holding their marker."""
    completed: list[CompletedTransaction] = []
    aborted: list[tuple[int, AbortedTransaction]] = []
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        applied = apply_batches(
            state,
            (header for header in segment.headers_from(from_offset) if header.producer_id >= 0),
            partial(_is_abort_marker, segment),
        )
        completed += applied.completed
        aborted += [(segment.base_offset, entry) for entry in applied.aborted]
    return completed, aborted


def _is_abort_marker(segment: Segment, header: ProducerBatchInfo) -> bool:
    found = segment.find_batch(header.base_offset)
    if found is None:
        return False
    position, stored = found
    data = segment.read_bytes(position, stored.size_bytes)
    marker_type, _ = read_control_marker(decode_batch(data, verify_crc=False))
    return marker_type == CONTROL_TYPE_ABORT
