"""The shapes both directions of the codec share: the records section's layout constants (array
widths, the null length, the producer's dense offset deltas) and the decoded batch, `RecordBatch`,
with its `Record`s. codec.py's docstring describes the format; docs/record-batch.md specifies it.

Pure: no I/O, no clock, no threads.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import add
from typing import NamedTuple

from samsa.common.record import header

__all__ = [
    "ARRAY_BYTES_PER_HEADER",
    "ARRAY_BYTES_PER_RECORD",
    "NULL_LENGTH",
    "Record",
    "RecordBatch",
]

# Bytes of fixed-width arrays per record: offset delta 4, timestamp delta 8, key length 4,
# value length 4, header count 4. A record_count is checked against this before any allocation.
ARRAY_BYTES_PER_RECORD = 24
# Bytes of fixed-width arrays per header: key length 4, value length 4.
ARRAY_BYTES_PER_HEADER = 8
NULL_LENGTH = -1

_INT32 = "i"
_INT64 = "q"
assert array(_INT32).itemsize == 4 and array(_INT64).itemsize == 8
assert ARRAY_BYTES_PER_RECORD == 4 + 8 + 4 + 4 + 4
# The arrays are little-endian on the wire; on a big-endian CPU each one is byte-swapped once.
_BYTESWAP = sys.byteorder != "little"

# Producers send dense offset deltas 0..N-1: encoding copies a prefix of this, and decoding
# recognises a dense column with one memcmp instead of N comparisons.
_DENSE_CACHE_COUNT = 16_384
_DENSE_OFFSET_DELTAS = array(_INT32, range(_DENSE_CACHE_COUNT))
if _BYTESWAP:
    _DENSE_OFFSET_DELTAS.byteswap()
_DENSE_OFFSET_DELTA_BYTES = _DENSE_OFFSET_DELTAS.tobytes()


class Record(NamedTuple):
    """One decoded record with absolute offset and timestamp (convenience iteration)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RecordBatch:
    """A decoded batch, column-wise: one sequence per field, index i is record i."""

    __slots__ = ("header", "headers", "keys", "offset_deltas", "timestamp_deltas", "values")

    def __init__(
        self,
        batch_header: header.BatchHeader,
        offset_deltas: Sequence[int],
        timestamp_deltas: Sequence[int],
        keys: list[bytes | None],
        values: list[bytes | None],
        headers: list[tuple[tuple[str, bytes | None], ...]],
    ) -> None:
        self.header = batch_header
        self.offset_deltas = offset_deltas
        self.timestamp_deltas = timestamp_deltas
        self.keys = keys
        self.values = values
        self.headers = headers

    def __len__(self) -> int:
        return self.header.record_count

    def __iter__(self) -> Iterator[Record]:
        # tuple.__new__ builds each Record in C (a NamedTuple's own __new__ is Python code).
        columns = zip(
            self.offsets(), self.timestamps(), self.keys, self.values, self.headers, strict=True
        )
        return map(tuple.__new__, repeat(Record), columns)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.header.base_offset}, "
            f"last_offset={self.header.last_offset}, record_count={self.header.record_count})"
        )

    def offsets(self) -> list[int]:
        """Absolute offsets: base_offset + offset delta."""
        base_offset = self.header.base_offset
        if self.header.last_offset_delta == self.header.record_count - 1:
            return list(range(base_offset, base_offset + self.header.record_count))
        return list(map(add, self.offset_deltas, repeat(base_offset)))

    def timestamps(self) -> list[int]:
        """Absolute timestamps; a LogAppendTime batch gives every record its max_timestamp."""
        if self.header.is_log_append_time:
            return [self.header.max_timestamp] * self.header.record_count
        return list(map(add, self.timestamp_deltas, repeat(self.header.base_timestamp)))
