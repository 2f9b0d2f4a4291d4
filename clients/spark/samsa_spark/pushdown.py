"""Filter pushdown for the batch read: which filters on topic, partition, offset and timestamp
narrow the offset ranges before a task starts. Pure: no I/O.

Theory of operation. Spark hands `pushFilters` the AND of the query's simple filters (only while
`spark.sql.python.filterPushdown.enabled` is true; see source.py). `push` keeps what it can
apply and gives back the rest for Spark to evaluate:

- `topic` and `partition` (=, IN, <, <=, >, >=) choose partitions; `offset` (the same) cuts each
  range to an interval. These are exact, so they are applied here and not returned, except
  `offset IN (...)`: the range is cut to the interval holding the values, and Spark drops the
  offsets between them.
- `timestamp` (=, >, >=) gives a lower bound: a range starts at the first offset whose
  timestamp is at least the bound (ListOffsets by timestamp; a bound before 1970 is not used).
  Record timestamps need not grow with offsets, so records after that offset may still be
  older: the filter is also returned, and Spark drops them. An upper bound cannot cut a range
  for the same reason; it is left to Spark.

Anything else (NOT, IS NULL, strings, other columns) is returned untouched.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from samsa.spark.ranges import OffsetRange

TopicPartition = tuple[str, int]
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class Pushed:
    """What the pushed filters allow (picklable; None = no constraint)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_from: int = 0
    partition_until: int | None = None  # exclusive
    offset_from: int = 0
    offset_until: int | None = None  # exclusive
    timestamp_from_ms: int | None = None

    def wants(self, tp: TopicPartition) -> bool:
        topic, partition = tp
        return (
            (self.topics is None or topic in self.topics)
            and (self.partitions is None or partition in self.partitions)
            and partition >= self.partition_from
            and (self.partition_until is None or partition < self.partition_until)
        )

    def narrow(
        self, ranges: Iterable[OffsetRange], time_starts: dict[TopicPartition, int | None]
    ) -> list[OffsetRange]:
        """The ranges of wanted partitions, cut to the offset interval and started no earlier
        than each partition's first offset at `timestamp_from_ms` (`time_starts`; None: no
        record that late, so nothing to read)."""
        narrowed = []
        for r in ranges:
            tp = (r.topic, r.partition)
            if not self.wants(tp):
                continue
            start = max(r.start, self.offset_from)
            end = r.end if self.offset_until is None else min(r.end, self.offset_until)
            if self.timestamp_from_ms is not None:
                found = time_starts.get(tp)
                start = max(start, end if found is None else found)
            if end > start:
                narrowed.append(OffsetRange(r.topic, r.partition, start, end))
        return narrowed


def push(filters: Iterable[Filter]) -> tuple[Pushed, list[Filter]]:
    """(what the filters allow, the filters Spark must still evaluate)."""
    pushed = Pushed()
    remaining: list[Filter] = []
    for f in filters:
        path = getattr(f, "attribute", ())  # Not has a child instead
        column = path[0] if len(path) == 1 else None
        applied = None
        if column == "topic":
            applied = _topics(pushed, f)
        elif column in ("partition", "offset"):
            bounds = _integers(f)
            if bounds is not None:
                applied = (_partitions if column == "partition" else _offsets)(pushed, *bounds)
                if column == "offset" and isinstance(f, In):
                    pushed = applied  # the interval holding the values: Spark drops the gaps
                    remaining.append(f)
                    continue
        elif column == "timestamp":
            bound = _timestamp_floor_ms(f)
            if bound is not None:
                current = pushed.timestamp_from_ms
                pushed = replace(pushed, timestamp_from_ms=max(bound, current or bound))
            remaining.append(f)  # only a lower bound: Spark still filters (docstring)
            continue
        if applied is None:
            remaining.append(f)
        else:
            pushed = applied
    return pushed, remaining


def _topics(pushed: Pushed, f: Filter) -> Pushed | None:
    if isinstance(f, EqualTo) and isinstance(f.value, str):
        names = frozenset([f.value])
    elif isinstance(f, In) and all(isinstance(v, str) for v in f.value):
        names = frozenset(f.value)
    else:
        return None
    return replace(pushed, topics=names if pushed.topics is None else pushed.topics & names)


Bounds = tuple[int, int | None, frozenset[int] | None]


def _integers(f: Filter) -> Bounds | None:
    """An integer filter as ([lo, hi), the set of values it allows or None), or None."""
    if isinstance(f, In):
        if not all(isinstance(v, int) for v in f.value):
            return None
        return 0, None, frozenset(f.value)
    value = getattr(f, "value", None)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    for kind, lo, hi in _INTERVALS:
        if isinstance(f, kind):
            return lo(value), hi(value), None
    return None


_INTERVALS: list[tuple[type, Callable[[int], int], Callable[[int], int | None]]] = [
    (EqualTo, lambda v: v, lambda v: v + 1),
    (GreaterThan, lambda v: v + 1, lambda v: None),
    (GreaterThanOrEqual, lambda v: v, lambda v: None),
    (LessThan, lambda v: 0, lambda v: v),
    (LessThanOrEqual, lambda v: 0, lambda v: v + 1),
]


def _partitions(pushed: Pushed, lo: int, hi: int | None, only: frozenset[int] | None) -> Pushed:
    return replace(
        pushed,
        partitions=_both(pushed.partitions, only),
        partition_from=max(pushed.partition_from, lo),
        partition_until=_min(pushed.partition_until, hi),
    )


def _offsets(pushed: Pushed, lo: int, hi: int | None, only: frozenset[int] | None) -> Pushed:
    if only is not None:  # offset IN (...): the interval that holds them
        lo, hi = (min(only), max(only) + 1) if only else (0, 0)
    return replace(
        pushed,
        offset_from=max(pushed.offset_from, lo),
        offset_until=_min(pushed.offset_until, hi),
    )


def _both(a: frozenset[int] | None, b: frozenset[int] | None) -> frozenset[int] | None:
    if a is None or b is None:
        return a if b is None else b
    return a & b


def _min(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)


def _timestamp_floor_ms(f: Filter) -> int | None:
    """The earliest record timestamp (ms) that can pass a timestamp filter, or None. A bound
    before 1970 is none: ListOffsets takes no negative time (the read failed), and no record
    stored with a timestamp falls below it (Spark still applies the filter)."""
    if not isinstance(f, EqualTo | GreaterThan | GreaterThanOrEqual):
        return None
    value = f.value
    if not isinstance(value, datetime.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    micros = (value - _EPOCH) // datetime.timedelta(microseconds=1)
    ms = micros // 1000  # a record of this ms may still be later than the bound in µs
    return ms if ms >= 0 else None
