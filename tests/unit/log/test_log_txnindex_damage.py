"""Goal: a `.txnindex` file that fails its check is rebuilt from the log wherever it lies, so no
aborted record ever shows to a read_committed reader. The open cuts a damaged file at its first
bad entry; the entries cut must come back even when the file lies below where the open would
replay from (after a clean shutdown it replays nothing; after a crash, from a snapshot at or
below the recovery point), and what the open rebuilt must be durable before a later unclean
open, replaying from a snapshot the rebuild wrote, trusts it (DESIGN §3: an index is never
trusted over the log).

Method: a real Log in tmp_path with 2 KiB segments. Segment 0 holds two aborted transactions
(producer 1 at 0 aborted at 1, producer 2 at 2 aborted at 3); plain batches roll two more
segments. The first segment's index file is then damaged by hand (a flipped byte in either
entry, a torn second entry) after a clean close or after a flush and a kill -9; the reopened
log must list both aborts and hold the file's original bytes. The durability case runs under
os_crash.OsCrash and asks whether the rebuilt file would survive an OS crash.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import TXN_NOW, small_config, txn_append, txn_marker, txn_opening
from os_crash import OsCrash

from samsa.common.record.codec import CONTROL_TYPE_ABORT, build_batch
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.segment import TXN_INDEX_SUFFIX, segment_path
from samsa.services.broker.log.transaction_index import ENTRY_BYTES, AbortedTransaction

NOW = TXN_NOW
append, opening = txn_append, txn_opening


def aborting(pid: int) -> bytes:
    return txn_marker(CONTROL_TYPE_ABORT, pid)


def written(directory: Path) -> tuple[Log, list[AbortedTransaction], bytes]:
    """The log described in the module docstring, its aborts and segment 0's index bytes."""
    log = Log.open(directory, small_config(), now_ms=NOW)
    for pid in (1, 2):
        append(log, opening(pid))
        append(log, aborting(pid))
    while len(log.segments()) < 3:
        append(log, build_batch([os.urandom(200)], timestamps=NOW))
    aborts = log.aborted_transactions(0, log.log_end_offset)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborts] == [
        (1, 0, 1),
        (2, 2, 3),
    ]
    return log, aborts, segment_path(directory, 0, TXN_INDEX_SUFFIX).read_bytes()


def flipped(at: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


DAMAGE = {
    "first entry flipped": flipped(3),
    "second entry flipped": flipped(ENTRY_BYTES + 10),
    "second entry torn": lambda data: data[: ENTRY_BYTES + 7],
}


def damage(directory: Path, how: Callable[[bytes], bytes]) -> None:
    """Rewrite segment 0's index file damaged, durably (bit rot on the disk)."""
    path = segment_path(directory, 0, TXN_INDEX_SUFFIX)
    data = how(path.read_bytes())
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def killed(log: Log) -> None:
    """The process dies: descriptors closed, nothing more written (no clean-shutdown marker)."""
    for segment in log._local_log.segments:
        if segment.fd >= 0:
            segment.close()


@pytest.mark.parametrize("case", DAMAGE)
@pytest.mark.parametrize("stop", ["clean", "kill -9 after a flush"])
def test_a_damaged_index_file_below_the_replay_is_rebuilt(
    tmp_path: Path, case: str, stop: str
) -> None:
    log, aborts, good = written(tmp_path)
    if stop == "clean":
        log.close()
    else:
        log.flush()  # the recovery point is the log end: the replay would start at segment 2
        log.checkpoint()
        killed(log)
    damage(tmp_path, DAMAGE[case])
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    try:
        assert reopened.aborted_transactions(0, reopened.log_end_offset) == aborts
        assert segment_path(tmp_path, 0, TXN_INDEX_SUFFIX).read_bytes() == good
    finally:
        reopened.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == aborts
    reopened.close()


def test_what_a_clean_open_rebuilt_is_durable_before_it_returns(os_crash: OsCrash) -> None:
    """The rebuild wrote the snapshots at segments 1 and 2 again, below the recovery point (the
    log end): a kill -9 now, then an unclean open, replays from segment 2's and trusts the
    index file of segment 0 as synced, so an OS crash before the next flush must not lose it."""
    directory = os_crash.directory
    log, _, good = written(directory)
    log.close()
    damage(directory, DAMAGE["second entry torn"])
    reopened = Log.open(directory, small_config(), now_ms=NOW)
    name = segment_path(directory, 0, TXN_INDEX_SUFFIX).name
    assert os_crash.durable(name) == good
    killed(reopened)
