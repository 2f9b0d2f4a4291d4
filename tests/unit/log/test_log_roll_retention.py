"""Goal: segments roll on segment.bytes and segment.ms; retention (retention.ms, retention.bytes)
and DeleteRecords delete whole segments only (retention takes the active one after rolling a new
one at the log end), move the log start offset, persist it, and make reads below it fail.

Method: a real Log with small segments; time is the `now_ms` passed to each call, so "a week
later" is a number. Segment listings show what exists; reads and a reopen show what is served.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.common.errors import OffsetOutOfRangeError
from samsa.services.broker.log import time_index
from samsa.services.broker.log.config import LONG_MAX
from samsa.services.broker.log.log import Log

HOUR_MS = 3_600_000


def fill(log: Log, count: int, *, timestamp: int, now_ms: int, size: int = 200) -> None:
    for _ in range(count):
        log.append_as_leader(batch(b"v" * size, timestamp=timestamp), leader_epoch=0, now_ms=now_ms)


def test_roll_on_segment_bytes_keeps_every_segment_under_it(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    fill(log, 30, timestamp=1, now_ms=1)
    segments = log.segments()
    assert len(segments) >= 3
    assert all(s.size_bytes <= 2048 for s in segments)
    # Each closed segment was full: one more batch would not have fitted.
    one_batch = len(batch(b"v" * 200, timestamp=1))
    assert all(s.size_bytes + one_batch > 2048 for s in segments[:-1])


def test_roll_on_segment_ms_measured_from_the_first_append(tmp_path: Path) -> None:
    config = small_config(segment_bytes=1 << 20, segment_ms=HOUR_MS)
    log = Log.open(tmp_path, config, now_ms=0)
    fill(log, 1, timestamp=1, now_ms=10_000)
    fill(log, 1, timestamp=1, now_ms=10_000 + HOUR_MS)  # exactly segment.ms: not yet
    assert len(log.segments()) == 1
    fill(log, 1, timestamp=1, now_ms=10_001 + HOUR_MS)
    assert [s.base_offset for s in log.segments()] == [0, 2]
    # The new segment's clock starts at its own first append.
    fill(log, 1, timestamp=1, now_ms=10_001 + 2 * HOUR_MS)
    assert len(log.segments()) == 2
    fill(log, 1, timestamp=1, now_ms=10_002 + 2 * HOUR_MS)
    assert [s.base_offset for s in log.segments()] == [0, 2, 4]


@pytest.mark.parametrize("clean", [True, False])
def test_a_restart_does_not_restart_segment_ms(tmp_path: Path, clean: bool) -> None:
    """A broker restarted more often than segment.ms would otherwise never roll a quiet
    partition's active segment, and retention (closed segments only) would never delete it:
    after a restart the active segment's age counts from its first batch's timestamp (Kafka's
    LogSegment rolls by record time too)."""
    config = small_config(segment_bytes=1 << 20, segment_ms=HOUR_MS)
    start = 1_700_000_000_000
    log = Log.open(tmp_path, config, now_ms=start)
    fill(log, 1, timestamp=start, now_ms=start)
    if clean:
        log.close()
    log = Log.open(tmp_path, config, now_ms=start + HOUR_MS // 2)
    later = start + HOUR_MS + 1
    fill(log, 1, timestamp=later, now_ms=later)
    assert [s.base_offset for s in log.segments()] == [0, 1]
    log.close()


def test_a_restart_with_future_timestamps_rolls_from_the_first_append(tmp_path: Path) -> None:
    config = small_config(
        segment_bytes=1 << 20, segment_ms=HOUR_MS, message_timestamp_after_max_ms=LONG_MAX
    )
    log = Log.open(tmp_path, config, now_ms=0)
    fill(log, 1, timestamp=10**15, now_ms=10_000)  # a producer's clock far ahead, accepted
    log.close()
    log = Log.open(tmp_path, config, now_ms=20_000)
    fill(log, 1, timestamp=1, now_ms=30_000)
    fill(log, 1, timestamp=1, now_ms=30_000 + HOUR_MS)
    assert len(log.segments()) == 1
    fill(log, 1, timestamp=1, now_ms=30_001 + HOUR_MS)
    assert [s.base_offset for s in log.segments()] == [0, 3]
    log.close()


def test_an_idle_empty_segment_does_not_roll(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(segment_ms=10), now_ms=0)
    fill(log, 1, timestamp=1, now_ms=10**9)
    assert len(log.segments()) == 1


def test_retention_ms_deletes_old_closed_segments_only(tmp_path: Path) -> None:
    config = small_config(retention_ms=24 * HOUR_MS)
    log = Log.open(tmp_path, config, now_ms=0)
    fill(log, 20, timestamp=1_000, now_ms=1)  # old records
    old_segments = len(log.segments()) - 1
    fill(log, 20, timestamp=30 * HOUR_MS, now_ms=30 * HOUR_MS)  # new records
    now_ms = 30 * HOUR_MS + 1
    deleted = log.apply_retention(now_ms=now_ms, high_watermark=log.log_end_offset)
    assert deleted >= old_segments
    assert log.log_start_offset == log.segments()[0].base_offset > 0
    assert all(s.max_timestamp == 30 * HOUR_MS for s in log.segments()[1:])
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert read_all(log)[0].offset == log.log_start_offset
    assert log.apply_retention(now_ms=now_ms, high_watermark=log.log_end_offset) == 0


def test_retention_takes_an_expired_active_segment_after_rolling_at_the_log_end(
    tmp_path: Path,
) -> None:
    """A partition written once and left idle loses its records after retention.ms, as in Kafka
    (deleteSegments rolls first): before, the active segment was never deleted, and an idle
    partition's records stayed for ever, since only an append rolls a segment."""
    config = small_config(retention_ms=HOUR_MS)
    log = Log.open(tmp_path, config, now_ms=0)
    fill(log, 3, timestamp=1_000, now_ms=1_000)
    assert len(log.segments()) == 1
    assert log.apply_retention(now_ms=1_000 + HOUR_MS, high_watermark=3) == 0, "not yet expired"
    assert log.apply_retention(now_ms=1_001 + HOUR_MS, high_watermark=3) == 1
    assert [(s.base_offset, s.size_bytes) for s in log.segments()] == [(3, 0)]
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert read_all(log) == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.apply_retention(now_ms=10**12, high_watermark=3) == 0, "an empty one stays"
    assert [s.base_offset for s in log.segments()] == [3]
    fill(log, 1, timestamp=10**12, now_ms=10**12)
    assert [r.offset for r in read_all(log)] == [3]
    reopened = Log.open(tmp_path, config, now_ms=10**12)  # no close: an unclean restart
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 4)


