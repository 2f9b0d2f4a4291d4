"""Pure decisions of the partition log: when to roll, what retention deletes, when to flush.

Theory of operation. The log asks these functions and does what they answer; they read only their
arguments (sizes, offsets, timestamps, the config and `now_ms`), so each rule is tested with
numbers. Kafka's arithmetic is kept where it is observable:

- roll (Kafka's LogSegment.shouldRoll): the active segment is replaced by a new one when the
  append would push it past `segment.bytes`, when it is older than `segment.ms` (measured from
  its first append; after a restart, from its first batch's timestamp), when the append's
  offsets would not fit a 32-bit relative offset, or when an index has no room left. An empty
  segment is never rolled for size or age.
- retention (Kafka's deleteOldSegments): always a prefix (oldest first). By time, a segment goes
  when now_ms - its max timestamp > retention.ms; by size, while the log minus the segment still
  holds at least retention.bytes; and any closed segment wholly below the log start offset. The
  first two apply only with cleanup.policy containing "delete", and reach the active segment too
  when it holds records, all of them committed: a partition written once and then left idle loses
  its records after retention.ms as in Kafka, instead of keeping them until an append rolls its
  segment (the log rolls a new empty active segment at its end before it deletes them all). A
  segment whose records carry no timestamp (max timestamp -1) never expires by time (Kafka falls
  back to the file's mtime; a pure core has no clock to compare it with, and a file time is not a
  record time). An empty closed segment (the log's first one, which compaction emptied and kept so
  that the log start stays: cleaner.py) is never deleted by time or size on its own, and never stops
  either: it goes with the first segment after it that expires.
- flush: when flush.messages records are unflushed, or flush.ms passed since the last flush.
- compaction (Kafka's min.cleanable.dirty.ratio): the broker's cleaner compacts a log when the
  bytes written since its last pass (the closed, cleanable segments at or above where that pass
  ended) are at least that share of all its cleanable bytes, or when something the last pass
  kept for delete.retention.ms (a tombstone, an emptied transaction's COMMIT marker) may go. A
  log with nothing new and nothing due costs nothing.

Invariants: `retention_deletable_count` returns a prefix length, counts the active segment only
when it is not empty and wholly below the high watermark, and never by the log start offset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from samsa.common import limits
from samsa.common.record.header import NO_TIMESTAMP
from samsa.services.broker.log.config import LogConfig

ROLL_SIZE = "segment.bytes"
ROLL_TIME = "segment.ms"
ROLL_OFFSET_OVERFLOW = "relative offset overflow"
ROLL_INDEX_FULL = "index full"


class SegmentStats(NamedTuple):
    """What retention needs to know about one closed segment."""

    base_offset: int
    end_offset: int  # exclusive: the next segment's base offset
    size_bytes: int
    max_timestamp: int


def roll_reason(
    config: LogConfig,
    *,
    segment_base_offset: int,
    segment_size_bytes: int,
    segment_first_append_ms: int | None,
    append_size_bytes: int,
    append_last_offset: int,
    append_batch_count: int,
    index_entries_room: int,
    now_ms: int,
) -> str | None:
    """Why the active segment must roll before this append, or None to append to it."""
    if append_last_offset - segment_base_offset > limits.segment_relative_offset_max:
        return ROLL_OFFSET_OVERFLOW
    if segment_size_bytes == 0:
        return None
    if segment_size_bytes > config.segment_bytes - append_size_bytes:
        return ROLL_SIZE
    if segment_first_append_ms is not None and (
        now_ms - segment_first_append_ms > config.segment_ms
    ):
        return ROLL_TIME
    if append_batch_count > index_entries_room:
        return ROLL_INDEX_FULL
    return None


def retention_deletable_count(
    closed_segments: Sequence[SegmentStats],
    *,
    active: SegmentStats | None = None,
    log_size_bytes: int,
    log_start_offset: int,
    high_watermark: int,
    config: LogConfig,
    now_ms: int,
) -> int:
    """How many of the oldest segments retention deletes (a prefix length).

    `active` is the active segment's stats (its end the log end offset): a count of
    len(closed_segments) + 1 means every segment goes, the active one too, and the caller rolls a
    new empty one at the log end first (Kafka's deleteSegments). `log_size_bytes` counts every
    segment, the active one included (Kafka's `size`). Only segments wholly below the high
    watermark go, as in Kafka: a segment of records a follower has not replicated yet (or, on a
    follower, that the leader has not committed) stays until they are committed, whatever their
    timestamps, so retention never moves the log start past the high watermark (and an acks=all
    write is never answered for records already deleted).
    """
    segments = [*closed_segments] if active is None else [*closed_segments, active]
    by_start = _prefix(closed_segments, lambda stats: stats.end_offset <= log_start_offset)
    by_time = by_size = 0
    if config.delete and config.retention_ms >= 0:
        by_time = _prefix(
            segments,
            lambda stats: (
                stats.max_timestamp > NO_TIMESTAMP
                and now_ms - stats.max_timestamp > config.retention_ms
            ),
            empty_goes_with_next=True,
        )
    if config.delete and config.retention_bytes >= 0:
        excess_bytes = log_size_bytes - config.retention_bytes
        for index, stats in enumerate(segments):
            if stats.size_bytes == 0:
                continue
            if excess_bytes - stats.size_bytes < 0:
                break
            excess_bytes -= stats.size_bytes
            by_size = index + 1
    committed = _prefix(segments, lambda stats: stats.end_offset <= high_watermark)
    return min(max(by_start, by_time, by_size), committed)


def _prefix(
    segments: Sequence[SegmentStats],
    deletable: Callable[[SegmentStats], bool],
    *,
    empty_goes_with_next: bool = False,
) -> int:
    """The length of the longest prefix of `deletable` segments; with `empty_goes_with_next`,
    an empty segment is skipped over and counted only with a deletable one after it."""
    count = 0
    for index, stats in enumerate(segments):
        if empty_goes_with_next and stats.size_bytes == 0:
            continue
        if not deletable(stats):
            break
        count = index + 1
    return count


def should_flush(
    config: LogConfig, *, unflushed_records: int, last_flush_ms: int, now_ms: int
) -> bool:
    """True when flush.messages records wait unflushed or flush.ms passed since the last flush."""
    if unflushed_records <= 0:
        return False
    if unflushed_records >= config.flush_messages:
        return True
    return now_ms - last_flush_ms >= config.flush_ms


def compaction_due(
    closed: Sequence[tuple[int, int]],
    *,
    cleaned_to: int,
    dirty_ratio: float,
    due_ms: int,
    now_ms: int,
) -> bool:
    """Whether to compact: `closed` is (base offset, size in bytes) of each closed segment wholly
    below the cleanable end, `cleaned_to` where the last pass ended (0 before the first), and
    `due_ms` when the earliest thing that pass kept for its delete horizon may go."""
    total = sum(size for _, size in closed)
    if total == 0:
        return False
    dirty = sum(size for base_offset, size in closed if base_offset >= cleaned_to)
    return (dirty > 0 and dirty >= dirty_ratio * total) or now_ms >= due_ms
