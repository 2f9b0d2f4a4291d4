"""The checks every record passes before it is batched: types, timestamps and encoded sizes.

A record's key and value are bytes or None (a bytearray or memoryview is copied to bytes: the
caller may reuse its buffer); headers are (str, bytes | None) pairs; a timestamp is a
non-negative int64 of milliseconds (Kafka rejects negative ones). Anything else raises
InvalidRecordError naming what is wrong. `send()` checks one record inside the batcher's append
(record_batcher.py) with `as_bytes` and `checked_headers`; `send_many()` checks a whole column of
records here first (`check_columns`), in C loops where it can, so that a bad record raises before
any record of the call is queued. Pure: no I/O, no state.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from itertools import accumulate, repeat
from operator import add, itemgetter, sub
from typing import NamedTuple

from samsa.client.producer_batch import HEADER_OVERHEAD_BYTES, RECORD_OVERHEAD_BYTES
from samsa.common.errors import InvalidRecordError

# Timestamps are int64 milliseconds in the batch; Kafka rejects negative ones.
TIMESTAMP_MS_MAX = 2**63 - 1


class CheckedRecords(NamedTuple):
    """Records of one `send_many` call, checked (`check_columns`, then the batcher's sizes):
    bytes or None keys and values, header tuples, and their estimated sizes in a batch, as
    running totals so that the bytes of any run of records is one subtraction."""

    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[tuple[tuple[str, bytes | None], ...] | None] | None
    # cumulative_sizes[i + 1] - cumulative_sizes[i] = estimated bytes of record i (running
    # totals; one more item than records).
    cumulative_sizes: list[int]

    def slice(self, start: int, stop: int) -> CheckedRecords:
        """Records [start, stop) (running totals need not start at 0: only differences count)."""
        if start == 0 and stop >= len(self.values):
            return self
        return CheckedRecords(
            self.keys[start:stop],
            self.values[start:stop],
            None if self.headers is None else self.headers[start:stop],
            self.cumulative_sizes[start : stop + 1],
        )

    def select(self, indexes: Sequence[int]) -> CheckedRecords:
        """The records at `indexes`, in that order (one partition's share of a call), gathered
        by itemgetter in C."""
        if len(indexes) == 1:
            return self.slice(indexes[0], indexes[0] + 1)
        take = itemgetter(*indexes)
        cumulative = self.cumulative_sizes
        sizes = map(sub, take(cumulative[1:]), take(cumulative))
        return CheckedRecords(
            take(self.keys),
            take(self.values),
            None if self.headers is None else take(self.headers),
            list(accumulate(sizes, initial=0)),
        )


def checked_int(name: str, number: object) -> int:
    """An int given as one (a numpy integer too), never a float or a bool: a float timestamp
    (`time.time() * 1000`) or partition would otherwise be accepted by send() and fail only when
    its batch is encoded, on the driver's loop."""
    if number.__class__ is int:
        return number  # type: ignore[return-value]
    if isinstance(number, bool) or not hasattr(number, "__index__"):
        raise InvalidRecordError(f"a record's {name} must be an int, got {number!r}")
    return operator.index(number)  # type: ignore[no-any-return]


def check_columns(
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
    timestamp_ms: int,
) -> CheckedRecords:
    """A column of records (all with `timestamp_ms`) checked, with their estimated sizes; a wrong
    type, length or timestamp raises InvalidRecordError. Sizes against the producer's limits are
    the batcher's to check."""
    timestamp_ms = checked_int("timestamp", timestamp_ms)
    if not 0 <= timestamp_ms <= TIMESTAMP_MS_MAX:
        raise InvalidRecordError(
            f"invalid timestamp {timestamp_ms}: must be a non-negative int64 (ms), or None"
        )
    if keys is None:
        keys = [None] * len(values)
    elif len(keys) != len(values):
        raise InvalidRecordError(f"{len(keys)} keys for {len(values)} values")
    if headers is not None and len(headers) != len(values):
        raise InvalidRecordError(f"{len(headers)} header lists for {len(values)} values")
    values, value_lengths = _bytes_column("value", values)
    keys, key_lengths = _bytes_column("key", keys)
    # Sizes and their running totals in chained C loops (map, accumulate): ~10x faster than a
    # comprehension over the records.
    sizes = map(add, map(add, key_lengths, value_lengths), repeat(RECORD_OVERHEAD_BYTES))
    cumulative = list(accumulate(sizes, initial=0))
    headers_checked = None
    if headers is not None and any(headers):
        headers_checked = [None] * len(values)
        extra = 0
        for index, pairs in enumerate(headers):
            cumulative[index] += extra
            if pairs:
                headers_checked[index], header_bytes = checked_headers(pairs)
                extra += header_bytes
        cumulative[-1] += extra
    return CheckedRecords(keys, values, headers_checked, cumulative)


def checked_partitions_column(
    partitions: Sequence[int | None], value_count: int
) -> list[int | None]:
    """send_many's `partitions` column: one int or None per value (InvalidRecordError otherwise,
    as `check_columns` refuses a keys column of another length: the records past its end would
    be dropped unsaid)."""
    if len(partitions) != value_count:
        raise InvalidRecordError(f"{len(partitions)} partitions for {value_count} values")
    return [None if p is None else checked_int("partition", p) for p in partitions]


def as_bytes(name: str, item: object) -> bytes:
    """bytes from a bytearray or memoryview (copied: the caller may reuse its buffer)."""
    if isinstance(item, bytearray):
        return bytes(item)
    if isinstance(item, memoryview):
        return item.tobytes()
    raise InvalidRecordError(f"a record's {name} must be bytes or None, got {type(item).__name__}")


_BYTES = frozenset((bytes,))
_BYTES_OR_NONE = frozenset((bytes, type(None)))


def _bytes_column(
    name: str, column: Sequence[bytes | None]
) -> tuple[Sequence[bytes | None], Iterable[int]]:
    """The column (itself when every item is bytes or None, else a copy with bytearrays and
    memoryviews copied to bytes; InvalidRecordError for anything else), and its items' lengths
    (0 for None), each found in C loops."""
    types = set(map(type, column))
    if types <= _BYTES:
        return column, map(len, column)
    if not types <= _BYTES_OR_NONE:
        column = [
            item if item.__class__ is bytes or item is None else as_bytes(name, item)
            for item in column
        ]
    return column, [0 if item is None else len(item) for item in column]


def checked_headers(
    headers: Iterable[tuple[str, bytes | None]],
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """Headers as a tuple of (str, bytes | None) pairs, and their encoded size in bytes."""
    checked = []
    size_bytes = 0
    for pair in headers:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise InvalidRecordError(f"a header must be a (str, bytes | None) pair, got {pair!r}")
        header_key, header_value = pair
        if not isinstance(header_key, str):
            raise InvalidRecordError(f"a header key must be str, got {type(header_key).__name__}")
        try:
            size_bytes += HEADER_OVERHEAD_BYTES + len(header_key.encode())
        except UnicodeEncodeError as error:
            raise InvalidRecordError(f"header key {header_key!r} is not UTF-8: {error}") from None
        if header_value is not None:
            if header_value.__class__ is not bytes:
                header_value = as_bytes(f"header {header_key!r}", header_value)
            size_bytes += len(header_value)
        checked.append((header_key, header_value))
    return tuple(checked), size_bytes
