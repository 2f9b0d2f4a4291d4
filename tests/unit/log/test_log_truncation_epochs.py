"""Goal: replication's truncation (truncate_to, truncate_fully_and_start_at) cuts the log exactly,
across segment boundaries, keeps indexes, epoch cache and recovery point consistent, and the log
accepts appends afterwards; the leader-epoch cache answers KIP-101 end-offset queries.

Method: a real Log with small segments; after each truncation the records read back, the segment
listing, the epoch entries and a reopened log are compared with what must remain.
"""

from __future__ import annotations

import os
from pathlib import Path

from log_helpers import batch, read_all, small_config

from samsa.services.broker.log.log import Log


def filled(tmp_path: Path, *, epochs: tuple[int, ...] = (0,), per_epoch: int = 10) -> Log:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    for leader_epoch in epochs:
        for _ in range(per_epoch):
            log.append_as_leader(batch(b"x" * 150, b"y"), leader_epoch=leader_epoch, now_ms=1)
    return log


def test_truncate_to_across_segments_then_append_again(tmp_path: Path) -> None:
    log = filled(tmp_path, per_epoch=40)
    assert len(log.segments()) >= 4
    target = log.segments()[1].base_offset + 4  # a batch boundary inside the second segment
    log.flush()
    log.truncate_to(target)
    assert log.log_end_offset == target
    assert log.recovery_point == target
    assert len(log.segments()) == 2
    assert [r.offset for r in read_all(log)] == list(range(target))
    info = log.append_as_leader(batch(b"new"), leader_epoch=1, now_ms=2)
    assert info.first_offset == target
    assert read_all(log)[-1].value == b"new"
    # The truncated segment is active again and indexed: reads anywhere in it work.
    for offset in range(log.segments()[1].base_offset, log.log_end_offset):
        assert log.read(offset, 1).first_offset <= offset
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert [r.offset for r in read_all(reopened)] == list(range(target + 1))


def test_truncate_inside_a_batch_drops_that_whole_batch(tmp_path: Path) -> None:
    log = filled(tmp_path)
    log.truncate_to(7)  # batches hold [6, 7]: the batch goes, the log ends at 6
    assert log.log_end_offset == 6
    assert [r.offset for r in read_all(log)] == list(range(6))


def test_truncate_at_or_past_the_end_does_nothing(tmp_path: Path) -> None:
    log = filled(tmp_path)
    before = read_all(log)
    log.truncate_to(20)
    log.truncate_to(25)
    assert read_all(log) == before


def test_truncate_to_a_segment_base_removes_that_segment(tmp_path: Path) -> None:
    log = filled(tmp_path, per_epoch=40)
    bases = [s.base_offset for s in log.segments()]
    log.truncate_to(bases[2])
    assert [s.base_offset for s in log.segments()] == bases[:2]
    assert log.log_end_offset == bases[2]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [f"{b:020d}.log" for b in bases[:2]]


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = filled(tmp_path, epochs=(0, 1))
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (500, 500, 500)
    assert log.leader_epoch_entries() == []
    assert log.read(500, 100).records == b""
    info = log.append_as_follower(batch(b"a", base_offset=500, partition_leader_epoch=3), now_ms=1)
    assert info.first_offset == 500
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 501)
    assert reopened.leader_epoch_entries() == [(3, 500)]


def test_truncate_below_the_first_segment_restarts_the_log(tmp_path: Path) -> None:
    log = filled(tmp_path, per_epoch=40)
    log.delete_records(log.segments()[2].base_offset)
    start = log.segments()[0].base_offset
    log.truncate_to(start - 3)
    assert (log.log_start_offset, log.log_end_offset) == (start - 3, start - 3)


def test_leader_epoch_cache_records_each_epoch_start(tmp_path: Path) -> None:
    log = filled(tmp_path, epochs=(0, 2, 5), per_epoch=3)  # 6 offsets per epoch
    assert log.leader_epoch_entries() == [(0, 0), (2, 6), (5, 12)]
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(1) == (0, 6), "an epoch without data answers its floor"
    assert log.end_offset_for_epoch(2) == (2, 12)
    assert log.end_offset_for_epoch(5) == (5, 18), "the latest epoch ends at the log end"
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_truncation_trims_the_epoch_cache(tmp_path: Path) -> None:
    log = filled(tmp_path, epochs=(0, 2, 5), per_epoch=3)
    log.truncate_to(12)
    assert log.leader_epoch_entries() == [(0, 0), (2, 6)]
    assert log.end_offset_for_epoch(2) == (2, 12)
    log.truncate_to(4)
    assert log.leader_epoch_entries() == [(0, 0)]
    log.append_as_leader(batch(b"z"), leader_epoch=7, now_ms=1)
    assert log.leader_epoch_entries() == [(0, 0), (7, 4)]
    reopened = Log.open(tmp_path, small_config(), now_ms=0)  # the checkpoint followed
    assert reopened.leader_epoch_entries() == [(0, 0), (7, 4)]


