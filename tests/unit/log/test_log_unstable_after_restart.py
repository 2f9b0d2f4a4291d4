"""Goal: a transaction ended by a marker the high watermark has not passed still holds the last
stable offset after a restart, clean or not (LSO = min(high watermark, first offset of every
open or not yet replicated transaction), transaction_index.py). Were it forgotten, the LSO would
jump past its records; a read_committed reader would be given them, and a truncation to the high
watermark (the new leader never had the marker) would open the transaction again under it.

Method: a real Log in tmp_path with 2 KiB segments. Producer 1's transaction starts at 0 and its
COMMIT marker is appended above the high watermark; the log is closed, or killed (descriptors
closed, nothing more written) after a roll and a flush put a snapshot at or below the recovery
point, and opened with the partition's checkpointed high watermark as PartitionHost opens it
(and told it again, as HostedPartition is). The snapshots a replay writes are decoded to show
what they list: the transactions at or above the high watermark the open was given, no more.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import TXN_NOW, small_config, txn_append, txn_marker, txn_opening

from samsa.common.record.codec import CONTROL_TYPE_COMMIT, build_batch
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.producer_snapshot_codec import decode_snapshot
from samsa.services.broker.log.producer_snapshots import SNAPSHOT_SUFFIX
from samsa.services.broker.log.producer_state import CompletedTransaction
from samsa.services.broker.log.segment import segment_path

NOW = TXN_NOW
append, opening = txn_append, txn_opening


def commit(pid: int) -> bytes:
    return txn_marker(CONTROL_TYPE_COMMIT, pid)


def plain() -> bytes:
    return build_batch([os.urandom(200)], timestamps=NOW)


def killed(log: Log) -> None:
    """The process dies: descriptors closed, nothing more written (no clean-shutdown marker)."""
    for segment in log._local_log.segments:
        if segment.fd >= 0:
            segment.close()


def reopened(directory: Path, high_watermark: int) -> Log:
    """PartitionHost._open, then HostedPartition.__post_init__."""
    log = Log.open(directory, small_config(), now_ms=NOW, high_watermark=high_watermark)
    log.on_high_watermark(high_watermark)
    return log


@pytest.mark.parametrize("stop", ["clean", "kill -9 after a roll and a flush"])
def test_a_transaction_committed_above_the_high_watermark_holds_the_lso_after_a_restart(
    tmp_path: Path, stop: str
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    first = append(log, opening(1))  # 0
    append(log, plain())  # 1
    high_watermark = append(log, commit(1))  # 2: the marker is not replicated yet
    log.on_high_watermark(high_watermark)
    assert log.last_stable_offset(high_watermark) == first
    if stop == "clean":
        log.close()
    else:
        while len(log.segments()) < 2:  # the roll snapshots the state after the marker
            append(log, plain())
        log.flush()  # the recovery point passes that snapshot: the open replays from it
        log.checkpoint()
        killed(log)
    log = reopened(tmp_path, high_watermark)
    assert log.last_stable_offset(high_watermark) == first
    assert log.unstable_transaction_count() == 1
    # what a read_committed reader is given now stays below the transaction when the new
    # leader, lacking the marker, has this replica truncate to the high watermark
    given = log.read(0, 1 << 20, max_offset=log.last_stable_offset(high_watermark)).next_offset
    log.truncate_to(high_watermark)
    log.on_high_watermark(high_watermark)
    assert log.last_stable_offset(high_watermark) == first
    assert given <= first
    log.close()


def test_a_restart_settles_what_the_checkpointed_high_watermark_passed(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    append(log, opening(1))
    marker_at = append(log, commit(1))
    log.on_high_watermark(marker_at)
    log.close()  # the snapshot lists the transaction; the partition checkpoints a later HW
    log = Log.open(tmp_path, small_config(), now_ms=NOW, high_watermark=marker_at + 1)
    assert log.unstable_transaction_count() == 0
    assert log.last_stable_offset(marker_at + 1) == marker_at + 1
    log.close()


def listed(directory: Path, offset: int) -> tuple[CompletedTransaction, ...]:
    return decode_snapshot(
        segment_path(directory, offset, SNAPSHOT_SUFFIX).read_bytes(), loaded_ms=0
    ).unsettled


@pytest.mark.parametrize("high_watermark", [1, 2])
def test_the_snapshots_a_replay_writes_list_what_lies_above_the_high_watermark(
    tmp_path: Path, high_watermark: int
) -> None:
    """A kill -9 before any flush: the open replays from the log start and writes the snapshots
    of the second and third segments again. Listing the transaction (marker at 1) when the high
    watermark is 1, they keep it unstable through a second kill -9 after a flush, whose open
    replays from the third segment's snapshot; a high watermark of 2 settled it: they list
    nothing."""
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    first = append(log, opening(1))
    marker_at = append(log, commit(1))
    while len(log.segments()) < 3:
        append(log, plain())
    bases = [segment.base_offset for segment in log.segments()]
    killed(log)
    log = reopened(tmp_path, high_watermark)
    expected = (CompletedTransaction(1, first, marker_at),) if high_watermark <= marker_at else ()
    assert [listed(tmp_path, base) for base in bases[1:]] == [expected, expected]
    log.flush()
    log.checkpoint()
    killed(log)
    log = reopened(tmp_path, high_watermark)
    assert log.last_stable_offset(high_watermark) == (first if expected else high_watermark)
    log.close()


def test_a_transaction_whose_producer_expired_still_holds_the_lso_after_a_restart(
    tmp_path: Path,
) -> None:
    """Producer expiry forgets a producer whose transaction ended (only an open one keeps it),
    though its marker is still above the high watermark. With the table empty, close() deleted
    every snapshot, the list of such transactions with them, and the clean open, finding none,
    started empty: the LSO jumped past the transaction (found by a review)."""
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    first = append(log, opening(1))  # 0
    append(log, plain())  # 1
    high_watermark = append(log, commit(1))  # 2: the marker is not replicated yet
    log.on_high_watermark(high_watermark)
    assert log.expire_producers(now_ms=NOW + 10_000, expiration_ms=1_000) == [1]
    assert log.last_stable_offset(high_watermark) == first  # in memory, still held
    log.close()
    log = reopened(tmp_path, high_watermark)
    try:
        assert log.unstable_transaction_count() == 1
        assert log.last_stable_offset(high_watermark) == first
    finally:
        log.close()
