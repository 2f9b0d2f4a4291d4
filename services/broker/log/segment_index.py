"""What a segment knows about its batches besides their bytes: both indexes and running stats.

Theory of operation. `SegmentIndexes` is fed every batch a segment holds, in order, through
`on_batch` — by the append path as batches are written and by the recovery scan as batches are
re-read — so an index rebuilt from the log is entry for entry the index the appends built. The
rule, per batch (Kafka's LogSegment.append, per batch rather than per append):

1. if the batch's max timestamp beats the segment's, remember it and the batch's last offset;
2. if at least `index.interval.bytes` were appended since the last offset-index entry, add an
   offset-index entry (batch base offset, batch position) and, when the max timestamp grew since
   the last time-index entry, a time-index entry (max timestamp, its offset);
3. count the batch's bytes and advance next_offset past its last offset.

`on_roll` adds the final time-index entry when the segment stops being active, so the last
time-index entry of a closed segment is its max timestamp. `restore` rebuilds the running stats of
a segment whose index files were loaded, from the batches after its last offset-index entry.

Invariants: size_bytes is the end of the last whole batch; base_offset <= next_offset; each batch
starts at or after next_offset; (max_timestamp, offset_of_max_timestamp) describe the batch that
first reached the largest timestamp (NO_TIMESTAMP, -1 while none); last_batch_position and
last_batch_base_offset describe the batch that ends at size_bytes (-1, -1 while none).
"""

from __future__ import annotations

from collections.abc import Iterable

from samsa.common import limits
from samsa.common.record.header import NO_TIMESTAMP, BatchHeader
from samsa.services.broker.log import offset_index, time_index
from samsa.services.broker.log.offset_index import OffsetIndex
from samsa.services.broker.log.time_index import TimeIndex


class SegmentIndexes:
    """The offset and time indexes of one segment plus the stats they are derived from."""

    __slots__ = (
        "base_offset",
        "bytes_since_index_entry",
        "index_interval_bytes",
        "last_batch_base_offset",
        "last_batch_position",
        "max_timestamp",
        "next_offset",
        "offset_index",
        "offset_of_max_timestamp",
        "size_bytes",
        "time_index",
    )

    def __init__(self, base_offset: int, index_interval_bytes: int) -> None:
        assert base_offset >= 0 and index_interval_bytes >= 0
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.offset_index = OffsetIndex()
        self.time_index = TimeIndex()
        self.size_bytes = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.bytes_since_index_entry = 0
        # Where the newest batch starts and its base offset (-1 while there is none): a fetch
        # caught up with the log reads exactly this batch, and finds it without a walk.
        self.last_batch_position = -1
        self.last_batch_base_offset = -1

    def entries_room(self) -> int:
        """How many more batches can be indexed before either index is full."""
        return min(
            offset_index.ENTRIES_MAX - len(self.offset_index),
            time_index.ENTRIES_MAX - len(self.time_index) - 1,  # the final entry on roll
        )

    def relative(self, offset: int) -> int:
        relative_offset = offset - self.base_offset
        assert 0 <= relative_offset <= limits.segment_relative_offset_max
        return relative_offset

    def on_batch(
        self, position: int, base_offset: int, last_offset: int, max_timestamp: int, size_bytes: int
    ) -> None:
        """Account for one whole batch written at `position` (see the module rule)."""
        assert position == self.size_bytes, "batches are indexed in file order"
        assert base_offset >= self.next_offset and last_offset >= base_offset
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        # An index with no room left (one append of more batches than it holds, which no roll
        # can split: index.interval.bytes=0) stays sparser: lookups walk further, nothing else.
        if self.bytes_since_index_entry >= self.index_interval_bytes and self.entries_room() > 0:
            self.offset_index.append(self.relative(base_offset), position)
            if self.max_timestamp > NO_TIMESTAMP:
                self.time_index.maybe_append(
                    self.max_timestamp, self.relative(self.offset_of_max_timestamp)
                )
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size_bytes
        self.last_batch_position = position
        self.last_batch_base_offset = base_offset
        self.size_bytes += size_bytes
        self.next_offset = last_offset + 1

    def on_roll(self) -> None:
        """The segment stops being active: index its max timestamp (Kafka's final entry)."""
        if self.max_timestamp > NO_TIMESTAMP:
            self.time_index.maybe_append(
                self.max_timestamp, self.relative(self.offset_of_max_timestamp)
            )

    def restore(self, tail: Iterable[tuple[int, BatchHeader]], size_bytes: int) -> None:
        """Recompute the running stats from loaded indexes and the `tail` batches.

        `tail` is every (position, header) from the last offset-index entry's position (0 when
        the index is empty) to `size_bytes`. Everything before that position is summarised by
        the indexes: the last time-index entry is the max timestamp of the batches up to it.
        Time-index entries past the last batch (left by a truncation) are dropped first.
        """
        batches = list(tail)
        entry_position = self.offset_index.last_entry()[1]
        end = entry_position
        self.next_offset = self.base_offset
        self.last_batch_position = self.last_batch_base_offset = -1
        for position, header in batches:
            assert position == end, "the tail is contiguous"
            self.next_offset = header.next_offset
            self.last_batch_position, self.last_batch_base_offset = position, header.base_offset
            end = position + header.size_bytes
        assert end == size_bytes, "the tail ends at the end of the segment"
        self.time_index.truncate_to_relative_offset(self.next_offset - self.base_offset)
        timestamp, relative_offset = self.time_index.last_entry()
        self.max_timestamp = timestamp
        self.offset_of_max_timestamp = -1
        if timestamp > NO_TIMESTAMP:
            self.offset_of_max_timestamp = self.base_offset + relative_offset
        for _, header in batches:
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        self.size_bytes = size_bytes
        self.bytes_since_index_entry = size_bytes - entry_position

    def truncate_to_position(self, position: int) -> None:
        """Drop the offset-index entries of batches at or after `position` (the log was cut
        there); the caller then walks the new tail and calls `restore_after_truncation`."""
        self.offset_index.truncate_to_position(position)

    def restore_after_truncation(
        self, tail: list[tuple[int, BatchHeader]], size_bytes: int
    ) -> None:
        """`restore`, after also dropping the time-index entries made at the removed index
        points (and a final one): every such entry names an offset past the last indexed batch,
        since a max reached earlier would have been indexed at that batch already."""
        if len(self.offset_index):
            self.time_index.truncate_to_relative_offset(tail[0][1].next_offset - self.base_offset)
        else:
            self.time_index.truncate_to_relative_offset(0)
        self.restore(tail, size_bytes)
