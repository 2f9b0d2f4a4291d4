"""A partition log's segments (Kafka's LocalLog): the open segments and everything done to them.

Theory of operation. A log is a directory of segments (segment.py) sorted by base offset, the last
one active. `LocalLog` holds the `Segment` objects and, beside them, the sorted list of their base
offsets that lookups bisect; it is the only code that adds or drops a segment, and every method
that does edits both lists together.

Reads find the segment by bisect over the base offsets, the batch by the segment's sparse index, and
return stored batches as one bytes object; a read that starts in a gap compaction left at a
segment's end goes on to the next segment, but one reaching a segment's `unframed_tail` (corrupt
bytes loading kept) is refused with StorageError, as are appends to such an active segment and
timestamp look-ups that would need its records (never answered past them as if they were not there).
An append (validated and planned by append_info.py, all-or-nothing) goes to the active segment,
which writes the stamped bytes with one system call; when policy.py says so, the segment rolls
first: the active one is closed (its index files written, not fsynced) or, empty, deleted (a
follower's offset gap), and a new one is created at the append's first offset. Truncation deletes
whole later segments and cuts the last one kept: at an offset (replication) or at a byte position
(the scrubber's repair). Retention and DeleteRecords delete the oldest closed segments (retention.py
decides how many; retention that takes the active one too has it rolled at the log end first);
compaction (cleaner.py) deletes a closed segment it emptied. The scrubber reads closed segments as
they are now.

What makes each change durable is `Log`'s (log.py) and its other parts' (log_durability.py,
log_truncation.py, log_compaction.py): the clean-shutdown marker's removal before any change to the
files, fsyncs, checkpoints, and the producer state and transaction index that follow the log end.
This module knows none of it: they call it between those steps, and `Log` hears of each roll
through `on_roll`, after the new segment is created and before the append goes into it. The
config is passed to each call that needs it, since `Log.config` changes with the topic's config.

Invariants: there is always a segment, the last one active; `base_offsets[i]` is
`segments[i].base_offset` and base offsets strictly increase; segments are non-empty except
possibly the active one and the first one (compaction keeps an emptied first segment, so that the
log start offset stays where it is: cleaner.py); every batch of a segment lies below the next
segment's base offset.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, NamedTuple

from samsa.common.errors import StorageError
from samsa.common.record.codec import decode_batch
from samsa.common.record.header import NO_TIMESTAMP
from samsa.services.broker.log import policy
from samsa.services.broker.log.segment import LOG_SUFFIX, Segment

if TYPE_CHECKING:
    from pathlib import Path

    from samsa.common.record.header import BatchHeader
    from samsa.services.broker.log.append_info import AppendPlan
    from samsa.services.broker.log.config import LogConfig


# A record's rank in a MAX_TIMESTAMP look-up, (-timestamp, offset): the smallest wins.
_Rank = tuple[int, int]
# How many time-index entries a MAX_TIMESTAMP look-up tries for a first record in range (the
# newest entries name markers and batches past the end first) before walking a whole segment.
_SEED_ATTEMPTS_MAX = 8


class SegmentInfo(NamedTuple):
    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp: int


class ReadResult(NamedTuple):
    """What `Log.read` returns; the next read starts at `next_offset` (see `LocalLog.read`)."""

    records: bytes
    first_offset: int
    next_offset: int
    log_start_offset: int
    log_end_offset: int


class LocalLog:
    """One log's open segments. `segments` and `base_offsets` are for reading: only this class's
    methods change them, both at once. Every method runs on the log's thread."""

    def __init__(
        self, directory: Path, segments: list[Segment], on_roll: Callable[[int], None]
    ) -> None:
        assert segments, "a log always has an active segment"
        self.directory = directory
        self.segments = segments
        self.base_offsets = [segment.base_offset for segment in segments]
        # Told the new segment's base offset at each roll, before the append goes into it.
        self._on_roll = on_roll

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    def segments_from(self, offset: int) -> list[Segment]:
        """The segment holding `offset` (the first one, below it) and every later one."""
        return self.segments[max(bisect_right(self.base_offsets, offset) - 1, 0) :]

    def base_offsets_from(self, offset: int) -> list[int]:
        """The base offsets of the segment holding `offset` and of every later one."""
        return self.base_offsets[max(bisect_right(self.base_offsets, offset) - 1, 0) :]

    def segment_infos(self) -> list[SegmentInfo]:
        """The segments, oldest first (for tests and tools)."""
        return [
            SegmentInfo(s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp)
            for s in self.segments
        ]

    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self.segments)

    # --- reading -------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, upper: int) -> tuple[bytes, int, int]:
        """(records, first offset, next offset): whole batches from the one holding
        `start_offset`, up to `max_bytes` (at least one whole batch), only those whose last
        offset is below `upper`. Without records the first offset is `start_offset`, and so is
        the next one, unless no batch lies at or after `start_offset` (then the log end)."""
        if start_offset < upper:
            for segment in self.segments_from(start_offset):
                found = segment.find_batch(start_offset)
                if found is None and segment.unframed_tail:
                    raise _unframed(segment)
                if found is None:
                    continue  # the offset is in a gap at this segment's end (compaction)
                position, header = found
                if header.last_offset >= upper:
                    break
                records, next_offset = segment.read_batches(position, header, max_bytes, upper)
                return records, header.base_offset, next_offset
            else:
                # No batch at or after start_offset: compaction emptied the log's tail, and
                # records only ever land at the end, so the reader may skip to it.
                return b"", start_offset, self.log_end_offset
        return b"", start_offset, start_offset

    def offset_for_timestamp(
        self, timestamp_ms: int, log_start_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `log_start_offset` whose
        timestamp is >= `timestamp_ms`. A search that reaches a segment's `unframed_tail`
        without an answer is refused with StorageError, as a read there is: its records'
        timestamps are unknown, and the next segment's answer could skip some."""
        for segment in self.segments_from(log_start_offset):
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_by_timestamp(timestamp_ms, log_start_offset)
                if found is not None:
                    return found
            if segment.unframed_tail:
                raise _unframed(segment)
        return None

    def max_timestamp_record(self, start: int, end: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp in [start, end), the
        lowest offset among equals, control batches aside (KIP-734); None when there is none.
        StorageError when an `unframed_tail` holds offsets in the range.

        A segment's max timestamp bounds its records', and a batch's header max its records':
        segments are visited by decreasing max and the visit stops at the first that cannot beat
        the best record found; inside one, only batches that can beat it are decoded."""
        if start >= end:
            return None
        best: _Rank | None = None
        segments = [s for s in self.segments_from(start) if s.base_offset < end]
        for segment in segments:  # unknown records in range: refused, as a read of them is
            if segment.unframed_tail and segment.next_offset < end:
                raise _unframed(segment)
        for segment in sorted(segments, key=_rank_bound):
            if best is not None and best <= _rank_bound(segment):
                break  # nor can any later one: they are sorted by that bound
            best = _best_in_segment(segment, start, end, best)
        return None if best is None else (best[1], -best[0])

    # --- appending -----------------------------------------------------------------------------

    def append(self, plan: AppendPlan, now_ms: int, config: LogConfig) -> int:
        """Write the planned batches to the active segment, rolling first when policy.py says
        so; returns the base offset of the segment they went to."""
        active = self.segments[-1]
        if active.unframed_tail:  # its end is unknown: no offset can be assigned after it
            raise _unframed(active)
        if active.first_append_ms is None and active.size_bytes:
            # Loaded (or cut by a truncation): its age counts from its first batch's timestamp,
            # as Kafka's LogSegment rolls by record time, or a broker restarted more often than
            # segment.ms would never roll it (nor retention delete it); the append below clamps
            # a timestamp ahead of the clock.
            first_timestamp = next(active.walk(0))[1].max_timestamp
            active.first_append_ms = first_timestamp if first_timestamp > NO_TIMESTAMP else None
        reason = policy.roll_reason(
            config,
            segment_base_offset=active.base_offset,
            segment_size_bytes=active.size_bytes,
            segment_first_append_ms=active.first_append_ms,
            append_size_bytes=plan.info.size_bytes,
            append_last_offset=plan.info.last_offset,
            append_batch_count=len(plan.batches),
            index_entries_room=active.indexes.entries_room(),
            now_ms=now_ms,
        )
        if reason is not None:
            active = self._roll(plan.info.first_offset, config.index_interval_bytes)
        active.append(plan.pieces, plan.batches, now_ms)
        return active.base_offset

    def roll_at_end(self, index_interval_bytes: int) -> None:
        """Close the active segment (it holds records) and start an empty one at the log end,
        so that retention can delete every segment that holds records."""
        assert self.segments[-1].size_bytes, "an empty active segment is not rolled"
        self._roll(self.log_end_offset, index_interval_bytes)

    def set_aside(self, base_offset: int, index_interval_bytes: int) -> None:
        """Roll the active segment when it is the one at `base_offset` holding a bad batch the
        open kept with its frame sound: appends then go to a new segment, and this one keeps
        the size its repair (`cut_at` after `can_cut_at`) expects. A frame that is not sound
        already refuses appends (its end is unknown), so it is left as it is."""
        active = self.segments[-1]
        if active.base_offset == base_offset and not active.unframed_tail:
            self._roll(self.log_end_offset, index_interval_bytes)

    def _roll(self, base_offset: int, index_interval_bytes: int) -> Segment:
        """Close the active segment and start a new one at `base_offset`."""
        active = self.segments[-1]
        if active.size_bytes == 0:  # nothing to keep: replace it (a follower's offset gap)
            active.delete()
            self.segments.pop()
            self.base_offsets.pop()
        else:
            active.indexes.on_roll()
            active.closed = True
            active.write_indexes(fsync=False)
        segment = Segment.create(self.directory, base_offset, index_interval_bytes)
        self.segments.append(segment)
        self.base_offsets.append(base_offset)
        self._on_roll(base_offset)
        return segment

    # --- truncation and deletion ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= `offset`: later segments are deleted whole, and
        a batch straddling `offset` goes whole. `offset` is at or above the first segment's base
        offset (below it, `truncate_fully_and_start_at`)."""
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self.base_offsets.pop()
        self.segments[-1].truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int, index_interval_bytes: int) -> None:
        """Delete every segment and start again with one empty segment at `offset`."""
        for segment in self.segments:
            segment.delete()
        segment = Segment.create(self.directory, offset, index_interval_bytes)
        self.segments, self.base_offsets = [segment], [offset]

    def can_cut_at(self, base_offset: int, size_bytes: int, position: int) -> bool:
        """The segment at `base_offset` is still there with `size_bytes` bytes, and `position`
        lies inside it (what `cut_at` needs)."""
        index = self._index_of(base_offset)
        segment = None if index is None else self.segments[index]
        return (
            segment is not None
            and segment.size_bytes == size_bytes
            and 0 <= position <= size_bytes - (not segment.unframed_tail)
        )

    def cut_at(self, base_offset: int, position: int) -> None:
        """Cut the segment at `base_offset` at byte `position` (`can_cut_at` said it may) and
        delete every later segment."""
        index = self._index_of(base_offset)
        assert index is not None, "the segment to cut is gone"
        while len(self.segments) > index + 1:
            self.segments.pop().delete()
            self.base_offsets.pop()
        self.segments[index].truncate_to_position(position)

    def delete_oldest(self, count: int) -> None:
        """Delete the `count` oldest segments (retention, DeleteRecords)."""
        assert 0 <= count < len(self.segments), "the active segment is never deleted"
        for segment in self.segments[:count]:
            segment.delete()
        del self.segments[:count]
        del self.base_offsets[:count]

    def closed_below(self, offset: int) -> list[Segment]:
        """The closed segments wholly below `offset` (what compaction may clean), up to the
        first with an unframed tail (a rewrite would keep only its framed part)."""
        closed = []
        for segment, next_base in zip(self.segments, self.base_offsets[1:], strict=False):
            if next_base > offset or segment.unframed_tail:
                break
            closed.append(segment)
        return closed

    def remove_segment(self, segment: Segment) -> None:
        """Delete `segment`, a closed segment compaction emptied."""
        index = self.segments.index(segment)
        del self.segments[index], self.base_offsets[index]
        segment.delete()

    # --- scrubbing (scrub.py decides, services/broker/scrubber.py drives) -----------------------

    def closed_segments(self) -> list[tuple[int, int, int]]:
        """(base_offset, next segment's base offset, size_bytes) of each closed segment."""
        return [
            (segment.base_offset, next_base, segment.size_bytes)
            for segment, next_base in zip(self.segments[:-1], self.base_offsets[1:], strict=True)
        ]

    def read_closed_segment(
        self, base_offset: int, size_bytes: int, position: int, length: int
    ) -> bytes | None:
        """Up to `length` bytes at `position` of the closed segment at `base_offset`, read from
        the file as it is now; None when that segment is gone or changed size."""
        index = self._index_of(base_offset)
        if index is None or index + 1 >= len(self.segments):
            return None
        segment = self.segments[index]
        if segment.size_bytes != size_bytes:
            return None
        return segment.read_bytes(position, max(0, min(length, size_bytes - position)))

    def _index_of(self, base_offset: int) -> int | None:
        """Where the segment whose base offset is `base_offset` is, or None when there is none."""
        index = bisect_right(self.base_offsets, base_offset) - 1
        if index < 0 or self.base_offsets[index] != base_offset:
            return None
        return index

    # --- persisting, closing -------------------------------------------------------------------

    def write_indexes(self, *, fsync: bool) -> None:
        """Bring every segment's index files up to date (fsynced when asked)."""
        for segment in self.segments:
            segment.write_indexes(fsync=fsync)

    def close(self) -> None:
        """Close every segment's file descriptor; nothing is written."""
        for segment in self.segments:
            segment.close()


def _unframed(segment: Segment) -> StorageError:
    return StorageError(
        f"{segment.path(LOG_SUFFIX)}: offsets from {segment.next_offset} are unreadable here, the "
        f"bytes from position {segment.size_bytes} being corrupt at rest (kept until this "
        f"replica, marked corrupt, is out of the ISR and re-fetches them)"
    )


# --- MAX_TIMESTAMP (KIP-734) ----------------------------------------------------------------------


def _rank_bound(segment: Segment) -> _Rank:
    """No record of `segment` ranks better: none is newer than its max timestamp (the largest
    header max of its batches) nor below its base offset."""
    return -segment.max_timestamp, segment.base_offset


def _best_in_segment(segment: Segment, start: int, end: int, best: _Rank | None) -> _Rank | None:
    """The better of `best` and the best-ranked record of `segment` in [start, end).

    The batch that first reached the segment's max (its last offset is in the indexes) answers
    at once when it is a data batch holding a record of that max in the range: nothing in the
    segment is newer and no earlier batch reached that max. Otherwise a record of a batch a
    time-index entry names (the newest first) is a lower bound, the time index skips the
    batches wholly older than it, and the headers after say which batches to decode."""
    time_index = segment.indexes.time_index
    entries = zip(
        reversed(time_index.timestamps), reversed(time_index.relative_offsets), strict=True
    )
    named = [(segment.max_timestamp, segment.indexes.offset_of_max_timestamp)]
    named += islice(
        ((t, segment.base_offset + r) for t, r in entries if t < segment.max_timestamp),
        _SEED_ATTEMPTS_MAX,
    )
    seeded = -1  # the position of the batch that gave `best`, decoded already
    for attempt, (timestamp, last_offset) in enumerate(named):
        if last_offset < start or (best is not None and best <= (-timestamp, segment.base_offset)):
            break  # nor can any entry further down: older, and at lower offsets
        found = segment.find_batch(last_offset)
        if found is None or found[1].is_control or found[1].base_offset >= end:
            continue
        record = _best_in_batch(segment, *found, start, end)
        if record is None:
            continue
        best, seeded = record if best is None else min(best, record), found[0]
        if attempt == 0 and found[1].last_offset == last_offset and record[0] == -timestamp:
            return best
        break
    # Every record before what the time index answers is older than `best`.
    older = 0 if best is None else time_index.lookup(-best[0])
    found = segment.find_batch(max(start, segment.base_offset + older))
    if found is None:
        return best
    candidates = []
    for position, header in segment.walk(found[0]):
        if header.base_offset >= end:
            break
        bound = (-header.max_timestamp, header.base_offset)  # no record of the batch ranks better
        if header.is_control or header.last_offset < start or position == seeded:
            continue
        if best is None or bound < best:
            candidates.append((bound, position, header))
    candidates.sort(key=lambda candidate: candidate[0])
    for bound, position, header in candidates:
        if best is not None and best <= bound:
            break  # nor can any later one: they are sorted by that bound
        record = _best_in_batch(segment, position, header, start, end)
        if record is not None and (best is None or record < best):
            best = record
    return best


def _best_in_batch(
    segment: Segment, position: int, header: BatchHeader, start: int, end: int
) -> _Rank | None:
    """The best-ranked record of the batch at `position` among its offsets in [start, end)."""
    batch = decode_batch(segment.read_bytes(position, header.size_bytes))
    ranks = [
        (-timestamp, offset)
        for offset, timestamp in zip(batch.offsets(), batch.timestamps(), strict=True)
        if start <= offset < end
    ]
    return min(ranks, default=None)
