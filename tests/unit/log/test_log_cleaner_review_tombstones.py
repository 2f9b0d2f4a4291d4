"""Goal: a tombstone stays delete.retention.ms after the compaction pass that first cleaned it,
whatever timestamp its producer gave it (Kafka's delete horizon, KIP-534), so that a consumer
that read a key's value before that pass still has delete.retention.ms to read its delete.

A producer's CreateTime is the producer's to choose: an event time days old, a replayed record's
original time, a clock that is behind. A horizon counted from it removes such a tombstone in the
very pass that removes the value it deletes, and a consumer that had read the value but not yet
the tombstone keeps the deleted key for ever.

Method: a real Log with 2 KiB segments and cleanup.policy=compact; the tombstone carries a
timestamp two retention periods old; passes at chosen times, a restart in between.
"""

from __future__ import annotations

from pathlib import Path

from log_helpers import batch, read_all, small_config

from samsa.services.broker.log.delete_horizon import ENTRIES_MAX, FirstCleaned
from samsa.services.broker.log.log import Log

NOW = 1_000_000_000
RETENTION_MS = 60_000
CONFIG = small_config(cleanup_policy=frozenset({"compact"}), delete_retention_ms=RETENTION_MS)


def put(log: Log, key: bytes, value: bytes | None, timestamp: int = NOW) -> int:
    return log.append_as_leader(
        batch(value, keys=[key], timestamp=timestamp), leader_epoch=0, now_ms=NOW
    ).first_offset


def deleted_with_an_old_timestamp(directory: Path) -> tuple[Log, int]:
    """k written, then deleted by a tombstone timestamped two retention periods ago; other keys
    written after it close its segment. Returns the log and the tombstone's offset."""
    log = Log.open(directory, CONFIG, now_ms=NOW)
    put(log, b"k", b"v" * 100)
    tombstone = put(log, b"k", None, timestamp=NOW - 2 * RETENTION_MS)
    for n in range(40):
        put(log, b"o%d" % (n % 4), b"w" * 100)
    assert tombstone < log.segments()[-1].base_offset, "the tombstone's segment is closed"
    return log, tombstone


def tombstones(log: Log) -> list[int]:
    return [r.offset for r in read_all(log) if r.key == b"k" and r.value is None]


def test_a_tombstone_with_an_old_timestamp_stays_its_retention_after_its_first_pass(
    tmp_path: Path,
) -> None:
    log, tombstone = deleted_with_an_old_timestamp(tmp_path)
    end = log.log_end_offset
    log.compact(now_ms=NOW, high_watermark=end)
    assert [r.value for r in read_all(log) if r.key == b"k"] == [None], "the value went"
    assert tombstones(log) == [tombstone], "the first pass keeps the tombstone"
    assert not log.compaction_due(now_ms=NOW + RETENTION_MS - 1, high_watermark=end)
    log.compact(now_ms=NOW + RETENTION_MS - 1, high_watermark=end)
    assert tombstones(log) == [tombstone], "kept until its pass is delete.retention.ms old"
    log.close()

    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert tombstones(reopened) == [tombstone]
    assert reopened.compaction_due(now_ms=NOW + RETENTION_MS, high_watermark=end)
    reopened.compact(now_ms=NOW + RETENTION_MS, high_watermark=end)
    assert tombstones(reopened) == [], "then it goes"
    reopened.close()


def test_a_truncated_and_rewritten_range_is_new_to_the_cleaner(tmp_path: Path) -> None:
    """A truncation drops what earlier passes saw from the new log end on: a tombstone written
    there afterwards gets its own delete.retention.ms from the pass that first cleans it."""
    log, tombstone = deleted_with_an_old_timestamp(tmp_path)
    end = log.log_end_offset
    log.compact(now_ms=NOW, high_watermark=end)
    log.truncate_to(tombstone)
    later = NOW + 2 * RETENTION_MS
    again = put(log, b"k", None, timestamp=NOW - 2 * RETENTION_MS)
    for n in range(40):
        put(log, b"o%d" % (n % 4), b"w" * 100)
    end = log.log_end_offset
    log.compact(now_ms=later, high_watermark=end)
    assert tombstones(log) == [again], "first cleaned now: kept"
    log.compact(now_ms=later + RETENTION_MS, high_watermark=end)
    assert tombstones(log) == []
    log.close()


def test_first_cleaned_ranges_truncate_forget_and_merge_towards_later() -> None:
    ranges = FirstCleaned()
    ranges.on_pass(10, 100)
    ranges.on_pass(10, 200)  # nothing new cleaned: the first pass's time stays
    ranges.on_pass(30, 300)
    assert [ranges.first_cleaned_ms(o) for o in (0, 9, 10, 29, 30)] == [100, 100, 300, 300, None]
    assert ranges.truncate(20) and ranges.entries() == [(10, 100), (20, 300)]
    assert not ranges.truncate(25)
    ranges.forget_below(10)
    assert ranges.entries() == [(20, 300)]
    for n in range(ENTRIES_MAX + 5):
        ranges.on_pass(21 + n, n)
    assert len(ranges.entries()) == ENTRIES_MAX
    assert ranges.first_cleaned_ms(0) >= 300, "a merged range keeps its later time"


def test_a_deleted_key_stays_deleted_while_a_batch_kept_whole_holds_its_old_value(
    tmp_path: Path,
) -> None:
    """An idempotent producer's newest batch stays whole (its last sequence must survive), so
    it keeps a value its key's tombstone superseded: that tombstone stays past its horizon while
    the value is there, and goes only in a pass after the one that removes the value (once the
    producer has written again), or a reader from the log start would see the key come back."""
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    old_value = batch(
        b"v" * 100, keys=[b"k"], timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=0
    )
    log.append_as_leader(old_value, leader_epoch=0, now_ms=NOW)
    tombstone = put(log, b"k", None)
    for n in range(40):
        put(log, b"o%d" % (n % 4), b"w" * 100)
    end = log.log_end_offset
    for now in (NOW, NOW + RETENTION_MS, NOW + 5 * RETENTION_MS):
        log.compact(now_ms=now, high_watermark=end)
        assert [r.value for r in read_all(log) if r.key == b"k"] == [b"v" * 100, None]
    later_batch = batch(
        b"x", keys=[b"p"], timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=1
    )
    log.append_as_leader(later_batch, leader_epoch=0, now_ms=NOW)
    for n in range(40):
        put(log, b"o%d" % (n % 4), b"w" * 100)
    end = log.log_end_offset
    log.compact(now_ms=NOW + 6 * RETENTION_MS, high_watermark=end)
    assert tombstones(log) == [tombstone], "the value went, its tombstone stays one more pass"
    assert [r.value for r in read_all(log) if r.key == b"k"] == [None]
    log.compact(now_ms=NOW + 6 * RETENTION_MS, high_watermark=end)
    assert tombstones(log) == []
    log.close()
