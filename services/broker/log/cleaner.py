"""The cleaner: compacting a log's closed segments and swapping the rewritten ones in.

Theory of operation (Kafka's LogCleaner, simplified; the per-batch rules are compaction.py's).
`clean` runs over the closed segments wholly below the cleanable end only (the active one is
untouched; the caller passes the last stable offset, which is at or below the high watermark, as
Kafka bounds its cleaner: a committed record must never be removed for a newer record of its key
that a leader change may still truncate away, which would leave this replica without either), in
two passes: it
builds the key map (each key's newest offset) from every batch of those segments, then rewrites
each segment keeping the survivors (`Segment.write_cleaned` writes them to a `.cleaned` file). A
segment that lost nothing keeps its file and the cleaned copy is discarded; a segment that lost
everything is deleted and dropped from the log's lists; any other is swapped in crash-safely
(`Segment.swap_cleaned`; an interrupted swap is finished or undone when the log is loaded).
Offsets never change, so the lists of base offsets stay sorted.

`Log.compact` (log.py) passes its segment and base-offset lists, which `clean` edits in place,
after making the clean-shutdown marker's removal durable. This module only calls methods on
`Segment` objects and must not import log.py. It runs inline on the caller's thread.

The first pass also decides which COMMIT markers go (compaction.RemovableMarkers): it sees the log
as the previous pass left it, so a marker goes only once an earlier pass removed its records.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import TYPE_CHECKING, NamedTuple

from samsa.common.record.header import read_header
from samsa.services.broker.log.compaction import (
    NO_ABORTED,
    AbortedRanges,
    CleaningRules,
    RemovableMarkers,
    compact_batch,
    update_key_map,
)

if TYPE_CHECKING:
    from samsa.services.broker.log.segment import Segment


class CompactionResult(NamedTuple):
    segments_cleaned: int
    segments_deleted: int
    records_removed: int  # data records; markers are counted apart
    markers_removed: int
    bytes_before: int
    bytes_after: int


def clean(
    segments: list[Segment],
    base_offsets: list[int],
    *,
    cleanable_end: int,
    delete_retention_ms: int,
    now_ms: int,
    keep_whole: Container[int] = (),
    aborted: AbortedRanges = NO_ABORTED,
) -> CompactionResult:
    """Keep the newest record per key in the closed segments wholly below `cleanable_end` (never
    the last of `segments`), remove the `aborted` transactions' batches and the COMMIT markers
    that are no longer needed; the batches whose base offsets are in `keep_whole` stay as they
    are."""
    closed = [
        segment
        for segment, next_base in zip(segments, base_offsets[1:], strict=False)
        if next_base <= cleanable_end
    ]
    key_map: dict[bytes, int] = {}
    markers = RemovableMarkers(now_ms=now_ms, delete_retention_ms=delete_retention_ms)
    for segment in closed:
        for _, batch in segment.iter_batches():
            update_key_map(key_map, batch, aborted)
            markers.see(batch)
    rules = CleaningRules(
        key_map,
        now_ms,
        delete_retention_ms,
        keep_whole,
        aborted,
        markers.offsets(),
    )
    cleaned = deleted = removed = markers_removed = bytes_before = bytes_after = 0
    for segment in closed:
        bytes_before += segment.size_bytes
        counter = [0, 0]
        survivors = _survivors(segment, rules, counter)
        indexes = segment.write_cleaned(survivors)
        removed += counter[0]
        markers_removed += counter[1]
        if counter == [0, 0]:
            segment.discard_cleaned()
        elif indexes.size_bytes == 0:
            segment.discard_cleaned()
            index = segments.index(segment)
            del segments[index], base_offsets[index]
            segment.delete()
            deleted += 1
            continue
        else:
            segment.swap_cleaned(indexes)
            cleaned += 1
        bytes_after += segment.size_bytes
    return CompactionResult(cleaned, deleted, removed, markers_removed, bytes_before, bytes_after)


def _survivors(segment: Segment, rules: CleaningRules, removed: list[int]) -> Iterator[bytes]:
    """The segment's batches as compaction leaves them; counts removed data records in
    `removed[0]` and removed markers in `removed[1]`."""
    for raw, batch in segment.iter_batches():
        kept = compact_batch(raw, batch, rules)
        if kept is None and batch.header.is_control:
            removed[1] += 1
            continue
        kept_count = 0 if kept is None else read_header(kept).record_count
        removed[0] += batch.header.record_count - kept_count
        if kept is not None:
            yield kept
