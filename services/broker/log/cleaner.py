"""The cleaner: compacting a log's closed segments off the log's thread, then swapping them in.

Theory of operation (Kafka's LogCleaner, simplified; the per-batch rules are compaction.py's).
A pass is a `CleaningJob` in three steps, so that the slow part never runs on the broker's event
loop (a pass reads and rewrites every closed segment: seconds for a large partition, during which
the loop would answer no produce, fetch or replica fetch):

1. `CleaningJob.plan` (on the log's thread, by `Log.plan_compaction`) takes the closed segments
   wholly below the cleanable end (the active one is never touched; the caller passes the last
   stable offset, which is at or below the high watermark, as Kafka bounds its cleaner: a
   committed record must never be removed for a newer record of its key that a leader change
   may still truncate away, which would leave this replica without either), with a duplicate
   of each one's file descriptor, its size and its version, plus what the pass keeps whole
   and the aborted transactions.
2. `CleaningJob.run` (on any thread: the broker's cleaner task runs it in a worker thread)
   reads only through those descriptors and writes only `.cleaned` files. Its first pass builds
   the key map (each key's newest offset) and decides which COMMIT markers go
   (compaction.RemovableMarkers: it sees the log as the previous pass left it); its second
   writes each segment's survivors to X.log.cleaned (`Segment.write_cleaned`), noting when a pass
   is next due for what it kept only for its delete horizon (`Cleaned.due_ms`: a kept tombstone's
   horizon, delete.retention.ms after the pass that first cleaned it, a young emptied COMMIT
   marker's, or, for a transaction whose records it removed whole, its marker's earliest;
   `Log.compaction_due` reads it).
3. `finish` (on the log's thread, by `Log.finish_compaction`) applies the outcome only if every
   planned segment is still in the log, closed, at the same version: otherwise (retention,
   DeleteRecords, truncation or a scrubber repair got there first, or the log was closed) it
   discards every cleaned file and the next pass starts over. A segment that lost nothing keeps
   its file; one that lost everything is deleted and dropped from the log
   (`LocalLog.remove_segment`), unless it is the log's first segment; any other, and an emptied
   first one, is swapped in crash-safely (`Segment.swap_cleaned`; an interrupted swap is
   finished or undone when the log is loaded). Offsets never change, so the segments stay
   sorted. The log's first segment stays, empty, because the log start offset is never below
   the first segment's base offset (a restart or a retention pass would move it up): dropping
   it would move the log start past offsets compaction only emptied, and a consumer whose
   position is there would get OFFSET_OUT_OF_RANGE (and, with auto.offset.reset=latest, skip
   the records that survived). Kafka's cleaner keeps it the same way: it swaps each group of
   segments for one cleaned segment at the group's first base offset, empty or not.

Only one job per log runs at a time (the caller's loop is sequential). This module only calls
methods on `Segment` objects and on the log's `LocalLog` (local_log.py), and must not import
log.py.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from samsa.common.record.codec import RecordBatch
from samsa.common.record.header import read_header
from samsa.services.broker.log.compaction import (
    NEVER,
    NO_ABORTED,
    AbortedRanges,
    CleaningRules,
    RemovableMarkers,
    compact_batch,
    update_key_map,
)
from samsa.services.broker.log.delete_horizon import FirstCleaned
from samsa.services.broker.log.segment import iter_batches
from samsa.services.broker.log.segment_index import SegmentIndexes

if TYPE_CHECKING:
    from samsa.services.broker.log.local_log import LocalLog
    from samsa.services.broker.log.segment import Segment


class CompactionResult(NamedTuple):
    segments_cleaned: int
    segments_deleted: int
    records_removed: int  # data records; markers are counted apart
    markers_removed: int
    bytes_before: int
    bytes_after: int


NOTHING_CLEANED = CompactionResult(0, 0, 0, 0, 0, 0)


class CleaningCancelled(Exception):
    """The job was cancelled (the broker is stopping): nothing is swapped in."""


@dataclass(frozen=True)
class PlannedSegment:
    segment: Segment
    fd: int  # the job's own duplicate of the segment's descriptor
    size_bytes: int
    version: int


@dataclass
class CleanedSegment:
    """What `run` made of one planned segment: `indexes` of its .cleaned file, None when the
    segment lost nothing (no file kept)."""

    indexes: SegmentIndexes | None
    records_removed: int
    markers_removed: int


class Cleaned(NamedTuple):
    """What `run` made of the job: each planned segment's outcome, and when something it kept
    for delete.retention.ms (a tombstone, an emptied transaction's COMMIT marker, or a marker
    whose transaction this pass emptied) may go, so that a pass is due then (NEVER: nothing)."""

    segments: list[CleanedSegment]
    due_ms: int


@dataclass
class _Tally:
    """What the pass over one segment removed, and the earliest time a pass is due again."""

    records_removed: int = 0
    markers_removed: int = 0
    due_ms: int = NEVER


class CleaningJob:
    """One compaction pass over one log's closed segments (the module docstring's three steps)."""

    def __init__(
        self,
        planned: list[PlannedSegment],
        *,
        now_ms: int,
        delete_retention_ms: int,
        keep_whole: Container[int],
        aborted: AbortedRanges,
        first_cleaned: FirstCleaned,
    ) -> None:
        self.planned = planned
        # Where the pass ends: the next pass finds what was written since at or above it.
        self.cleaned_to = planned[-1].segment.next_offset
        self.now_ms = now_ms  # the pass's time: what it cleaned first was first cleaned then
        self._descriptors_open = True
        self._first_cleaned = first_cleaned
        self._delete_retention_ms = delete_retention_ms
        self._keep_whole = keep_whole
        self._aborted = aborted

    @classmethod
    def plan(
        cls,
        closed: list[Segment],
        *,
        now_ms: int,
        delete_retention_ms: int,
        keep_whole: Container[int] = (),
        aborted: AbortedRanges = NO_ABORTED,
        first_cleaned: FirstCleaned | None = None,
    ) -> CleaningJob | None:
        """The job over `closed`, the closed segments wholly below the cleanable end
        (`LocalLog.closed_below`), or None when there is none; `first_cleaned` is when earlier
        passes first cleaned each offset (None: never), the job's own copy. Call on the log's
        thread."""
        if not closed:
            return None
        planned = [
            PlannedSegment(segment, os.dup(segment.fd), segment.size_bytes, segment.version)
            for segment in closed
        ]
        return cls(
            planned,
            now_ms=now_ms,
            delete_retention_ms=delete_retention_ms,
            keep_whole=keep_whole,
            aborted=aborted,
            first_cleaned=first_cleaned or FirstCleaned(),
        )

    def run(self, cancel: threading.Event | None = None) -> Cleaned:
        """Both passes, reading only the job's descriptors and writing only .cleaned files;
        closes the descriptors. Raises CleaningCancelled when `cancel` is set, or whatever
        reading a segment cut under the job raised (`finish` then discards it all)."""
        try:
            rules, due_ms = self._rules(cancel)
            tallies = [_Tally(due_ms=due_ms) for _ in self.planned]
            segments = [
                self._clean(planned, rules, tally, cancel)
                for planned, tally in zip(self.planned, tallies, strict=True)
            ]
            return Cleaned(segments, min(tally.due_ms for tally in tallies))
        finally:
            self.close()

    def close(self) -> None:
        """Close the job's descriptors: `run` does, a job that never runs must."""
        if self._descriptors_open:
            self._descriptors_open = False
            for planned in self.planned:
                os.close(planned.fd)

    def discard(self) -> None:
        """Remove every .cleaned file the job may have written."""
        for planned in self.planned:
            planned.segment.discard_cleaned()

    def _batches(
        self, planned: PlannedSegment, cancel: threading.Event | None
    ) -> Iterator[tuple[bytes, RecordBatch]]:
        for raw, batch in iter_batches(planned.fd, planned.size_bytes):
            if cancel is not None and cancel.is_set():
                raise CleaningCancelled
            yield raw, batch

    def _rules(self, cancel: threading.Event | None) -> tuple[CleaningRules, int]:
        """The first pass: the rules for the second, and when the youngest emptied COMMIT
        marker it keeps is old enough to go."""
        key_map: dict[bytes, int] = {}
        markers = RemovableMarkers(
            now_ms=self.now_ms, delete_retention_ms=self._delete_retention_ms
        )
        for planned in self.planned:
            for _, batch in self._batches(planned, cancel):
                update_key_map(key_map, batch, self._aborted)
                markers.see(batch)
        rules = CleaningRules(
            key_map,
            self.now_ms,
            self._delete_retention_ms,
            self._keep_whole,
            self._aborted,
            markers.offsets(),
            self._first_cleaned,
        )
        return rules, markers.young_until_ms

    def _clean(
        self,
        planned: PlannedSegment,
        rules: CleaningRules,
        tally: _Tally,
        cancel: threading.Event | None,
    ) -> CleanedSegment:
        indexes = planned.segment.write_cleaned(
            _survivors(self._batches(planned, cancel), rules, tally)
        )
        if tally.records_removed == tally.markers_removed == 0:
            planned.segment.discard_cleaned()
            return CleanedSegment(None, 0, 0)
        return CleanedSegment(indexes, tally.records_removed, tally.markers_removed)


