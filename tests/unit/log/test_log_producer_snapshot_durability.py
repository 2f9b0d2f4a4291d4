"""Goal: an OS crash (page cache lost) never loses an idempotent producer whose batches retention
or DeleteRecords deleted. Such a producer survives only in the producer snapshot at the new
first segment, written at the roll without fsync; recovery trusts the snapshots at or below the
recovery point. So, as Kafka's flush after a roll does, every snapshot is fsynced (with its
directory entry) before a flush moves the recovery point to or past it, and before segments
below it are deleted; appends never fsync one, and each is fsynced at most once.

Method: a real Log in tmp_path under os_crash.OsCrash, which records what fsync made durable and
on `crash` puts the directory back to it (files and entries not synced are lost). Producer 7
writes offsets 0-3 in segment 0; producer 8's batch an hour later rolls segment 4 (segment.ms),
whose snapshot is the only record of producer 7 once segment 0 is deleted. After the crash the
reopened log must still know producer 7: its retry of sequences 2-3 is stored nowhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, small_config
from log_helpers import idempotent_batch as idempotent
from os_crash import OsCrash

from samsa.services.broker.log.log import Log
from samsa.services.broker.log.producer_snapshots import SNAPSHOT_SUFFIX
from samsa.services.broker.log.segment import segment_path

NOW = 1_000_000
HOUR_MS = 3_600_000
LATE = NOW + HOUR_MS + 4_000  # producer 8's batch: a new segment (segment.ms), kept
CONFIG = small_config(retention_ms=HOUR_MS, segment_bytes=1 << 20, segment_ms=1_000)


def filled(directory: Path) -> Log:
    """Producer 7 at offsets 0-3 (segment 0), producer 8 at offset 4 (segment 4)."""
    log = Log.open(directory, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    for sequence in (0, 2):
        log.append_as_leader(idempotent(7, sequence, 2, at=NOW), leader_epoch=3, now_ms=NOW)
    log.append_as_leader(idempotent(8, 0, 1, at=LATE), leader_epoch=3, now_ms=LATE)
    assert [segment.base_offset for segment in log.segments()] == [0, 4]
    return log


def crashed(log: Log, os_crash: OsCrash) -> Log:
    """The OS dies: descriptors closed, nothing more written, the page cache lost; reopen."""
    for segment in log._local_log.segments:
        if segment.fd >= 0:
            segment.close()
    os_crash.crash()
    return Log.open(os_crash.directory, CONFIG, now_ms=LATE + 10_000)


def assert_producer_7_known(log: Log) -> None:
    last_sequences = {e.producer_id: e.batches[-1].last_sequence for e in log.producer_entries()}
    assert last_sequences.get(7) == 3, f"producer 7 lost: {last_sequences}"
    retried = log.append_as_leader(idempotent(7, 2, 2, at=NOW), leader_epoch=3, now_ms=LATE)
    assert retried.record_count == 0, "a retried batch is not stored twice"


def snapshot_names(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(SNAPSHOT_SUFFIX))


@pytest.mark.parametrize("deletion", ["retention", "retention of every segment", "delete_records"])
def test_producers_of_deleted_segments_survive_an_os_crash(
    os_crash: OsCrash, deletion: str
) -> None:
    log = filled(os_crash.directory)
    if deletion == "retention":
        assert log.apply_retention(now_ms=NOW + HOUR_MS + 5_000, high_watermark=5) == 1
    elif deletion == "retention of every segment":
        assert log.apply_retention(now_ms=LATE + HOUR_MS + 1, high_watermark=5) == 2
    else:
        assert log.delete_records(4) == 4
    reopened = crashed(log, os_crash)
    try:
        assert reopened.log_start_offset == reopened.segments()[0].base_offset
        assert_producer_7_known(reopened)
    finally:
        reopened.close()


def test_a_flush_makes_every_snapshot_it_moves_the_recovery_point_past_durable(
    os_crash: OsCrash,
) -> None:
    log = filled(os_crash.directory)
    log.flush()
    assert log.recovery_point == 5
    names = snapshot_names(os_crash.directory)
    assert names, "the roll wrote a snapshot"
    assert all(os_crash.is_durable(name) for name in names), names
    reopened = crashed(log, os_crash)
    try:
        # The flushed recovery point makes segment 4 recovered: deleting segment 0 now needs
        # the snapshot at 4 from the disk.
        assert reopened.apply_retention(now_ms=LATE + 10_000, high_watermark=5) == 1
        assert_producer_7_known(reopened)
    finally:
        reopened.close()


def test_snapshots_cost_no_fsync_on_append_and_one_per_roll_at_most(os_crash: OsCrash) -> None:
    log = filled(os_crash.directory)
    for sequence in range(1, 6):  # segment.ms rolls one segment per batch
        at = LATE + 2_000 * sequence
        log.append_as_leader(idempotent(8, sequence, 1, at=at), leader_epoch=3, now_ms=at)
    assert not [name for name in os_crash.synced if name.endswith(SNAPSHOT_SUFFIX)]
    log.flush()
    log.flush()
    at = LATE + 20_000
    log.append_as_leader(idempotent(8, 6, 1, at=at), leader_epoch=3, now_ms=at)
    log.flush()
    # Segments 4-9 rolled before the first flush, which syncs each one's snapshot; segment 10
    # rolled before the third. The second flush has nothing to sync.
    synced = [name for name in os_crash.synced if name.endswith(SNAPSHOT_SUFFIX)]
    assert synced == [segment_path(Path(), offset, SNAPSHOT_SUFFIX).name for offset in range(4, 11)]
    log.close()


def test_a_log_without_producers_fsyncs_no_snapshot(os_crash: OsCrash) -> None:
    """An empty snapshot needs no fsync: without it the rebuild finds the state empty too."""
    log = Log.open(os_crash.directory, CONFIG, now_ms=NOW)
    for index in range(4):
        at = NOW + 2_000 * index
        log.append_as_leader(batch(b"x", timestamp=at), leader_epoch=0, now_ms=at)
    log.flush()
    assert log.apply_retention(now_ms=NOW + HOUR_MS + 10_000, high_watermark=4) == 4
    assert not [name for name in os_crash.synced if name.endswith(SNAPSHOT_SUFFIX)]
    reopened = crashed(log, os_crash)
    try:
        assert reopened.producer_entries() == []
        assert (reopened.log_start_offset, reopened.log_end_offset) == (4, 4)
    finally:
        reopened.close()


@pytest.mark.parametrize("settled_by", ["flush and checkpoint", "clean restart"])
def test_a_snapshot_rolled_at_the_recovery_point_is_fsynced_after_a_process_crash(
    os_crash: OsCrash, settled_by: str
) -> None:
    """A flush (with the periodic checkpoint) or a clean close leaves the recovery point at the
    log end, so the next roll writes its snapshot exactly there (over a close's durable one),
    unsynced, and only the process remembers that. After a kill -9 the unclean open trusts the
    snapshots at or below the recovery point: the one it replays from must still be fsynced
    before retention deletes the segments below it, or an OS crash then tears it and producer 7
    (whose batches are gone) is lost."""
    log = Log.open(os_crash.directory, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    for sequence in (0, 2):
        log.append_as_leader(idempotent(7, sequence, 2, at=NOW), leader_epoch=3, now_ms=NOW)
    if settled_by == "clean restart":
        log.close()
        log = Log.open(os_crash.directory, CONFIG, now_ms=NOW)
    else:
        log.flush()
        log.checkpoint()
    log.append_as_leader(idempotent(8, 0, 1, at=LATE), leader_epoch=3, now_ms=LATE)
    assert [segment.base_offset for segment in log.segments()] == [0, 4]
    assert log.recovery_point == 4, "the roll's snapshot lies at the recovery point"
    for segment in log._local_log.segments:  # kill -9: no close, the page cache stays
        if segment.fd >= 0:
            segment.close()
    log = Log.open(os_crash.directory, CONFIG, now_ms=LATE + 1_000)
    assert log.apply_retention(now_ms=NOW + HOUR_MS + 5_000, high_watermark=5) == 1
    reopened = crashed(log, os_crash)
    try:
        assert_producer_7_known(reopened)
    finally:
        reopened.close()
