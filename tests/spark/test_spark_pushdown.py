"""Goal: filters on topic, partition and offset narrow the ranges exactly and are not handed back
to Spark; timestamp filters only move a range's start (record timestamps need not grow with
offsets) and are handed back; anything else is handed back untouched. Pure: no Spark session,
no cluster (pyspark's Filter classes only)."""

from __future__ import annotations

import datetime

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

from samsa.spark.pushdown import Pushed, push
from samsa.spark.ranges import OffsetRange

RANGES = [OffsetRange("a", p, 0, 100) for p in range(4)] + [OffsetRange("b", 0, 5, 50)]


def narrowed(*filters, time_starts=None) -> tuple[list[tuple], list]:  # type: ignore[no-untyped-def]
    pushed, remaining = push(list(filters))
    ranges = pushed.narrow(RANGES, time_starts or {})
    return [(r.topic, r.partition, r.start, r.end) for r in ranges], remaining


def test_no_filter_keeps_every_range() -> None:
    assert narrowed() == ([(r.topic, r.partition, r.start, r.end) for r in RANGES], [])


def test_partition_and_topic_filters_choose_partitions_and_are_not_handed_back() -> None:
    ranges, remaining = narrowed(In(("partition",), (0, 2, 9)), EqualTo(("topic",), "a"))
    assert ranges == [("a", 0, 0, 100), ("a", 2, 0, 100)] and remaining == []
    ranges, _ = narrowed(GreaterThan(("partition",), 0), LessThanOrEqual(("partition",), 2))
    assert ranges == [("a", 1, 0, 100), ("a", 2, 0, 100)]
    assert narrowed(In(("topic",), ("b",)), EqualTo(("partition",), 0))[0] == [("b", 0, 5, 50)]
    assert narrowed(EqualTo(("topic",), "a"), EqualTo(("topic",), "b"))[0] == []


def test_offset_filters_cut_every_range_exactly() -> None:
    ranges, remaining = narrowed(GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 20))
    assert set(ranges) == {("a", p, 10, 20) for p in range(4)} | {("b", 0, 10, 20)}
    assert remaining == []
    ranges, _ = narrowed(EqualTo(("offset",), 7), EqualTo(("partition",), 3))
    assert ranges == [("a", 3, 7, 8)]
    ranges, _ = narrowed(GreaterThan(("offset",), 60), LessThanOrEqual(("offset",), 3))
    assert ranges == []  # contradictory: nothing to read


def test_offset_in_cuts_to_the_interval_and_is_handed_back_for_the_gaps() -> None:
    wanted = In(("offset",), (12, 30))
    ranges, remaining = narrowed(wanted, EqualTo(("topic",), "b"))
    assert ranges == [("b", 0, 12, 31)] and remaining == [wanted]


def test_a_timestamp_lower_bound_moves_starts_and_is_handed_back() -> None:
    since = datetime.datetime(2023, 11, 14, 22, 13, 20, 500, tzinfo=datetime.UTC)
    bound = GreaterThanOrEqual(("timestamp",), since)
    pushed, remaining = push([bound, LessThan(("timestamp",), since)])
    assert pushed.timestamp_from_ms == 1_700_000_000_000  # floored to the record's ms
    assert remaining == [bound, LessThan(("timestamp",), since)]  # same objects, in order
    starts = {("a", 0): 40, ("a", 1): None, ("a", 2): 0, ("a", 3): 100, ("b", 0): 45}
    ranges = pushed.narrow(RANGES, starts)
    # a-1 holds no record that late, a-3's first such record is past the range: both empty
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [
        ("a", 0, 40, 100),
        ("a", 2, 0, 100),
        ("b", 0, 45, 50),
    ]


def test_a_naive_timestamp_is_taken_as_utc_and_the_later_bound_wins() -> None:
    early = GreaterThan(("timestamp",), datetime.datetime(1970, 1, 1, 0, 0, 1))
    late = EqualTo(("timestamp",), datetime.datetime(1970, 1, 1, 0, 0, 2))
    assert push([late, early])[0].timestamp_from_ms == 2000
    assert push([early, late])[0].timestamp_from_ms == 2000


def test_a_timestamp_bound_before_1970_is_not_pushed() -> None:
    """timestamp > '1969-12-31 23:00' is a filter every record passes; pushed as a negative
    ListOffsets time, it failed the query (the consumer refuses a time below 0). It is handed
    back to Spark and narrows nothing; a later bound beside it still does."""
    before = GreaterThan(("timestamp",), datetime.datetime(1969, 12, 31, 23, tzinfo=datetime.UTC))
    pushed, remaining = push([before])
    assert pushed == Pushed() and remaining == [before]
    assert narrowed(before)[0] == [(r.topic, r.partition, r.start, r.end) for r in RANGES]
    later = EqualTo(("timestamp",), datetime.datetime(1970, 1, 1, 0, 0, 3))
    assert push([before, later])[0].timestamp_from_ms == 3000
    assert push([later, before])[0].timestamp_from_ms == 3000


@pytest.mark.parametrize(
    "unsupported",
    [
        Not(EqualTo(("partition",), 1)),
        IsNotNull(("offset",)),
        EqualTo(("value",), b"x"),
        EqualTo(("partition",), "1"),
        In(("partition",), ("0",)),
        EqualTo(("topic",), 3),
        LessThan(("timestamp",), 5),
    ],
)
def test_what_cannot_be_pushed_is_handed_back_and_changes_nothing(unsupported) -> None:  # type: ignore[no-untyped-def]
    pushed, remaining = push([unsupported])
    assert remaining == [unsupported] and pushed == Pushed()