def finish(job: CleaningJob, cleaned: Cleaned, local_log: LocalLog) -> CompactionResult | None:
    """Swap the job's cleaned segments into `local_log`'s; None, having discarded them all, when
    any planned segment changed since `plan`. Call on the log's thread."""
    if not _unchanged(job.planned, local_log.segments):
        job.discard()
        return None
    cleaned_count = deleted = removed = markers_removed = bytes_before = bytes_after = 0
    for planned, outcome in zip(job.planned, cleaned.segments, strict=True):
        segment = planned.segment
        bytes_before += segment.size_bytes
        removed += outcome.records_removed
        markers_removed += outcome.markers_removed
        if outcome.indexes is None:
            pass
        elif outcome.indexes.size_bytes == 0 and segment is not local_log.segments[0]:
            segment.discard_cleaned()
            local_log.remove_segment(segment)
            deleted += 1
            continue
        else:
            segment.swap_cleaned(outcome.indexes)
            cleaned_count += 1
        bytes_after += segment.size_bytes
    return CompactionResult(
        cleaned_count, deleted, removed, markers_removed, bytes_before, bytes_after
    )


def _unchanged(planned: list[PlannedSegment], segments: list[Segment]) -> bool:
    """Every planned segment is still one of the log's closed segments, as it was planned."""
    closed = {id(segment) for segment in segments[:-1]}
    return all(
        id(p.segment) in closed
        and p.segment.closed
        and p.segment.version == p.version
        and p.segment.size_bytes == p.size_bytes
        for p in planned
    )


def _survivors(
    batches: Iterator[tuple[bytes, RecordBatch]], rules: CleaningRules, tally: _Tally
) -> Iterator[bytes]:
    """The batches as compaction leaves them, counted in `tally`, with when a pass is due
    again: when a tombstone kept here may go (delete.retention.ms after the pass that first
    cleaned it), or (a transaction's records removed whole, so its COMMIT marker may go on the
    next pass) once that marker can be delete.retention.ms old."""
    for raw, batch in batches:
        header = batch.header
        kept = compact_batch(raw, batch, rules)
        if header.is_control:
            tally.markers_removed += kept is None
            if kept is not None:
                yield kept
            continue
        if kept is None:
            tally.records_removed += header.record_count
            if header.is_transactional:
                marker_old_enough = header.max_timestamp + rules.delete_retention_ms
                tally.due_ms = min(tally.due_ms, max(marker_old_enough, rules.now_ms))
            continue
        tally.records_removed += header.record_count - read_header(kept).record_count
        if None in batch.values:
            tombstone_horizon = rules.tombstone_horizon_ms(header)
            if tombstone_horizon > rules.now_ms:  # a tombstone kept until its horizon
                tally.due_ms = min(tally.due_ms, tombstone_horizon)
        yield kept
