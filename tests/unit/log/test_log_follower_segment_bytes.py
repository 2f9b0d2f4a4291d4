"""Goal: lowering a topic's segment.bytes never wedges replication. A follower that lags (or
starts empty) fetches what the leader wrote under the larger setting: a fetched range, or a
single batch, longer than the new segment.bytes. The follower refused such an append
(RECORD_LIST_TOO_LARGE) and fetched the same bytes again for ever, out of the ISR for good. Now
it stores the range as several appends of at most segment.bytes each, cut between batches, a
lone larger batch on its own (as the leader stored it), and its log holds the leader's bytes.

Method: two real Logs in tmp_path. The leader writes under 4 KiB segments; both are reconfigured
to 1 KiB (the least segment.bytes); the follower appends what each read of the leader returns
(a read returns one segment's batches at most), from its log end, until it holds the leader's.
"""

from __future__ import annotations

import os
from pathlib import Path

from log_helpers import read_batches, small_config

from samsa.common.record.codec import build_batch
from samsa.services.broker.log.log import Log

LARGE = small_config(segment_bytes=4096, max_message_bytes=4096)
SMALL = small_config(segment_bytes=1024, max_message_bytes=1024)


def written(directory: Path, value_bytes: list[int]) -> Log:
    leader = Log.open(directory, LARGE, now_ms=0)
    for size in value_bytes:
        leader.append_as_leader(build_batch([os.urandom(size)]), leader_epoch=0, now_ms=1)
    leader.reconfigure(SMALL)
    return leader


def replicate(leader: Log, follower: Log) -> None:
    while follower.log_end_offset < leader.log_end_offset:
        fetched = leader.read(follower.log_end_offset, 1 << 20).records
        follower.append_as_follower(fetched, now_ms=2)


def test_a_follower_stores_a_range_larger_than_the_lowered_segment_bytes(tmp_path: Path) -> None:
    leader = written(tmp_path / "leader", [300] * 9)  # ~370-byte batches, 9 in ~3.3 KiB
    follower = Log.open(tmp_path / "follower", SMALL, now_ms=0)
    fetched = leader.read(0, 1 << 20).records
    assert len(fetched) > SMALL.segment_bytes
    info = follower.append_as_follower(fetched, now_ms=2)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 8, 9)
    assert info.size_bytes == len(fetched)
    assert read_batches(follower) == read_batches(leader)
    assert all(s.size_bytes <= SMALL.segment_bytes for s in follower.segments())
    assert len(follower.segments()) >= 4


def test_a_follower_stores_a_lone_batch_larger_than_the_lowered_segment_bytes(
    tmp_path: Path,
) -> None:
    leader = written(tmp_path / "leader", [3000, 200, 3000])
    follower = Log.open(tmp_path / "follower", SMALL, now_ms=0)
    assert len(leader.read(0, 1 << 20).records) > SMALL.segment_bytes
    replicate(leader, follower)
    assert read_batches(follower, max_bytes=1 << 20) == read_batches(leader, max_bytes=1 << 20)
    assert follower.log_end_offset == 3
    follower.close()
    reopened = Log.open(tmp_path / "follower", SMALL, now_ms=3)
    assert read_batches(reopened, max_bytes=1 << 20) == read_batches(leader, max_bytes=1 << 20)
