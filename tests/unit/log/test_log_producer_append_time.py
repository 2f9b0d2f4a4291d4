"""Goal: each producer entry's `last_append_ms` is the broker's clock at its last append (leader's
or follower's own), never the producer's record timestamps, and it survives a clean restart; where
the log cannot know it (batches an open or a truncation replays) it takes a time at or after the
true one, so the producer's silence (AbortTransaction's guard) reads young, never old.

When the guard read the largest record timestamp, a live transaction stamping a time an hour old
(CreateTime) looked silent at once, and an operator's abort of it went through
(/tmp/review_txnreview/test_hanging_abort_timestamps.py).

Method: a real Log in tmp_path; transactional batches whose records carry STAMPED, an hour before
the broker's clock NOW; the entries are read back after appends, a close and open, an unclean
open, a truncation, and on a follower fed the leader's bytes.
"""

from __future__ import annotations

from pathlib import Path

from log_helpers import read_batches, small_config

from samsa.common.record.codec import build_batch
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.producer_state import ProducerEntry

NOW = 50_000_000
STAMPED = NOW - 3_600_000  # the producer's clock, or any time it chose
CONFIG = small_config(segment_bytes=1 << 20)


def transactional(producer_id: int, sequence: int) -> bytes:
    return build_batch(
        [b"v"],
        keys=[b"k"],
        timestamps=STAMPED,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=True,
    )


def appended(log: Log, producer_id: int, sequence: int, now_ms: int) -> None:
    log.append_as_leader(
        transactional(producer_id, sequence),
        leader_epoch=0,
        now_ms=now_ms,
        allow_transactional=True,
    )


def entry(log: Log, producer_id: int) -> ProducerEntry:
    (found,) = [e for e in log.producer_entries() if e.producer_id == producer_id]
    return found


def test_the_leader_keeps_its_own_clock_beside_the_record_timestamp(tmp_path: Path) -> None:
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    appended(log, 5, 0, NOW)
    appended(log, 5, 1, NOW + 700)
    assert entry(log, 5).last_timestamp == STAMPED
    assert entry(log, 5).last_append_ms == NOW + 700
    log.close()


def test_a_clean_restart_keeps_the_append_time(tmp_path: Path) -> None:
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    appended(log, 5, 0, NOW)
    log.close()  # a snapshot at the log end: nothing to replay
    log = Log.open(tmp_path, CONFIG, now_ms=NOW + 60_000)
    assert entry(log, 5).last_append_ms == NOW
    log.close()


def test_replayed_batches_take_the_time_of_the_open(tmp_path: Path) -> None:
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    appended(log, 5, 0, NOW)
    log.flush()
    for segment in log._local_log.segments:  # the process dies: no close, no snapshot
        segment.close()
    log = Log.open(tmp_path, CONFIG, now_ms=NOW + 60_000)
    assert entry(log, 5).last_append_ms == NOW + 60_000, "unknown: the open's clock"
    log.close()


def test_a_truncation_replays_with_the_latest_clock_it_was_given(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(segment_bytes=1 << 20, segment_ms=1_000), now_ms=NOW)
    appended(log, 5, 0, NOW)
    appended(log, 6, 0, NOW + 10_000)  # rolls (segment.ms): the snapshot at 1 holds 5 at NOW
    appended(log, 6, 1, NOW + 10_020)
    assert [segment.base_offset for segment in log.segments()] == [0, 1]
    log.truncate_to(2)  # producer 6's first batch is replayed
    assert entry(log, 5).last_append_ms == NOW, "from the snapshot"
    assert entry(log, 6).last_append_ms == NOW + 10_020, "no clock: the latest it was given"
    log.close()


def test_a_follower_uses_its_own_clock(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "leader", CONFIG, now_ms=NOW)
    appended(leader, 5, 0, NOW)
    follower = Log.open(tmp_path / "follower", CONFIG, now_ms=NOW)
    follower.append_as_follower(b"".join(read_batches(leader)), now_ms=NOW + 300)
    assert entry(follower, 5).last_append_ms == NOW + 300
    assert entry(follower, 5).last_timestamp == STAMPED
    leader.close()
    follower.close()
