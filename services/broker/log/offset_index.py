"""The sparse offset index of one segment: relative offset -> byte position, in memory.

Theory of operation. Every `index.interval.bytes` of appended data, the segment records where a
batch starts: (base_offset - segment base offset, position of the batch in the .log file). To find
the batch holding offset X, `lookup` takes the floor entry (the last one whose relative offset is
<= X - base) and the caller walks batch headers forward from its position — at most about one
index interval plus one batch. Entries are keyed by a batch's *base* offset (Kafka keys them by
the batch's last offset): the floor entry is then the batch holding X itself whenever X's batch
was indexed, and compaction, which keeps base offsets, leaves the keys valid.

On disk (`<base>.index`) an entry is 8 bytes, little-endian: uint32 relative offset, uint32
position. The file is only a cache of what the log says; `decode` refuses anything that is not
sane (see `CorruptIndexError`) and the caller rebuilds the index from the log.

Invariants: relative offsets and positions strictly increase; every position is inside the
segment's .log file; the entry count never exceeds ENTRIES_MAX (the log rolls first).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from itertools import islice
from operator import lt

from samsa.common import limits

ENTRY_BYTES = 8
ENTRIES_MAX = limits.index_bytes_max // ENTRY_BYTES
_UINT32 = "I"
assert array(_UINT32).itemsize == 4
_BYTESWAP = sys.byteorder != "little"


class CorruptIndexError(ValueError):
    """An index file that fails a sanity check: rebuild it from the log, never trust it."""


def strictly_increasing(column: array[int]) -> bool:
    """True when every item is larger than the one before (C-level, no Python loop)."""
    return all(map(lt, column, islice(column, 1, None)))


class OffsetIndex:
    """Parallel arrays of relative offsets and positions, kept sorted by both."""

    __slots__ = ("positions", "relative_offsets")

    def __init__(
        self, relative_offsets: array[int] | None = None, positions: array[int] | None = None
    ) -> None:
        self.relative_offsets = relative_offsets if relative_offsets is not None else array("I")
        self.positions = positions if positions is not None else array("I")
        assert len(self.relative_offsets) == len(self.positions)

    def __len__(self) -> int:
        return len(self.positions)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OffsetIndex):
            return NotImplemented
        return self.relative_offsets == other.relative_offsets and self.positions == other.positions

    def __repr__(self) -> str:
        return f"OffsetIndex({list(zip(self.relative_offsets, self.positions, strict=True))})"

    @property
    def is_full(self) -> bool:
        return len(self.positions) >= ENTRIES_MAX

    def last_entry(self) -> tuple[int, int]:
        """(relative offset, position) of the last entry, or (0, 0): the segment's start."""
        if not self.positions:
            return 0, 0
        return self.relative_offsets[-1], self.positions[-1]

    def append(self, relative_offset: int, position: int) -> None:
        """Add an entry past the last one (both keys must grow)."""
        if self.positions:
            assert relative_offset > self.relative_offsets[-1], "relative offsets must increase"
            assert position > self.positions[-1], "positions must increase"
        assert 0 <= relative_offset <= limits.segment_relative_offset_max
        assert not self.is_full, "the log rolls before the offset index is full"
        self.relative_offsets.append(relative_offset)
        self.positions.append(position)

    def lookup(self, relative_offset: int) -> tuple[int, int]:
        """The floor entry for `relative_offset`: (relative offset, position), or (0, 0)."""
        index = bisect_right(self.relative_offsets, relative_offset) - 1
        if index < 0:
            return 0, 0
        return self.relative_offsets[index], self.positions[index]

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries of batches at or after `position` (the log was cut there)."""
        keep = bisect_right(self.positions, position - 1)
        del self.relative_offsets[keep:]
        del self.positions[keep:]

    def encode(self, start: int = 0) -> bytes:
        """The file bytes of entries[start:], interleaved (offset, position) little-endian."""
        count = len(self.positions) - start
        interleaved = array(_UINT32, bytes(ENTRY_BYTES * count))
        interleaved[0::2] = self.relative_offsets[start:]
        interleaved[1::2] = self.positions[start:]
        if _BYTESWAP:
            interleaved.byteswap()
        return interleaved.tobytes()

    @classmethod
    def parse(cls, data: bytes) -> OffsetIndex:
        """The entries of a .index file as they are, unchecked but for the file's size: what
        `decode` checks, and what `samsa dump-log` shows of an index however wrong it is."""
        if len(data) % ENTRY_BYTES:
            raise CorruptIndexError(f"size {len(data)} is not a multiple of {ENTRY_BYTES}")
        if len(data) > limits.index_bytes_max:
            raise CorruptIndexError(f"size {len(data)} exceeds {limits.index_bytes_max} bytes")
        interleaved = array(_UINT32)
        interleaved.frombytes(data)
        if _BYTESWAP:
            interleaved.byteswap()
        return cls(interleaved[0::2], interleaved[1::2])

    @classmethod
    def decode(cls, data: bytes, *, log_size_bytes: int, relative_offset_end: int) -> OffsetIndex:
        """Parse and sanity-check a .index file; CorruptIndexError says what is wrong.

        `relative_offset_end` is an exclusive bound on relative offsets (the segment's next
        offset minus its base, or the relative offset limit when unknown).
        """
        index = cls.parse(data)
        if not index.positions:
            return index
        if not strictly_increasing(index.relative_offsets):
            raise CorruptIndexError("relative offsets do not strictly increase")
        if not strictly_increasing(index.positions):
            raise CorruptIndexError("positions do not strictly increase")
        if index.positions[-1] >= log_size_bytes:
            raise CorruptIndexError(
                f"position {index.positions[-1]} is past the log's {log_size_bytes} bytes"
            )
        if index.relative_offsets[-1] >= relative_offset_end:
            raise CorruptIndexError(
                f"relative offset {index.relative_offsets[-1]} is not below {relative_offset_end}"
            )
        return index
