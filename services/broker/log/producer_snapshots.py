"""Producer-state snapshot files, and rebuilding the state from them and the log (the I/O half).

Theory of operation. The producer state of a partition (producer_state.py, a pure table) must
survive restarts, or a producer retrying after a broker restart would write its batch twice. It
is rebuilt as Kafka rebuilds it: load the newest snapshot at or below the log end offset, then
replay the headers of every batch from the snapshot's offset to the log end (`rebuild`).
A snapshot named `<offset>.snapshot` holds the state after every batch below that offset, and
the transactions ended below it by a marker the high watermark had not yet passed (their first
offsets still hold the last stable offset, and no later replay would find them).

When snapshots are written (log.py decides, producer_log_state.py writes them):
- at each segment roll, at the new segment's base offset, so that a restart after a crash
  replays at most from the segment holding the recovery point. Written without fsync, so that
  appends pay none; each one holding producers is fsynced once, later (`sync_snapshot`,
  ProducerLogState decides): before a flush moves the recovery point to or past it, since an
  unclean open trusts the snapshots at or below the recovery point, and before retention or
  DeleteRecords deletes the segments below it, since it is then the only record of their
  producers (Kafka fsyncs it in the flush that follows the roll). A snapshot above the recovery
  point that an OS crash tore or lost fails its CRC or is missing, and the rebuild falls back to
  an older one or the log start (slower, never wrong). An empty table's snapshot is written too
  and never fsynced: lost, the fallback finds the same state, but without it a truncation (a
  follower's, at every leader change) would replay the whole log of a partition that never saw
  an idempotent producer;
- by a rebuild, at each segment base its replay passes (`rebuild`), so that the segments keep
  theirs after an unclean open or a torn one (Kafka's recovery snapshots each segment it
  recovers);
- at `close`, at the log end offset and durably, so that a clean restart replays nothing. A log
  whose state is empty at close keeps no snapshot at all, and a clean open that finds none starts
  empty: 10,000 partitions that never saw an idempotent producer cost no file each. A clean open
  that finds snapshots but can use none (torn, or above the log end after it cut a corrupt tail)
  replays the whole log instead, as Kafka's does when any snapshot file exists, and snapshots a
  state holding producers at the log end durably: a close of a log left untouched since writes
  none, and the next clean open, finding no file, would start empty.

One snapshot is kept per segment, at its base offset, and goes with it (retention, DeleteRecords,
truncation, compaction deleting an emptied segment; `stray_offsets`), plus the newest one when it
lies above the active segment's base (a close's, at the log end): a segment's snapshot is what
retention leaves of the producers of the segments below it, whatever their number. Truncation
deletes those above the new log end and rebuilds from what remains; retention deletes no state
(KIP-360: a producer idle past the log's retention keeps its sequence until
`producer.id.expiration.ms`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import NamedTuple

from samsa.common.record.codec import decode_batch, read_control_marker
from samsa.services.broker.log.checkpoint_file import (
    TEMP_SUFFIX,
    read_if_exists,
    write_all,
    write_atomically,
)
from samsa.services.broker.log.producer_snapshot_codec import decode_snapshot, encode_snapshot
from samsa.services.broker.log.producer_state import (
    NO_MARKER_TYPE,
    CompletedTransaction,
    CorruptSnapshotError,
    ProducerBatchInfo,
    ProducerStateTable,
)
from samsa.services.broker.log.segment import Segment, parse_base_offset, segment_path
from samsa.services.broker.log.transaction_index import AbortedTransaction, apply_batches

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"


def snapshot_offsets(names: Iterable[str]) -> list[int]:
    """The offsets of the snapshot files among a directory's file names, ascending."""
    found = (parse_base_offset(name, SNAPSHOT_SUFFIX) for name in names)
    return sorted(offset for offset in found if offset is not None)


