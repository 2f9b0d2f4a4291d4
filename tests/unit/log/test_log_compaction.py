"""Goal: compaction keeps the newest record per key in the closed segments, never changes an
offset, keeps tombstones for delete.retention.ms after the pass that first cleaned them, leaves the
active segment and control batches alone, and survives a crash at any stage of its file swap.

Method: a real Log with small segments and cleanup.policy=compact. Expected survivors come from a
dumb reference over the records read back before compaction. Crashes are staged by copying the
directory before compacting and dropping the compacted file into the copy as `.cleaned` or
`.swap`, which is exactly what a crash between the steps leaves on disk.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from log_helpers import batch, read_all, small_config

from samsa.common.record.codec import build_control_batch, decode_batches
from samsa.common.record.header import COMPRESSION_ZSTD
from samsa.services.broker.log.config import LONG_MAX
from samsa.services.broker.log.log import Log

DAY_MS = 86_400_000


def compact_config(**overrides: object):
    return small_config(cleanup_policy=frozenset({"compact"}), **overrides)


def fill(
    log: Log,
    *,
    rounds: int,
    keys: int,
    timestamp: int = 1_000,
    unique: bool = True,
    epoch: int = 0,
) -> None:
    """`rounds` x `keys` batches of ~250 bytes: a record of key k<key> (plus, when `unique`, one
    whose key no other record has, which survives every pass)."""
    for round_index in range(rounds):
        for key in range(keys):
            values = [b"r%d-%d " % (round_index, key) + b"." * 200]
            record_keys = [b"k%d" % key]
            if unique:
                values.append(b"unique")
                record_keys.append(b"u%d-%d" % (round_index, key))
            log.append_as_leader(
                batch(*values, keys=record_keys, timestamp=timestamp), leader_epoch=epoch, now_ms=1
            )


def expected_survivors(log: Log, *, tombstones_expired: bool) -> list[tuple[int, bytes | None]]:
    records = read_all(log)
    cleanable_end = log.segments()[-1].base_offset
    newest = {r.key: r.offset for r in records if r.key is not None and r.offset < cleanable_end}
    kept = []
    for r in records:
        superseded = r.key is None or newest.get(r.key, r.offset) != r.offset
        expired_tombstone = r.value is None and tombstones_expired
        if r.offset >= cleanable_end or not (superseded or expired_tombstone):
            kept.append((r.offset, r.value))
    return kept


def test_newest_record_per_key_survives_with_its_offset(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(), now_ms=0)
    fill(log, rounds=6, keys=5)
    active_before = log.segments()[-1]
    expected = expected_survivors(log, tombstones_expired=False)
    end_before = log.log_end_offset
    result = log.compact(now_ms=2, high_watermark=log.log_end_offset)
    assert result.records_removed > 0 and result.bytes_after < result.bytes_before
    assert [(r.offset, r.value) for r in read_all(log)] == expected
    assert log.segments()[-1] == active_before, "the active segment is untouched"
    assert log.log_end_offset == end_before
    assert log.compact(now_ms=2, high_watermark=log.log_end_offset).records_removed == 0, (
        "a second pass finds nothing"
    )
    log.close()
    reopened = Log.open(tmp_path, compact_config(), now_ms=0)
    assert [(r.offset, r.value) for r in read_all(reopened)] == expected


def test_keyless_records_from_before_the_policy_changed_go_but_a_live_producers_newest_batch(
    tmp_path: Path,
) -> None:
    """cleanup.policy changed to compact at runtime (AlterConfigs): the keyless records written
    before go in the next pass, as Kafka's cleaner drops them, except in the newest batch of an
    idempotent producer the log remembers (kept whole, cleaner.py) and in the active segment."""
    log = Log.open(tmp_path, small_config(), now_ms=0)
    for index in range(12):
        keyless = batch(
            b"x" * 200, keys=[None], producer_id=3, producer_epoch=0, base_sequence=index
        )
        log.append_as_leader(keyless, leader_epoch=0, now_ms=1)
    newest_of_producer = log.log_end_offset - 1
    fill(log, rounds=12, keys=2)  # keyed records after it: its batch leaves the active segment
    log.reconfigure(compact_config())
    expected = expected_survivors(log, tombstones_expired=False)
    expected.append((newest_of_producer, b"x" * 200))
    expected.sort()
    result = log.compact(now_ms=2, high_watermark=log.log_end_offset)
    assert result.records_removed >= 11
    assert [(r.offset, r.value) for r in read_all(log)] == expected
    assert log.compact(now_ms=3, high_watermark=log.log_end_offset).records_removed == 0


def test_tombstones_stay_for_delete_retention_ms(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(delete_retention_ms=DAY_MS), now_ms=0)
    fill(log, rounds=3, keys=4, timestamp=5_000)
    log.append_as_leader(batch(None, keys=[b"k1"], timestamp=5_000), leader_epoch=0, now_ms=1)
    fill(log, rounds=3, keys=1, timestamp=5_000)  # push the tombstone out of the active segment
    fill(log, rounds=8, keys=1, timestamp=5_000)
    tombstone_offset = next(r.offset for r in read_all(log) if r.value is None)
    assert tombstone_offset < log.segments()[-1].base_offset
    first_pass = 5_000 + 3 * DAY_MS  # the record timestamps play no part (delete_horizon.py)
    log.compact(now_ms=first_pass, high_watermark=log.log_end_offset)
    kept = [(r.offset, r.key, r.value) for r in read_all(log)]
    assert (tombstone_offset, b"k1", None) in kept
    assert not any(key == b"k1" and value is not None for _, key, value in kept)
    log.compact(now_ms=first_pass + DAY_MS - 1, high_watermark=log.log_end_offset)
    assert (tombstone_offset, b"k1", None) in [(r.offset, r.key, r.value) for r in read_all(log)]
    log.compact(now_ms=first_pass + DAY_MS, high_watermark=log.log_end_offset)
    assert all(r.key != b"k1" for r in read_all(log)), "an expired tombstone is dropped"


def test_batch_fields_survive_a_rewrite(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(max_message_bytes=2000), now_ms=0)
    raw = batch(
        b"old",
        b"new",
        b"solo",
        keys=[b"a", b"a", b"b"],
        timestamp=[10, 20, 30],
        headers=[[("h", b"1")], [("h", b"2")], []],
        compression=COMPRESSION_ZSTD,
        producer_id=42,
        producer_epoch=3,
        base_sequence=0,
    )
    log.append_as_leader(raw, leader_epoch=4, now_ms=1)
    # The producer writes again, so that `raw` is not its newest batch (which stays whole).
    later = batch(b"c", keys=[b"c"], producer_id=42, producer_epoch=3, base_sequence=3)
    log.append_as_leader(later, leader_epoch=4, now_ms=1)
    fill(log, rounds=10, keys=1, epoch=4)
    log.compact(now_ms=2, high_watermark=log.log_end_offset)
    first = decode_batches(log.read(0, 10_000).records)[0]
    header = first.header
    assert (header.base_offset, header.producer_id, header.producer_epoch) == (0, 42, 3)
    assert (header.base_sequence, header.partition_leader_epoch) == (0, 4)
    assert header.compression == COMPRESSION_ZSTD
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in first] == [
        (1, 20, b"a", b"new", (("h", b"2"),)),
        (2, 30, b"b", b"solo", ()),
    ]


def test_log_append_time_survives_a_rewrite(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(message_timestamp_type="LogAppendTime"), now_ms=0)
    log.append_as_leader(
        batch(b"1", b"2", keys=[b"a", b"a"], timestamp=5), leader_epoch=0, now_ms=999
    )
    fill(log, rounds=10, keys=1)
    log.compact(now_ms=2, high_watermark=log.log_end_offset)
    first = decode_batches(log.read(0, 10_000).records)[0]
    assert first.header.is_log_append_time
    assert [(r.offset, r.timestamp, r.value) for r in first] == [(1, 999, b"2")]


def test_control_batches_are_kept_untouched(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(), now_ms=0)
    marker = build_control_batch(
        1, producer_id=9, producer_epoch=0, coordinator_epoch=0, timestamp=1
    )
    log.append_as_leader(marker, leader_epoch=0, now_ms=1, allow_control_batches=True)
    fill(log, rounds=10, keys=1)
    log.compact(now_ms=2, high_watermark=log.log_end_offset)
    assert decode_batches(log.read(0, 10_000).records)[0].header.is_control


def test_emptied_segment_is_deleted_and_reads_skip_the_gap(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(), now_ms=0)
    fill(log, rounds=24, keys=1, unique=False)  # one key: only its newest record survives
    before = len(log.segments())
    result = log.compact(now_ms=2, high_watermark=log.log_end_offset)
    assert result.segments_deleted > 0
    assert len(log.segments()) == before - result.segments_deleted
    assert log.log_start_offset == 0
    records = read_all(log)
    assert records[0].offset > 0
    assert log.read(0, 1).first_offset == records[0].offset


def test_an_emptied_first_segment_stays_so_the_log_start_does_not_move(tmp_path: Path) -> None:
    """A consumer positioned in offsets compaction emptied must go on reading there, not get
    OFFSET_OUT_OF_RANGE (and skip what survived, with auto.offset.reset=latest) after a
    retention pass or a restart moves the log start up to the first segment left."""
    log = Log.open(tmp_path, compact_config(), now_ms=0)
    fill(log, rounds=24, keys=1, unique=False)
    log.compact(now_ms=2, high_watermark=log.log_end_offset)
    assert log.segments()[0].base_offset == 0 and log.segments()[0].size_bytes == 0
    survivor = read_all(log)[0].offset
    assert survivor > log.segments()[1].base_offset > 0
    log.apply_retention(now_ms=3, high_watermark=log.log_end_offset)
    assert log.log_start_offset == 0
    log.compact(now_ms=4, high_watermark=log.log_end_offset)  # again: nothing changes
    assert log.segments()[0].base_offset == 0
    log.close()
    for clean in (True, False):
        if not clean:
            (tmp_path / "clean-shutdown").unlink()
        log = Log.open(tmp_path, compact_config(), now_ms=0)
        assert log.log_start_offset == 0
        assert log.read(0, 1).first_offset == survivor
        log.close()


def test_retention_takes_an_emptied_first_segment_with_the_next(tmp_path: Path) -> None:
    """cleanup.policy=compact,delete: the kept empty segment neither expires by itself nor
    holds back time retention of the segments after it."""
    config = small_config(
        cleanup_policy=frozenset({"compact", "delete"}),
        retention_ms=DAY_MS,
        message_timestamp_after_max_ms=LONG_MAX,  # records from days ahead of the appends' now_ms
    )
    log = Log.open(tmp_path, config, now_ms=0)
    fill(log, rounds=24, keys=1, unique=False, timestamp=1_000)  # k0, all superseded
    for key in range(7):  # distinct keys: they all survive, in an old segment of their own
        x = batch(b"x", keys=[b"x%d" % key], timestamp=1_000)
        log.append_as_leader(x, leader_epoch=0, now_ms=1)
    fill(log, rounds=8, keys=1, unique=False, timestamp=3 * DAY_MS)  # k0's newest
    log.compact(now_ms=2, high_watermark=log.log_end_offset)
    assert log.segments()[0].size_bytes == 0
    log.apply_retention(now_ms=DAY_MS // 2, high_watermark=log.log_end_offset)
    assert log.log_start_offset == 0, "nothing expired: the empty segment stays"
    log.apply_retention(now_ms=2 * DAY_MS, high_watermark=log.log_end_offset)
    assert log.segments()[0].size_bytes > 0, "it went with the expired segment after it"
    assert log.log_start_offset == log.segments()[0].base_offset > 0
    assert min(r.offset for r in read_all(log)) >= log.log_start_offset


def crash_copy(tmp_path: Path, stage: str) -> tuple[Path, list[tuple[int, bytes | None]]]:
    """A log directory as a crash while compacting its first segment at `stage` leaves it, and
    the records it must hold once reopened."""
    source = tmp_path / "source"
    log = Log.open(source, compact_config(), now_ms=0)
    fill(log, rounds=6, keys=5)
    second_base = log.segments()[1].base_offset
    log.close()
    crashed = tmp_path / "crashed"
    shutil.copytree(source, crashed)
    log = Log.open(source, compact_config(), now_ms=0)
    before = [(r.offset, r.value) for r in read_all(log)]
    log.compact(now_ms=2, high_watermark=log.log_end_offset)
    compacted_first = [(r.offset, r.value) for r in read_all(log) if r.offset < second_base]
    log.close()
    first = sorted(source.glob("*.log"))[0]
    suffix = {"cleaned": ".log.cleaned", "swap": ".log.swap"}[stage]
    shutil.copy(first, crashed / (first.name[: -len(".log")] + suffix))
    (crashed / "clean-shutdown").unlink()
    if stage == "cleaned":
        return crashed, before
    assert compacted_first != [item for item in before if item[0] < second_base]
    return crashed, compacted_first + [item for item in before if item[0] >= second_base]


def test_crash_before_the_swap_commits_keeps_the_old_segment(tmp_path: Path) -> None:
    crashed, expected = crash_copy(tmp_path, "cleaned")
    log = Log.open(crashed, compact_config(), now_ms=0)
    assert not list(crashed.glob("*.cleaned"))
    assert [(r.offset, r.value) for r in read_all(log)] == expected


def test_crash_after_the_swap_commits_completes_it(tmp_path: Path) -> None:
    crashed, expected = crash_copy(tmp_path, "swap")
    log = Log.open(crashed, compact_config(), now_ms=0)
    assert not list(crashed.glob("*.swap"))
    assert [(r.offset, r.value) for r in read_all(log)] == expected
    # The stale index files of the old segment were not trusted: lookups are right.
    for offset, _ in expected:
        assert log.read(offset, 1).first_offset <= offset


def test_compaction_is_off_without_the_compact_policy(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    fill(log, rounds=6, keys=2)
    before = read_all(log)
    assert log.compact(now_ms=2, high_watermark=log.log_end_offset).records_removed == 0
    assert read_all(log) == before


def test_nothing_at_or_above_the_high_watermark_is_cleaned_or_shadows_a_committed_record(
    tmp_path: Path,
) -> None:
    """Kafka bounds its cleaner at the last stable offset (at or below the high watermark): a
    committed record removed for a newer one of its key that a leader change then truncates
    away would leave this replica with neither, unlike every other replica."""
    log = Log.open(tmp_path, compact_config(), now_ms=0)
    fill(log, rounds=1, keys=5)
    committed = log.log_end_offset
    fill(log, rounds=5, keys=5)  # newer records of the same keys, not yet replicated
    assert len(log.segments()) > 2
    before = read_all(log)
    result = log.compact(now_ms=2, high_watermark=committed)
    assert result.records_removed == 0
    assert read_all(log) == before
    # Once the high watermark passes them, the closed segments below it are cleaned.
    cleanable_end = log.segments()[-2].base_offset
    assert log.compact(now_ms=2, high_watermark=cleanable_end).records_removed > 0
    for record in read_all(log):
        if record.offset >= cleanable_end:
            assert record in before
    log.close()
