"""Goal: appends assign dense, monotonic offsets across rolls, and reads return exactly what was
stored — whole batches, bounded by max_offset and max_bytes (KIP-74), with typed errors outside
the log.

Method: a real Log in tmp_path with small segments (2 KiB, indexed every 128 bytes), batches built
by the codec. Stored batches are compared byte for byte with what was appended once its
broker-owned header fields (base offset, leader epoch) are stamped, and decoded records with what
was sent. Time is passed as numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from log_helpers import batch, read_all, read_batches, small_config

from samsa.common.errors import OffsetOutOfRangeError
from samsa.common.record.codec import decode_batch, decode_batches
from samsa.common.record.header import BatchHeader, read_header, stamp_offsets
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.segment import Segment


def stamped(raw: bytes, base_offset: int, leader_epoch: int) -> bytes:
    buffer = bytearray(raw)
    stamp_offsets(buffer, 0, base_offset, leader_epoch)
    return bytes(buffer)


def test_offsets_are_dense_and_monotonic_across_rolls(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    expected_first = 0
    for index in range(60):
        values = [b"x" * 40] * (1 + index % 3)
        info = log.append_as_leader(batch(*values), leader_epoch=0, now_ms=index)
        assert info.first_offset == expected_first
        assert info.last_offset == expected_first + len(values) - 1
        assert info.record_count == len(values)
        expected_first = info.last_offset + 1
    assert log.log_end_offset == expected_first
    segments = log.segments()
    assert len(segments) > 3, "small segments must have rolled"
    for previous, current in pairwise(segments):
        assert previous.next_offset == current.base_offset
        assert 0 < previous.size_bytes <= 2048
    offsets = [record.offset for record in read_all(log)]
    assert offsets == list(range(expected_first))


def test_read_returns_the_stored_batches_byte_for_byte(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    sent = [
        batch(b"a", b"bb", keys=[b"k1", None], timestamp=[5, 7], headers=[[("h", b"1")], []]),
        batch(None, keys=[b"tombstone"], timestamp=9),
        batch(b"z" * 300, timestamp=11, producer_id=7, producer_epoch=1, base_sequence=0),
    ]
    infos = [log.append_as_leader(raw, leader_epoch=3, now_ms=100) for raw in sent]
    stored = read_batches(log)
    assert stored == [
        stamped(raw, info.first_offset, 3) for raw, info in zip(sent, infos, strict=True)
    ]
    records = read_all(log)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (0, 5, b"k1", b"a"),
        (1, 7, None, b"bb"),
        (2, 9, b"tombstone", None),
        (3, 11, None, b"z" * 300),
    ]
    assert records[0].headers == (("h", b"1"),)


def test_many_batches_in_one_append_get_consecutive_offsets(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    log.append_as_leader(batch(b"first"), leader_epoch=0, now_ms=1)
    info = log.append_as_leader(
        batch(b"a", b"b") + batch(b"c") + batch(b"d", b"e", b"f"), leader_epoch=0, now_ms=2
    )
    assert (info.first_offset, info.last_offset, info.record_count) == (1, 6, 6)
    assert [read_header(raw).base_offset for raw in read_batches(log)] == [0, 1, 3, 4]
    assert [r.value for r in read_all(log)] == [b"first", b"a", b"b", b"c", b"d", b"e", b"f"]


def test_read_from_the_middle_of_a_batch_starts_with_that_batch(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    for _ in range(20):
        log.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0, now_ms=1)
    for offset in (0, 1, 2, 3, 31, 44, 59):
        result = log.read(offset, 1)
        first = decode_batch(result.records)
        assert first.header.base_offset == offset - offset % 3
        assert result.first_offset == first.header.base_offset
        assert result.next_offset == first.header.base_offset + 3


def test_max_offset_bounds_the_read(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    for _ in range(5):
        log.append_as_leader(batch(b"a", b"b"), leader_epoch=0, now_ms=1)
    # High watermark at 6: batches [0,1], [2,3], [4,5] are visible; [6,7] is not.
    result = log.read(0, 100_000, max_offset=6)
    assert [b.header.last_offset for b in decode_batches(result.records)] == [1, 3, 5]
    assert result.next_offset == 6
    # A bound inside a batch hides that whole batch.
    result = log.read(0, 100_000, max_offset=5)
    assert [b.header.last_offset for b in decode_batches(result.records)] == [1, 3]
    # At the bound: nothing, and the next offset stays where it was asked.
    empty = log.read(6, 100_000, max_offset=6)
    assert (empty.records, empty.first_offset, empty.next_offset) == (b"", 6, 6)
    assert empty.log_end_offset == 10


def test_max_bytes_returns_whole_batches_and_at_least_one(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(segment_bytes=1 << 20, max_message_bytes=4096), now_ms=0)
    sizes = []
    for value_bytes in (100, 100, 2000, 100):
        raw = batch(b"x" * value_bytes)
        sizes.append(len(raw))
        log.append_as_leader(raw, leader_epoch=0, now_ms=1)
    # Room for two small batches but not the third: exactly two.
    result = log.read(0, sizes[0] + sizes[1] + 10)
    assert len(result.records) == sizes[0] + sizes[1]
    # KIP-74: the first batch is returned whole even when it is bigger than max_bytes.
    oversized = log.read(2, 10)
    assert len(oversized.records) == sizes[2]
    assert oversized.next_offset == 3
    assert log.read(0, 0).records == read_batches(log)[0]


def test_reads_outside_the_log_raise_offset_out_of_range(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=0, now_ms=1)
    with pytest.raises(OffsetOutOfRangeError, match="outside the log"):
        log.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    at_end = log.read(2, 100)
    assert (at_end.records, at_end.next_offset) == (b"", 2)


def test_empty_log_reads_empty_at_zero(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "new", LogConfig(), now_ms=0)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 0, 0)
    assert log.read(0, 100).records == b""
    assert log.segments()[0].base_offset == 0


def test_log_append_time_stamps_every_batch(tmp_path: Path) -> None:
    config = small_config(message_timestamp_type="LogAppendTime")
    log = Log.open(tmp_path, config, now_ms=0)
    info = log.append_as_leader(batch(b"a", timestamp=5) + batch(b"b"), leader_epoch=0, now_ms=777)
    assert (info.log_append_time_ms, info.max_timestamp) == (777, 777)
    stored = decode_batches(log.read(0, 10_000).records)
    assert all(b.header.is_log_append_time for b in stored)
    assert [r.timestamp for b in stored for r in b] == [777, 777]
    create_time = Log.open(tmp_path / "create", small_config(), now_ms=0)
    info = create_time.append_as_leader(batch(b"a", timestamp=5), leader_epoch=0, now_ms=777)
    assert (info.log_append_time_ms, info.max_timestamp) == (-1, 5)


def test_follower_append_keeps_leader_offsets_and_may_skip_ahead(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    first = batch(b"a", b"b", base_offset=0, partition_leader_epoch=2)
    after_gap = batch(b"c", base_offset=10, partition_leader_epoch=4)
    info = log.append_as_follower(first + after_gap, now_ms=1)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 10, 11)
    assert read_batches(log) == [first, after_gap]
    assert log.leader_epoch_entries() == [(2, 0), (4, 10)]
    assert [r.offset for r in read_all(log)] == [0, 1, 10]


def test_the_newest_batch_is_found_without_a_walk_and_stays_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch caught up with the log reads the newest batch: the segment knows where it is
    (Segment._newest_batch), also after a truncation, a roll and a reopen."""
    walks: list[int] = []
    walk = Segment.walk

    def counted_walk(
        self: Segment, position: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        walks.append(position)
        return walk(self, position, end)

    monkeypatch.setattr(Segment, "walk", counted_walk)

    def newest_reads_ok(log: Log) -> None:
        walks.clear()
        end = log.log_end_offset
        result = log.read(end - 1, 1)
        first = decode_batch(result.records)
        assert first.header.base_offset <= end - 1 < result.next_offset == end
        assert result.first_offset == first.header.base_offset
        assert walks == [], "the newest batch is read without walking the segment"

    log = Log.open(tmp_path, small_config(), now_ms=0)
    for index in range(40):  # rolls several 2 KiB segments
        log.append_as_leader(batch(*[b"v" * 30] * (1 + index % 3)), leader_epoch=0, now_ms=1)
        newest_reads_ok(log)
        assert [r.offset for r in read_all(log)] == list(range(log.log_end_offset))
    log.truncate_to(log.log_end_offset - 2)  # drops the newest batch (or two)
    newest_reads_ok(log)
    assert [r.offset for r in read_all(log)] == list(range(log.log_end_offset))
    log.append_as_leader(batch(b"after"), leader_epoch=1, now_ms=2)
    newest_reads_ok(log)
    end = log.log_end_offset
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.log_end_offset == end
    newest_reads_ok(reopened)
    assert [r.offset for r in read_all(reopened)] == list(range(end))