def write_snapshot(
    directory: Path,
    offset: int,
    state: ProducerStateTable,
    *,
    durable: bool,
    unsettled: Sequence[CompletedTransaction] = (),
) -> None:
    """Write the state and the transactions ended below `offset` that the high watermark has
    not passed (`unsettled`) as `<offset>.snapshot`, atomically (temp file, rename); fsynced,
    with the directory, only when `durable`."""
    data = encode_snapshot(state, unsettled)
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


def stray_offsets(offsets: Sequence[int], base_offsets: Sequence[int]) -> list[int]:
    """The kept snapshots (`offsets`, ascending) that belong to no segment (`base_offsets`, the
    live ones, ascending): every one not at a segment's base, but the newest when it lies above
    the active segment's base (the state at the log end a close wrote)."""
    bases = set(base_offsets)
    strays = [offset for offset in offsets if offset not in bases]
    if strays and strays[-1] == offsets[-1] and strays[-1] > base_offsets[-1]:
        strays.pop()
    return strays


class Rebuilt(NamedTuple):
    """The producer state at the log end, and what the replay that rebuilt it passed over."""

    producers: ProducerStateTable
    replayed_from: int  # where the replay started (the log end when nothing was replayed)
    completed: list[CompletedTransaction]  # transactions markers ended in the replayed part
    aborted: list[tuple[int, AbortedTransaction]]  # (segment base offset, index entry)
    # The snapshots the replay wrote, without fsync, of a state holding producers.
    unsynced: tuple[int, ...] = ()
    # What the snapshot replayed from listed as ended below it and not yet settled.
    unsettled: tuple[CompletedTransaction, ...] = ()


def rebuild(
    directory: Path,
    offsets: list[int],
    segments: Sequence[Segment],
    *,
    empty_without_snapshot: bool,
    newest_usable: int | None = None,
    high_watermark: int = 0,
    clock_ms: int,
) -> Rebuilt:
    """The producer state at the log end: the newest readable snapshot at or below it (those
    above it, or unreadable, are deleted from `offsets` and the directory), then a replay of the
    batches after it, which snapshots the state at each segment base it passes (so each segment
    keeps one). With no snapshot file at all, `empty_without_snapshot` (a clean open: close keeps
    a snapshot whenever the state is not empty) starts empty; otherwise the whole log is replayed
    (for a clean open, with a durable snapshot at the log end: the module docstring says why).
    `newest_usable` deletes the snapshots above it too: after an unclean stop the replay must
    start at or below the recovery point, as Kafka's recovery of each unflushed segment starts
    from the snapshot at or below its base, so that it rebuilds the transaction index entries a
    crash may have lost above it (transaction_log_state.py), and below a segment whose index
    file was cut, clean shutdown or not; the snapshots it deleted are written again as the
    replay passes their offsets. The snapshots the replay writes list the transactions ended
    at or above `high_watermark` (the partition's, as last known) as unsettled. `clock_ms` (the
    open's clock, or the latest a truncated state was given) is the append time of the batches
    replayed and of the entries of a snapshot older than version 4: at or after their true one,
    so that their age reads young, never old (producer_entry.py)."""
    log_end_offset = segments[-1].next_offset
    found_snapshot = bool(offsets)
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
            state, unsettled = decode_snapshot(data or b"", loaded_ms=clock_ms)
        except CorruptSnapshotError as error:
            log.warning(
                "producer-state snapshot unreadable; using an older one",
                extra={"directory": str(directory), "offset": offset, "error": str(error)},
            )
            delete_snapshots(directory, [offset])
            offsets.remove(offset)
            continue
        # After an unclean stop the snapshot replayed from may be one a roll wrote at the
        # recovery point after the flush that set it, unsynced, which only the dead process knew.
        unsynced = (offset,) if newest_usable is not None and len(state) else ()
        start = _Start(offset, clock_ms, unsettled, unsynced)
        return _replayed(directory, offsets, state, segments, start, high_watermark)
    state = ProducerStateTable()
    if empty_without_snapshot and not found_snapshot:
        return Rebuilt(state, log_end_offset, [], [])
    start = _Start(segments[0].base_offset, clock_ms)
    rebuilt = _replayed(directory, offsets, state, segments, start, high_watermark)
    if empty_without_snapshot and len(state):
        # A clean open that could use none of the snapshots it found (module docstring).
        unsettled = [t for t in rebuilt.completed if t.last_offset >= high_watermark]
        write_snapshot(directory, log_end_offset, state, durable=True, unsettled=unsettled)
        if log_end_offset not in offsets:
            offsets.append(log_end_offset)
        unsynced = tuple(o for o in rebuilt.unsynced if o != log_end_offset)
        return rebuilt._replace(unsynced=unsynced)
    return rebuilt