def test_retention_keeps_an_active_segment_with_records_above_the_high_watermark(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path, small_config(retention_ms=1, retention_bytes=0), now_ms=0)
    fill(log, 20, timestamp=1, now_ms=1)
    closed = len(log.segments()) - 1
    assert closed > 0
    assert log.apply_retention(now_ms=10**12, high_watermark=log.log_end_offset - 1) == closed
    assert len(log.segments()) == 1
    assert log.log_start_offset == log.segments()[0].base_offset
    assert read_all(log)[-1].offset == 19


def test_retention_bytes_zero_takes_every_committed_record(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(retention_bytes=0), now_ms=0)
    fill(log, 20, timestamp=1, now_ms=1)
    segments = len(log.segments())
    assert log.apply_retention(now_ms=2, high_watermark=20) == segments
    assert [(s.base_offset, s.size_bytes) for s in log.segments()] == [(20, 0)]
    assert log.log_start_offset == 20


def test_retention_bytes_keeps_at_least_that_many_bytes(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(retention_bytes=5000), now_ms=0)
    fill(log, 60, timestamp=1, now_ms=1)
    before = log.size_bytes()
    deleted = log.apply_retention(now_ms=2, high_watermark=log.log_end_offset)
    assert deleted > 0
    assert log.size_bytes() >= 5000
    # Deleting one more segment would have gone below retention.bytes.
    assert log.size_bytes() - log.segments()[0].size_bytes < 5000
    assert before - log.size_bytes() >= deleted * 1000


def test_delete_policy_off_means_no_time_or_size_retention(tmp_path: Path) -> None:
    config = small_config(retention_ms=1, retention_bytes=0, cleanup_policy=frozenset({"compact"}))
    log = Log.open(tmp_path, config, now_ms=0)
    for index in range(30):  # keyed: a compacted topic refuses a keyless record
        keyed = batch(b"v" * 200, keys=[b"k%d" % index], timestamp=1)
        log.append_as_leader(keyed, leader_epoch=0, now_ms=1)
    assert log.apply_retention(now_ms=10**12, high_watermark=log.log_end_offset) == 0


def test_retention_moves_log_start_durably(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(retention_ms=HOUR_MS), now_ms=0)
    fill(log, 20, timestamp=1, now_ms=1)
    fill(log, 20, timestamp=10 * HOUR_MS, now_ms=10 * HOUR_MS)
    log.apply_retention(now_ms=10 * HOUR_MS, high_watermark=log.log_end_offset)
    start = log.log_start_offset
    assert start > 0
    reopened = Log.open(tmp_path, small_config(retention_ms=HOUR_MS), now_ms=0)  # no close
    assert reopened.log_start_offset == start


def test_delete_records_moves_log_start_and_deletes_segments_below(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    fill(log, 30, timestamp=1, now_ms=1)
    second, third = log.segments()[1].base_offset, log.segments()[2].base_offset
    assert log.delete_records(third + 1) == third + 1
    assert log.segments()[0].base_offset == third  # the segment holding the new start stays
    assert second not in [s.base_offset for s in log.segments()]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(third, 100)
    assert read_all(log)[0].offset == third + 1
    assert log.delete_records(2) == third + 1, "the log start never moves back"
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.log_end_offset + 1)
    assert log.delete_records(log.log_end_offset) == log.log_end_offset
    assert len(log.segments()) == 1
    assert log.read(log.log_end_offset, 100).records == b""
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.log_start_offset == reopened.log_end_offset == 30


def test_one_append_of_more_batches_than_an_index_holds_is_stored_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """index.interval.bytes=0 indexes every batch, and no roll can split one append: an append
    of more batches than the time index holds (~870k tiny batches fit one produce request) was
    written, then failed an assertion half-way through indexing it."""
    monkeypatch.setattr(time_index, "ENTRIES_MAX", 10)
    config = small_config(index_interval_bytes=0, segment_bytes=1 << 20)
    log = Log.open(tmp_path, config, now_ms=0)
    data = b"".join(batch(b"v", timestamp=1_000 + index) for index in range(20))
    assert log.append_as_leader(data, leader_epoch=0, now_ms=0).last_offset == 19
    log.append_as_leader(batch(b"w", timestamp=5_000), leader_epoch=0, now_ms=0)
    assert [record.offset for record in read_all(log)] == list(range(21))
    assert log.offset_for_timestamp(1_015) == (15, 1_015)
    log.close()
    reopened = Log.open(tmp_path, config, now_ms=0)
    assert [record.offset for record in read_all(reopened)] == list(range(21))
    assert reopened.offset_for_timestamp(1_015) == (15, 1_015)
    reopened.close()
