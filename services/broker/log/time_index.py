"""The sparse time index of one segment: largest timestamp so far -> where it was reached.

Theory of operation. An entry (timestamp T, relative offset R) states: "the records of this segment
at offsets <= base + R all have timestamps <= T, and the batch holding offset base + R has max
timestamp T" (R is that batch's last offset, as in Kafka). Entries are added at the same moments as
offset-index entries, but only when the segment's max timestamp grew since the last entry, plus a
final entry when the segment stops being active — so the last entry of a closed segment is its
max timestamp. Timestamps at or below NO_TIMESTAMP (-1) are never indexed.

To find the first record with timestamp >= target, `lookup` takes the last entry with T < target:
everything up to base + R is older, so the search may start at base + R + 1. With no such entry it
starts at the segment's base offset.

On disk (`<base>.timeindex`) an entry is 12 bytes, little-endian: int64 timestamp, uint32 relative
offset. Like the offset index it is a cache that `decode` refuses when it is not sane.

Invariants: timestamps and relative offsets strictly increase; entries <= ENTRIES_MAX.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable

from samsa.common import limits
from samsa.common.record.header import NO_TIMESTAMP, BatchHeader
from samsa.services.broker.log.offset_index import CorruptIndexError, strictly_increasing

ENTRY_BYTES = 12
ENTRIES_MAX = limits.index_bytes_max // ENTRY_BYTES
_TIMESTAMP_BYTES = 8
_OFFSET_BYTES = 4
assert _TIMESTAMP_BYTES + _OFFSET_BYTES == ENTRY_BYTES
assert array("q").itemsize == _TIMESTAMP_BYTES and array("I").itemsize == _OFFSET_BYTES
_BYTESWAP = sys.byteorder != "little"


class TimeIndex:
    """Parallel arrays of timestamps (int64) and relative offsets (uint32)."""

    __slots__ = ("relative_offsets", "timestamps")

    def __init__(
        self, timestamps: array[int] | None = None, relative_offsets: array[int] | None = None
    ) -> None:
        self.timestamps = timestamps if timestamps is not None else array("q")
        self.relative_offsets = relative_offsets if relative_offsets is not None else array("I")
        assert len(self.timestamps) == len(self.relative_offsets)

    def __len__(self) -> int:
        return len(self.timestamps)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimeIndex):
            return NotImplemented
        return (
            self.timestamps == other.timestamps and self.relative_offsets == other.relative_offsets
        )

    def __repr__(self) -> str:
        return f"TimeIndex({list(zip(self.timestamps, self.relative_offsets, strict=True))})"

    @property
    def is_full(self) -> bool:
        return len(self.timestamps) >= ENTRIES_MAX

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, relative offset) of the last entry, or (NO_TIMESTAMP, 0)."""
        if not self.timestamps:
            return NO_TIMESTAMP, 0
        return self.timestamps[-1], self.relative_offsets[-1]

    def maybe_append(self, timestamp: int, relative_offset: int) -> bool:
        """Add (timestamp, relative_offset) if the timestamp beats the last entry's."""
        if timestamp <= self.last_entry()[0]:
            return False
        if self.relative_offsets:
            assert relative_offset > self.relative_offsets[-1], "a new max lives at a new offset"
        assert not self.is_full, "the log rolls before the time index is full"
        self.timestamps.append(timestamp)
        self.relative_offsets.append(relative_offset)
        return True

    def lookup(self, timestamp: int) -> int:
        """The relative offset from which to search for the first record >= `timestamp`."""
        index = bisect_left(self.timestamps, timestamp) - 1
        if index < 0:
            return 0
        return self.relative_offsets[index] + 1

    def check_last_entry(self, base_offset: int, headers: Iterable[BatchHeader]) -> None:
        """Raise CorruptIndexError unless the last entry is complete over `headers`.

        `headers` are the segment's batches from (at the latest) the one holding the last
        entry's offset up to the last batch the appends could still have indexed. A time index
        cut at an entry boundary decodes fine but understates the max timestamp (lookups would
        skip the segment, retention would delete it early): the last entry (T, R) must name the
        batch that first reached T — last offset base + R — and no later batch may beat T.
        """
        timestamp, relative_offset = self.last_entry()
        reached = timestamp <= NO_TIMESTAMP
        for header in headers:
            if reached:
                if header.max_timestamp > timestamp:
                    raise CorruptIndexError(
                        f"the time index misses timestamp {header.max_timestamp}"
                    )
            elif header.last_offset >= base_offset + relative_offset:
                if (header.last_offset, header.max_timestamp) != (
                    base_offset + relative_offset,
                    timestamp,
                ):
                    raise CorruptIndexError("the last time-index entry and its batch disagree")
                reached = True
        if not reached:
            raise CorruptIndexError("the last time-index entry points past the indexed batches")

    def truncate_to_relative_offset(self, relative_offset_end: int) -> None:
        """Drop entries whose offset is no longer in the segment (>= the new end)."""
        keep = bisect_left(self.relative_offsets, relative_offset_end)
        del self.timestamps[keep:]
        del self.relative_offsets[keep:]

    def encode(self, start: int = 0) -> bytes:
        """The file bytes of entries[start:]: 12 strided copies, no per-entry Python work."""
        timestamps = self.timestamps[start:]
        offsets = self.relative_offsets[start:]
        if _BYTESWAP:
            timestamps.byteswap()
            offsets.byteswap()
        timestamp_bytes, offset_bytes = timestamps.tobytes(), offsets.tobytes()
        out = bytearray(ENTRY_BYTES * len(timestamps))
        for byte in range(_TIMESTAMP_BYTES):
            out[byte::ENTRY_BYTES] = timestamp_bytes[byte::_TIMESTAMP_BYTES]
        for byte in range(_OFFSET_BYTES):
            out[_TIMESTAMP_BYTES + byte :: ENTRY_BYTES] = offset_bytes[byte::_OFFSET_BYTES]
        return bytes(out)

    @classmethod
    def parse(cls, data: bytes) -> TimeIndex:
        """The entries of a .timeindex file as they are, unchecked but for the file's size: what
        `decode` checks, and what `samsa dump-log` shows of an index however wrong it is."""
        if len(data) % ENTRY_BYTES:
            raise CorruptIndexError(f"size {len(data)} is not a multiple of {ENTRY_BYTES}")
        if len(data) > limits.index_bytes_max:
            raise CorruptIndexError(f"size {len(data)} exceeds {limits.index_bytes_max} bytes")
        count = len(data) // ENTRY_BYTES
        timestamp_bytes = bytearray(_TIMESTAMP_BYTES * count)
        offset_bytes = bytearray(_OFFSET_BYTES * count)
        for byte in range(_TIMESTAMP_BYTES):
            timestamp_bytes[byte::_TIMESTAMP_BYTES] = data[byte::ENTRY_BYTES]
        for byte in range(_OFFSET_BYTES):
            offset_bytes[byte::_OFFSET_BYTES] = data[_TIMESTAMP_BYTES + byte :: ENTRY_BYTES]
        index = cls(array("q", timestamp_bytes), array("I", offset_bytes))
        if _BYTESWAP:
            index.timestamps.byteswap()
            index.relative_offsets.byteswap()
        return index

    @classmethod
    def decode(cls, data: bytes, *, relative_offset_end: int) -> TimeIndex:
        """Parse and sanity-check a .timeindex file; CorruptIndexError says what is wrong."""
        index = cls.parse(data)
        if not len(index):
            return index
        if index.timestamps[0] <= NO_TIMESTAMP:
            raise CorruptIndexError(f"timestamp {index.timestamps[0]} is not a real timestamp")
        if not strictly_increasing(index.timestamps):
            raise CorruptIndexError("timestamps do not strictly increase")
        if not strictly_increasing(index.relative_offsets):
            raise CorruptIndexError("relative offsets do not strictly increase")
        if index.relative_offsets[-1] >= relative_offset_end:
            raise CorruptIndexError(
                f"relative offset {index.relative_offsets[-1]} is not below {relative_offset_end}"
            )
        return index
