"""Goal: the sparse offset and time indexes answer floor lookups, round-trip through their file
format, and refuse any file that is not sane; SegmentIndexes applies one indexing rule whatever
feeds it.

Method: pure objects, no files: hand-made entries, encoded bytes compared with struct-packed
references (the on-disk layout is a contract), and one mutation per sanity rule.
"""

from __future__ import annotations

import struct
from array import array

import pytest

from samsa.common.record.codec import build_batch
from samsa.common.record.header import read_header
from samsa.services.broker.log.offset_index import ENTRIES_MAX, CorruptIndexError, OffsetIndex
from samsa.services.broker.log.segment_index import SegmentIndexes
from samsa.services.broker.log.time_index import TimeIndex


def offset_index(*entries: tuple[int, int]) -> OffsetIndex:
    index = OffsetIndex()
    for relative_offset, position in entries:
        index.append(relative_offset, position)
    return index


def test_offset_lookup_is_the_floor_entry() -> None:
    index = offset_index((3, 100), (9, 250), (20, 600))
    assert index.lookup(0) == (0, 0), "before the first entry: the segment start"
    assert index.lookup(3) == (3, 100)
    assert index.lookup(8) == (3, 100)
    assert index.lookup(9) == (9, 250)
    assert index.lookup(10**6) == (20, 600)
    assert OffsetIndex().lookup(5) == (0, 0)


def test_offset_index_file_layout() -> None:
    index = offset_index((3, 100), (9, 250))
    assert index.encode() == struct.pack("<IIII", 3, 100, 9, 250)
    assert index.encode(1) == struct.pack("<II", 9, 250)
    decoded = OffsetIndex.decode(index.encode(), log_size_bytes=251, relative_offset_end=10)
    assert decoded == index


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (struct.pack("<II", 3, 100) + b"\x00", "multiple"),
        (struct.pack("<IIII", 9, 100, 3, 250), "relative offsets"),
        (struct.pack("<IIII", 3, 250, 9, 100), "positions"),
        (struct.pack("<IIII", 3, 100, 9, 900), "past the log"),
        (struct.pack("<IIII", 3, 100, 50, 200), "not below"),
    ],
)
def test_offset_index_sanity(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptIndexError, match=problem):
        OffsetIndex.decode(data, log_size_bytes=800, relative_offset_end=50)


def test_offset_index_truncation_by_position() -> None:
    index = offset_index((3, 100), (9, 250), (20, 600))
    index.truncate_to_position(250)
    assert index == offset_index((3, 100))
    index.truncate_to_position(0)
    assert len(index) == 0


def test_time_lookup_starts_after_the_last_older_entry() -> None:
    index = TimeIndex()
    for timestamp, relative_offset in ((100, 4), (250, 9), (400, 30)):
        assert index.maybe_append(timestamp, relative_offset)
    assert not index.maybe_append(400, 31), "only a larger timestamp is indexed"
    assert index.lookup(50) == 0
    assert index.lookup(100) == 0, "records up to offset 4 may hold exactly 100"
    assert index.lookup(101) == 5
    assert index.lookup(251) == 10
    assert index.lookup(10**12) == 31


def test_time_index_file_layout_and_sanity() -> None:
    index = TimeIndex(array("q", [100, 2**40]), array("I", [4, 9]))
    data = index.encode()
    assert data == struct.pack("<qIqI", 100, 4, 2**40, 9)
    assert TimeIndex.decode(data, relative_offset_end=10) == index
    with pytest.raises(CorruptIndexError, match="multiple"):
        TimeIndex.decode(data[:-1], relative_offset_end=10)
    with pytest.raises(CorruptIndexError, match="timestamps"):
        TimeIndex.decode(struct.pack("<qIqI", 200, 4, 100, 9), relative_offset_end=10)
    with pytest.raises(CorruptIndexError, match="relative offsets"):
        TimeIndex.decode(struct.pack("<qIqI", 100, 9, 200, 4), relative_offset_end=10)
    with pytest.raises(CorruptIndexError, match="not below"):
        TimeIndex.decode(data, relative_offset_end=9)
    with pytest.raises(CorruptIndexError, match="real timestamp"):
        TimeIndex.decode(struct.pack("<qI", -1, 0), relative_offset_end=9)


def _headers(*batches: tuple[int, int, int]):
    """(base offset, record count, max timestamp) -> the headers of such batches."""
    return [
        read_header(build_batch([b"v"] * count, timestamps=[timestamp] * count, base_offset=base))
        for base, count, timestamp in batches
    ]


def test_a_time_index_is_complete_only_when_its_last_entry_is_the_max() -> None:
    index = TimeIndex(array("q", [50]), array("I", [4]))  # base 0: offset 4 reached time 50
    index.check_last_entry(0, _headers((3, 2, 50), (5, 1, 40), (6, 3, 50)))
    problems = {
        "a later batch beats it (a cut index)": _headers((3, 2, 50), (5, 1, 60)),
        "its batch never reached that time (forged)": _headers((3, 2, 49)),
        "its offset is not a batch's last offset": _headers((3, 3, 50)),
        "its batch is not among the headers": _headers((0, 2, 10)),
    }
    for problem, headers in problems.items():
        with pytest.raises(CorruptIndexError):
            index.check_last_entry(0, headers)
            pytest.fail(problem)
    TimeIndex().check_last_entry(0, _headers((0, 2, -1)))  # no timestamps: no entry needed
    with pytest.raises(CorruptIndexError):
        TimeIndex().check_last_entry(0, _headers((0, 2, 7)))  # an emptied index


def test_segment_indexes_rule() -> None:
    """An entry for a batch once >= index.interval.bytes were appended since the last one."""
    indexes = SegmentIndexes(base_offset=1000, index_interval_bytes=100)
    position = 0
    # (size, record count, max timestamp)
    for offset, (size, timestamp) in enumerate([(60, 5), (60, 3), (60, 9), (150, 7), (10, 20)]):
        indexes.on_batch(position, 1000 + offset, 1000 + offset, timestamp, size)
        position += size
    assert list(
        zip(indexes.offset_index.relative_offsets, indexes.offset_index.positions, strict=True)
    ) == [(2, 120), (4, 330)]
    # At offset 2 the max was 9 (reached at offset 2); at offset 4, 20 (reached at offset 4).
    assert list(indexes.time_index.timestamps) == [9, 20]
    assert (indexes.max_timestamp, indexes.offset_of_max_timestamp) == (20, 1004)
    assert (indexes.size_bytes, indexes.next_offset) == (340, 1005)
    indexes.on_roll()
    assert len(indexes.time_index) == 2, "the final entry exists already"


def test_index_capacity_is_bounded() -> None:
    index = OffsetIndex(array("I", range(ENTRIES_MAX)), array("I", range(ENTRIES_MAX)))
    assert index.is_full
    with pytest.raises(AssertionError):
        index.append(ENTRIES_MAX, ENTRIES_MAX)
