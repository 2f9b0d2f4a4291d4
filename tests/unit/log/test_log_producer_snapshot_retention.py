"""Goal: every segment keeps the producer snapshot taken at its base offset until the segment goes,
so that a crash after retention, however many segments the log has, never loses an idempotent
producer whose batches were deleted; and the snapshots cost no more than one file per segment.

When only the newest two snapshots were kept, the one at the new first segment had been pruned
long before retention deleted the segments below it (more than three segments); an unclean open
replayed from the log start with an empty table and forgot the producer: its retry of batches
already written was refused as UNKNOWN_PRODUCER_ID, and after its KIP-360 epoch bump stored twice.

Method: a real Log in tmp_path. Producer 7 writes offsets 0-3 in segment 0; producer 8 an hour
later rolls one segment per batch (segment.ms); retention deletes segment 0. The log is then
abandoned without close (a process crash: descriptors closed, the files as they are) or the page
cache is lost too (os_crash.OsCrash: only what was fsynced stays), and opened again.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, small_config
from log_helpers import idempotent_batch as idempotent
from os_crash import OsCrash

from samsa.services.broker.log.log import Log
from samsa.services.broker.log.producer_snapshots import snapshot_offsets

NOW = 1_000_000
HOUR_MS = 3_600_000
LATE = NOW + HOUR_MS + 4_000  # producer 8's first batch: past segment.ms, kept by retention
RETENTION_NOW = NOW + HOUR_MS + 5_000  # segment 0 (producer 7's) is past retention.ms
CONFIG = small_config(retention_ms=HOUR_MS, segment_bytes=1 << 20, segment_ms=1_000)


def filled(directory: Path, rolls: int) -> Log:
    """Producer 7 at offsets 0-3 (segment 0), then `rolls` batches of producer 8, each rolling
    a segment of its own: segments 0, 4, 5, ..."""
    log = Log.open(directory, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    for sequence in (0, 2):
        log.append_as_leader(idempotent(7, sequence, 2, at=NOW), leader_epoch=3, now_ms=NOW)
    for sequence in range(rolls):
        at = LATE + 2_000 * sequence
        log.append_as_leader(idempotent(8, sequence, 1, at=at), leader_epoch=3, now_ms=at)
    assert [s.base_offset for s in log.segments()] == [0, *range(4, 4 + rolls)]
    return log


def abandoned(log: Log) -> None:
    """The process dies: its descriptors close, nothing more is written (no clean shutdown)."""
    for segment in log._local_log.segments:
        if segment.fd >= 0:
            segment.close()


def reopened(directory: Path) -> Log:
    return Log.open(directory, CONFIG, now_ms=LATE + 100_000)


def assert_producer_7_known(log: Log) -> None:
    last_sequences = {e.producer_id: e.batches[-1].last_sequence for e in log.producer_entries()}
    assert last_sequences.get(7) == 3, f"producer 7 lost: {last_sequences}"
    retried = log.append_as_leader(idempotent(7, 2, 2, at=NOW), leader_epoch=3, now_ms=LATE)
    assert retried.record_count == 0, "a retried batch is not stored twice"


def snapshots(directory: Path) -> list[int]:
    return snapshot_offsets(os.listdir(directory))


@pytest.mark.parametrize("rolls", [1, 3, 8])
def test_producers_of_deleted_segments_survive_a_process_crash(tmp_path: Path, rolls: int) -> None:
    log = filled(tmp_path, rolls)
    assert log.apply_retention(now_ms=RETENTION_NOW, high_watermark=log.log_end_offset) == 1
    abandoned(log)
    log = reopened(tmp_path)
    try:
        assert log.log_start_offset == 4
        assert_producer_7_known(log)
    finally:
        log.close()


@pytest.mark.parametrize("rolls", [3, 8])
def test_producers_of_deleted_segments_survive_an_os_crash(os_crash: OsCrash, rolls: int) -> None:
    log = filled(os_crash.directory, rolls)
    assert log.apply_retention(now_ms=RETENTION_NOW, high_watermark=log.log_end_offset) == 1
    abandoned(log)
    os_crash.crash()
    log = reopened(os_crash.directory)
    try:
        assert log.log_start_offset == 4
        assert_producer_7_known(log)
    finally:
        log.close()


@pytest.mark.parametrize("second_crash", ["process", "os"])
def test_an_unclean_open_leaves_a_snapshot_at_every_segment_for_a_later_retention(
    os_crash: OsCrash, second_crash: str
) -> None:
    """The unclean open replays from a snapshot at or below the recovery point (0 here: nothing
    was flushed) and must leave one at each later segment again: retention then deletes segment
    0, and the snapshot at 4 is all that is left of producer 7 when the next crash comes."""
    log = filled(os_crash.directory, 5)
    abandoned(log)
    log = reopened(os_crash.directory)
    assert snapshots(os_crash.directory) == [4, 5, 6, 7, 8]
    assert log.apply_retention(now_ms=RETENTION_NOW, high_watermark=log.log_end_offset) == 1
    abandoned(log)
    if second_crash == "os":
        os_crash.crash()
    log = reopened(os_crash.directory)
    try:
        assert_producer_7_known(log)
    finally:
        log.close()


def test_many_rolls_with_retention_keep_one_snapshot_per_live_segment(tmp_path: Path) -> None:
    """Disk cost: a snapshot goes with its segment, so the count follows the live segments; the
    one a clean close writes at the log end goes at the next roll, or the next close."""
    log = filled(tmp_path, 1)
    for sequence in range(1, 40):
        at = LATE + 2_000 * sequence
        log.append_as_leader(idempotent(8, sequence, 1, at=at), leader_epoch=3, now_ms=at)
        log.apply_retention(now_ms=at + HOUR_MS - 9_000, high_watermark=log.log_end_offset)
        bases = [segment.base_offset for segment in log.segments()]
        assert len(bases) <= 6, bases  # retention keeps the newest five segments
        assert snapshots(tmp_path) == bases, f"after {sequence} rolls"
    assert_producer_7_known(log)
    for sequence in (40, 41):  # closes after appends into the active segment (no roll)
        log.close()
        assert snapshots(tmp_path) == [*bases, log.log_end_offset]
        log = reopened(tmp_path)
        log.append_as_leader(idempotent(8, sequence, 1, at=at), leader_epoch=3, now_ms=at)
    at += 2_000
    log.append_as_leader(idempotent(8, 42, 1, at=at), leader_epoch=3, now_ms=at)
    assert snapshots(tmp_path) == [segment.base_offset for segment in log.segments()]
    log.close()


def test_a_segment_compaction_deletes_takes_its_snapshot(tmp_path: Path) -> None:
    config = small_config(cleanup_policy=frozenset({"compact"}), segment_ms=1_000)
    log = Log.open(tmp_path, config, now_ms=NOW)
    for sequence in range(6):  # one key, one segment per batch: compaction empties the middle
        at = NOW + 2_000 * sequence
        record = batch(
            b"v", keys=[b"k"], timestamp=at, producer_id=9, producer_epoch=0, base_sequence=sequence
        )
        log.append_as_leader(record, leader_epoch=0, now_ms=at)
    assert snapshots(tmp_path) == [1, 2, 3, 4, 5]
    assert log.compact(now_ms=NOW + 20_000, high_watermark=log.log_end_offset).segments_deleted
    bases = [segment.base_offset for segment in log.segments()]
    assert bases != [0, 1, 2, 3, 4, 5]
    assert snapshots(tmp_path) == [base for base in bases if base > 0]
    log.close()


def test_a_flush_after_an_unclean_open_syncs_the_snapshots_its_replay_wrote(
    os_crash: OsCrash,
) -> None:
    """The replay's snapshots are written without fsync, like the rolls': the flush that moves
    the recovery point past them fsyncs them first, so an OS crash then keeps them."""
    log = filled(os_crash.directory, 5)
    abandoned(log)
    log = reopened(os_crash.directory)
    synced_before = len(os_crash.synced)
    log.flush()
    names = [name for name in os_crash.synced[synced_before:] if name.endswith(".snapshot")]
    assert len(names) == 5, names
    assert all(os_crash.is_durable(name) for name in names)
    abandoned(log)
    os_crash.crash()
    log = reopened(os_crash.directory)
    try:
        assert log.apply_retention(now_ms=RETENTION_NOW, high_watermark=log.log_end_offset) == 1
        assert_producer_7_known(log)
    finally:
        log.close()


def test_a_torn_snapshot_is_replaced_by_the_next_older_and_written_again(tmp_path: Path) -> None:
    log = filled(tmp_path, 5)
    log.flush()  # the recovery point is the log end: every snapshot is at or below it
    entries = log.producer_entries()
    abandoned(log)
    torn = tmp_path / "00000000000000000008.snapshot"
    torn.write_bytes(torn.read_bytes()[:-3])
    log = reopened(tmp_path)
    try:
        # The unclean open replays the batches (from the log start: segment 0's index files are
        # cut), and their append time is the open's as far as the log knows (producer_entry.py).
        replayed = [entry._replace(last_append_ms=LATE + 100_000) for entry in entries]
        assert log.producer_entries() == replayed
        assert snapshots(tmp_path) == [4, 5, 6, 7, 8]
        assert_producer_7_known(log)
    finally:
        log.close()
