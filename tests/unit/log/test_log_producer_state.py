"""The partition log keeps idempotent producers' state, checks appends against it, and rebuilds it.

Goal: a retried batch the log already holds is never written twice, and answers its original
offsets; a gap or a stale epoch stores nothing; the state the log keeps is the same however it
was reached — appended as leader, replicated as follower, reloaded after a clean close, rebuilt
after a crash (snapshot + replay), after truncation, or after retention deleted the segments that
held a live producer's batches.

Method: real logs on disk (tmp_path) with 2 KiB segments, so that a few appends roll and write
snapshots. The state is compared with `Log.producer_entries()` of a log that saw the same batches
another way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, small_config

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import decode_batches
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.producer_snapshots import SNAPSHOT_SUFFIX

NOW = 1_000_000


def idempotent(pid: int, epoch: int, sequence: int, count: int = 1, size: int = 200) -> bytes:
    return batch(
        *[os.urandom(size) for _ in range(count)],
        timestamp=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def snapshots(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(SNAPSHOT_SUFFIX))


def rolled_snapshots(log: Log) -> list[str]:
    """The names of the snapshots at each segment's base offset but the log's first."""
    return [f"{s.base_offset:020d}{SNAPSHOT_SUFFIX}" for s in log.segments()[1:]]


def fill(log: Log, pids: range, rounds: int) -> list[bytes]:
    """`rounds` batches of 2 records from each producer, sequences continuing; returns them."""
    sent = []
    for round_ in range(rounds):
        for pid in pids:
            data = idempotent(pid, 0, round_ * 2, count=2)
            log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
            sent.append(data)
    return sent


def test_a_retried_batch_answers_its_original_offsets_and_stores_nothing(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    first = idempotent(7, 0, 0, count=3)
    info = log.append_as_leader(first, leader_epoch=0, now_ms=NOW)
    log.append_as_leader(idempotent(7, 0, 3), leader_epoch=0, now_ms=NOW)
    end = log.log_end_offset
    again = log.append_as_leader(first, leader_epoch=0, now_ms=NOW)
    assert (again.first_offset, again.last_offset) == (info.first_offset, info.last_offset)
    assert again.record_count == 0
    assert log.log_end_offset == end
    log.close()


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (idempotent(7, 0, 5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
        (idempotent(8, 0, 5), ErrorCode.UNKNOWN_PRODUCER_ID),
    ],
)
def test_a_gap_or_an_unknown_producer_stores_nothing(
    tmp_path: Path, data: bytes, code: ErrorCode
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    log.append_as_leader(idempotent(7, 0, 0), leader_epoch=0, now_ms=NOW)
    end = log.log_end_offset
    with pytest.raises(SamsaError) as raised:
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    assert raised.value.code == code
    assert log.log_end_offset == end
    log.close()


def test_a_bumped_epoch_fences_the_old_one(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    log.append_as_leader(idempotent(7, 0, 0), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(idempotent(7, 1, 0), leader_epoch=0, now_ms=NOW)
    with pytest.raises(SamsaError) as raised:
        log.append_as_leader(idempotent(7, 0, 1), leader_epoch=0, now_ms=NOW)
    assert raised.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    log.close()


def test_a_follower_builds_the_leaders_state(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "leader", small_config(), now_ms=NOW)
    fill(leader, range(3), rounds=4)
    follower = Log.open(tmp_path / "follower", small_config(), now_ms=NOW)
    offset = 0
    while offset < leader.log_end_offset:
        result = leader.read(offset, 100_000)
        follower.append_as_follower(result.records, now_ms=NOW)
        offset = result.next_offset
    assert follower.producer_entries() == leader.producer_entries()
    assert len(leader.producer_entries()) == 3
    leader.close()
    follower.close()


def test_each_roll_writes_a_snapshot_its_segment_keeps(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    fill(log, range(2), rounds=8)
    assert len(log.segments()) > 3
    assert snapshots(tmp_path) == rolled_snapshots(log)
    log.close()


def test_a_clean_restart_keeps_the_state_and_replays_nothing(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    fill(log, range(3), rounds=5)
    entries = log.producer_entries()
    end = log.log_end_offset
    log.close()
    assert f"{end:020d}{SNAPSHOT_SUFFIX}" in snapshots(tmp_path)
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert reopened.producer_entries() == entries
    reopened.close()


def test_a_crash_rebuilds_the_state_from_a_snapshot_and_the_log(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    fill(log, range(3), rounds=5)
    entries = log.producer_entries()
    log.flush()  # no close: no snapshot at the log end, no clean-shutdown marker
    assert snapshots(tmp_path), "the rolls left snapshots"
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert reopened.producer_entries() == entries
    reopened.close()


def test_a_crash_with_unreadable_snapshots_replays_the_whole_log(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    fill(log, range(3), rounds=5)
    entries = log.producer_entries()
    log.flush()
    for name in snapshots(tmp_path):
        (tmp_path / name).write_bytes(b"torn")
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert reopened.producer_entries() == entries
    # The replay wrote each segment's snapshot again (a later retention needs them).
    assert snapshots(tmp_path) == rolled_snapshots(reopened)
    reopened.close()


def test_truncation_rebuilds_the_state_the_shorter_log_implies(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "truncated", small_config(), now_ms=NOW)
    sent = fill(log, range(2), rounds=8)
    prefix = Log.open(tmp_path / "prefix", small_config(), now_ms=NOW)
    for data in sent[:11]:
        prefix.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    log.truncate_to(prefix.log_end_offset)
    assert log.producer_entries() == prefix.producer_entries()
    # and the producer can continue from there: its next sequence is accepted again
    pid, sequence = 0, 12
    log.append_as_leader(idempotent(pid, 0, sequence, count=2), leader_epoch=0, now_ms=NOW)
    log.close()
    prefix.close()


def test_retention_never_drops_a_live_producers_state(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(retention_bytes=2048), now_ms=NOW)
    log.append_as_leader(idempotent(1, 0, 0, count=2), leader_epoch=0, now_ms=NOW)
    for sequence in range(0, 30, 2):  # another producer fills segments past retention
        log.append_as_leader(idempotent(2, 0, sequence, count=2), leader_epoch=0, now_ms=NOW)
    assert log.apply_retention(now_ms=NOW, high_watermark=log.log_end_offset) > 0
    assert log.log_start_offset > 0, "producer 1's batch is gone from the log"
    log.append_as_leader(idempotent(1, 0, 2), leader_epoch=0, now_ms=NOW)
    log.close()
    reopened = Log.open(tmp_path, small_config(retention_bytes=2048), now_ms=NOW)
    assert {entry.producer_id for entry in reopened.producer_entries()} == {1, 2}
    reopened.close()


def test_expired_producers_are_forgotten_and_a_clean_close_then_keeps_no_snapshot(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    fill(log, range(2), rounds=6)
    assert log.expire_producers(now_ms=NOW + 10, expiration_ms=100) == []
    assert log.expire_producers(now_ms=NOW + 100, expiration_ms=100) == [0, 1]
    log.close()
    assert snapshots(tmp_path) == []
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert reopened.producer_entries() == []
    reopened.close()


def test_a_log_without_idempotent_producers_writes_no_snapshot_at_close(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    log.append_as_leader(batch(b"plain"), leader_epoch=0, now_ms=NOW)
    log.close()
    assert snapshots(tmp_path) == []


def test_compaction_keeps_each_live_producers_newest_batch_whole(tmp_path: Path) -> None:
    config = small_config(cleanup_policy=frozenset({"compact"}))
    log = Log.open(tmp_path, config, now_ms=NOW)
    keyed = batch(b"a", b"b", keys=[b"k", b"j"], timestamp=NOW, producer_id=1,
                  producer_epoch=0, base_sequence=0)  # fmt: skip
    log.append_as_leader(keyed, leader_epoch=0, now_ms=NOW)
    for _ in range(12):  # a non-idempotent writer supersedes both keys, and rolls segments
        log.append_as_leader(
            batch(os.urandom(200), b"x", keys=[b"k", b"j"], timestamp=NOW),
            leader_epoch=0,
            now_ms=NOW,
        )
    entries = log.producer_entries()
    assert log.compact(now_ms=NOW, high_watermark=log.log_end_offset).records_removed > 0
    kept = decode_batches(log.read(0, 100_000).records)[0]
    assert (kept.header.producer_id, len(kept)) == (1, 2), "superseded, yet kept whole"
    log.flush()  # crash, snapshots lost: the state comes back from the log alone
    for name in snapshots(tmp_path):
        (tmp_path / name).unlink()
    reopened = Log.open(tmp_path, config, now_ms=NOW)
    assert reopened.producer_entries() == entries
    reopened.close()
