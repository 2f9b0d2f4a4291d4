"""Retention and DeleteRecords: which of a log's oldest segments go, and taking them off its front.

Theory of operation (Kafka's UnifiedLog retention, over LocalLog's segments). Only whole segments
are ever deleted, oldest first, and retention only those wholly below the partition's high watermark
(the caller's: `Log` does not keep it). `retention_count` asks policy.py how many segments are past
retention.ms / retention.bytes or wholly below the log start offset; that count may take in the
active segment (when it holds records, all committed and expired), and then `LogTruncation` rolls a
new empty active segment at the log end before it deletes them. `segments_below` counts those wholly
below a DeleteRecords offset (a segment is wholly below `offset` when the next segment starts at or
before it). `LocalLog.delete_oldest` (local_log.py) deletes that many segments, and `LogTruncation`
moves the log start offset past them (never below the new first segment's base offset).

`LogTruncation` (log_truncation.py) passes its LocalLog's segment and base-offset lists, which this
module only reads, and does what makes a deletion durable: the clean-shutdown marker, the directory
fsync and the checkpoints. This module only reads `Segment` objects and must not import log.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.services.broker.log import policy
from samsa.services.broker.log.config import LogConfig

if TYPE_CHECKING:
    from samsa.services.broker.log.segment import Segment


def retention_count(
    segments: list[Segment],
    base_offsets: list[int],
    *,
    log_start_offset: int,
    high_watermark: int,
    config: LogConfig,
    now_ms: int,
) -> int:
    """How many of the oldest segments retention deletes (none above `high_watermark`): as many
    as there are segments when the active one goes too."""
    ends = [*base_offsets[1:], segments[-1].next_offset]
    stats = [
        policy.SegmentStats(s.base_offset, end, s.size_bytes, s.max_timestamp)
        for s, end in zip(segments, ends, strict=True)
    ]
    return policy.retention_deletable_count(
        stats[:-1],
        active=stats[-1],
        log_size_bytes=sum(segment.size_bytes for segment in segments),
        log_start_offset=log_start_offset,
        high_watermark=high_watermark,
        config=config,
        now_ms=now_ms,
    )


def segments_below(base_offsets: list[int], offset: int) -> int:
    """How many of the oldest segments lie wholly below `offset` (never the active one)."""
    count = 0
    while count + 1 < len(base_offsets) and base_offsets[count + 1] <= offset:
        count += 1
    return count