def test_log_start_moves_the_first_epoch_start(tmp_path: Path) -> None:
    log = filled(tmp_path, epochs=(0, 2, 5), per_epoch=3)
    log.delete_records(8)
    assert log.leader_epoch_entries() == [(2, 8), (5, 12)]
    assert log.end_offset_for_epoch(1) == (1, 8)


def test_follower_epochs_come_from_the_batches(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    log.append_as_follower(
        batch(b"a", base_offset=0, partition_leader_epoch=1)
        + batch(b"b", base_offset=1, partition_leader_epoch=1)
        + batch(b"c", base_offset=2, partition_leader_epoch=3),
        now_ms=1,
    )
    assert log.leader_epoch_entries() == [(1, 0), (3, 2)]
    assert log.end_offset_for_epoch(2) == (1, 2)


def test_a_new_leadership_starts_its_epoch_at_the_log_end(tmp_path: Path) -> None:
    """A leader that never wrote epoch 2 (it followed epoch 1, then was elected at epoch 3)
    still answers a follower holding epoch-2 batches with where its own log leaves that epoch:
    the start of epoch 3. Without the entry the epoch is unknown to it, and the follower falls
    back to its high watermark (the replication simulation's seed 673 lost acknowledged
    records to that fallback)."""
    log = filled(tmp_path, epochs=(0, 1), per_epoch=1)  # 2 records a batch: epoch 1 from 2, end 4
    assert log.end_offset_for_epoch(2) == (-1, -1)
    log.start_leader_epoch(3)
    assert log.leader_epoch_entries() == [(0, 0), (1, 2), (3, 4)]
    assert log.end_offset_for_epoch(2) == (1, 4)
    log.start_leader_epoch(3)  # the same leadership applied again: nothing changes
    log.start_leader_epoch(2)  # never below the latest epoch
    assert log.leader_epoch_entries() == [(0, 0), (1, 2), (3, 4)]
    info = log.append_as_leader(batch(b"z"), leader_epoch=3, now_ms=2)
    assert info.first_offset == 4 and log.leader_epoch_entries() == [(0, 0), (1, 2), (3, 4)]
    log.close()
    assert Log.open(tmp_path, small_config(), now_ms=0).leader_epoch_entries()[-1] == (3, 4)


def test_truncating_at_the_end_drops_an_epoch_nothing_was_written_in(tmp_path: Path) -> None:
    """A replica elected at epoch 3 that lost the leadership before any append follows the
    next leader: its empty epoch 3 must go, or it would keep asking the leader about an epoch
    the leader never had, and truncate to the same end forever (the simulation's seed 32)."""
    log = filled(tmp_path, epochs=(0, 1), per_epoch=1)
    log.start_leader_epoch(3)
    log.truncate_to(log.log_end_offset)
    assert log.leader_epoch_entries() == [(0, 0), (1, 2)]
    assert log.latest_epoch == 1
    assert [r.offset for r in read_all(log)] == [0, 1, 2, 3]


def test_a_new_epochs_start_survives_a_crash_through_its_batches(tmp_path: Path) -> None:
    """start_leader_epoch writes no file; the epochs are checkpointed with the recovery point,
    and a crash before that leaves the new epoch's batches beyond the checkpointed recovery
    point, where the next open re-reads their epochs."""
    log = filled(tmp_path, epochs=(0, 1), per_epoch=1)
    log.flush()
    log.checkpoint()
    log.start_leader_epoch(3)
    log.append_as_leader(batch(b"z"), leader_epoch=3, now_ms=2)
    for segment in log._local_log.segments:  # kill -9: the descriptors close, nothing else happens
        os.close(segment.fd)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.leader_epoch_entries() == [(0, 0), (1, 2), (3, 4)]
    assert reopened.end_offset_for_epoch(2) == (1, 4)
