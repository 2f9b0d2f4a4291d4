"""Goal: a compacted log reopened after a crash has the leader-epoch cache it had before.

Compaction may remove the first batch of a leader epoch (superseded by a later record of its
key). Recovery after an unclean stop re-reads the unflushed segments' batch headers; it must not
move the epoch's start up to the first batch that survived, or a follower whose diverging records
of the previous epoch lie in between is told that epoch ended later and keeps them (KIP-101).

Method: a real Log, appends under epochs 0, 1 and 2 with epoch 1's first record superseded in
the same segment range; compact, copy the directory as a crash leaves it, reopen.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from log_helpers import read_all, small_config

from samsa.common.record.codec import build_batch
from samsa.services.broker.log.log import Log

NOW = 1_000_000


def compact_config():
    return small_config(cleanup_policy=frozenset({"compact"}))


def put(log: Log, key: bytes, value: bytes, epoch: int) -> int:
    return log.append_as_leader(
        build_batch([value + b"." * 100], keys=[key], timestamps=NOW),
        leader_epoch=epoch,
        now_ms=NOW,
    ).first_offset


def test_a_crash_after_compaction_keeps_each_epochs_start(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = Log.open(directory, compact_config(), now_ms=NOW)
    for n in range(10):
        put(log, b"a%d" % n, b"x", 0)
    epoch_1_start = put(log, b"superseded", b"old", 1)
    for n in range(10):
        put(log, b"b%d" % n, b"y", 1)
    put(log, b"superseded", b"new", 1)
    epoch_2_start = log.log_end_offset
    for n in range(40):  # closes the segments above (compaction leaves the active one alone)
        put(log, b"c%d" % (n % 3), b"z", 2)
    entries = log.leader_epoch_entries()
    assert entries == [(0, 0), (1, epoch_1_start), (2, epoch_2_start)]
    assert log.recovery_point < epoch_1_start, "the cleaned part is unflushed: a crash re-reads it"

    result = log.compact(now_ms=NOW, high_watermark=log.log_end_offset)
    assert result.records_removed > 0
    assert all(r.offset != epoch_1_start for r in read_all(log)), "epoch 1's first record went"
    assert log.leader_epoch_entries() == entries

    crashed = tmp_path / "crashed"
    shutil.copytree(directory, crashed)
    log.close()
    recovered = Log.open(crashed, compact_config(), now_ms=NOW)
    assert recovered.leader_epoch_entries() == entries
    assert recovered.end_offset_for_epoch(0) == (0, epoch_1_start)
    recovered.close()