class _Start(NamedTuple):
    """Where `rebuild`'s replay starts: the offset, the append time the replay gives, what the
    snapshot there lists as unsettled, and that snapshot's offset when it may be unsynced."""

    offset: int
    clock_ms: int
    unsettled: tuple[CompletedTransaction, ...] = ()
    unsynced: tuple[int, ...] = ()


def _replayed(
    directory: Path,
    offsets: list[int],
    state: ProducerStateTable,
    segments: Sequence[Segment],
    start: _Start,
    high_watermark: int,
) -> Rebuilt:
    """`rebuild`'s replay from `start` (every kept snapshot is at or below it), writing a
    snapshot without fsync at each later segment base and adding it to `offsets`; each lists
    the transactions ended below it and at or above `high_watermark` (in marker order, each
    looked at once: a long replay must not write every transaction it met into each one)."""
    unsynced = list(start.unsynced)
    unsettled = [t for t in start.unsettled if t.last_offset >= high_watermark]
    seen = 0  # how many of the replay's ended transactions `unsettled` took in

    def snapshot(base_offset: int, completed: list[CompletedTransaction]) -> None:
        nonlocal seen
        unsettled.extend(t for t in completed[seen:] if t.last_offset >= high_watermark)
        seen = len(completed)
        write_snapshot(directory, base_offset, state, durable=False, unsettled=unsettled)
        offsets.append(base_offset)
        if len(state):
            unsynced.append(base_offset)

    completed, aborted = replay(
        state, segments, start.offset, now_ms=start.clock_ms, on_segment=snapshot
    )
    return Rebuilt(state, start.offset, completed, aborted, tuple(unsynced), tuple(start.unsettled))


def replay(
    state: ProducerStateTable,
    segments: Sequence[Segment],
    from_offset: int,
    *,
    now_ms: int,
    on_segment: Callable[[int, list[CompletedTransaction]], None] | None = None,
) -> tuple[list[CompletedTransaction], list[tuple[int, AbortedTransaction]]]:
    """Apply the header of every idempotent batch at or after `from_offset`, as appended at
    `now_ms` (reads headers, and the one record of each marker, for its type); returns the
    transactions ended and the aborted ones' index entries with the base offset of the segment
    holding their marker. `on_segment` is told each segment base above `from_offset` before its
    batches are applied, with the transactions ended so far."""
    completed: list[CompletedTransaction] = []
    aborted: list[tuple[int, AbortedTransaction]] = []
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        if on_segment is not None and segment.base_offset > from_offset:
            on_segment(segment.base_offset, completed)
        applied = apply_batches(
            state,
            (header for header in segment.headers_from(from_offset) if header.producer_id >= 0),
            partial(_marker_type, segment),
            now_ms,
        )
        completed += applied.completed
        aborted += [(segment.base_offset, entry) for entry in applied.aborted]
    return completed, aborted


def _marker_type(segment: Segment, header: ProducerBatchInfo) -> int:
    found = segment.find_batch(header.base_offset)
    if found is None:
        return NO_MARKER_TYPE
    position, stored = found
    data = segment.read_bytes(position, stored.size_bytes)
    marker_type, _ = read_control_marker(decode_batch(data, verify_crc=False))
    return marker_type
