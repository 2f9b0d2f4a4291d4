"""Goal: the aborted-transaction index survives an OS crash that follows an unclean open whose
replay had to start below the recovery point. The replay rebuilds the index files of the
segments it passes, unsynced, and writes the snapshot it did not find; once that snapshot is
there, the next unclean open replays from it and trusts the index files below it as synced.
So an open whose replay repaired a snapshot at or below the recovery point makes what it rebuilt
there durable before it returns.

Method: a real Log in tmp_path under os_crash.OsCrash. Producer 7 writes offsets 0-3 (segment 0);
producer 9's transaction at 4 is aborted by the marker at 5 (segment 4, whose index holds the
entry); a clean restart leaves the recovery point at 6, where the next roll writes its snapshot
unsynced, and DeleteRecords makes its directory entry durable. A kill -9 and an OS crash tear
it: the open replays from 4. Then a kill -9, a flush and an OS crash: the entry for the abort
at 5 must still be there (it passes before 15a748c and ad5e927: no replay wrote snapshots).
"""

from __future__ import annotations

import os
from pathlib import Path

from log_helpers import batch, small_config
from os_crash import OsCrash

from samsa.common.record.codec import CONTROL_TYPE_ABORT, build_batch
from samsa.common.record.control_batches import build_control_batch
from samsa.services.broker.log.log import Log

NOW = 1_000_000
CONFIG = small_config(segment_bytes=1 << 20, segment_ms=1_000)


def killed(log: Log, directory: Path, *, os_crash: OsCrash | None = None) -> Log:
    """The process dies (descriptors closed, nothing more written), the OS too when given."""
    for segment in log._local_log.segments:
        if segment.fd >= 0:
            segment.close()
    if os_crash is not None:
        os_crash.crash()
    return Log.open(directory, CONFIG, now_ms=NOW + 100_000)


def test_the_index_rebuilt_below_the_recovery_point_survives_later_crashes(
    os_crash: OsCrash,
) -> None:
    directory = os_crash.directory
    log = Log.open(directory, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    values = [os.urandom(20) for _ in range(4)]
    first = batch(*values, timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=0)
    log.append_as_leader(first, leader_epoch=3, now_ms=NOW)
    later = NOW + 2_000  # segment.ms: producer 9's batch rolls segment 4
    data = build_batch(
        [b"t"],
        timestamps=later,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    log.append_as_leader(data, leader_epoch=3, now_ms=later, allow_transactional=True)
    abort = build_control_batch(
        CONTROL_TYPE_ABORT, producer_id=9, producer_epoch=1, coordinator_epoch=0, timestamp=later
    )
    log.append_as_leader(abort, leader_epoch=3, now_ms=later, allow_control_batches=True)
    entry = [(a.first_offset, a.last_offset) for a in log.aborted_transactions(0, 6)]
    assert entry == [(4, 5)]
    log.close()
    log = Log.open(directory, CONFIG, now_ms=later)
    at = later + 2_000
    log.append_as_leader(batch(b"x", timestamp=at), leader_epoch=3, now_ms=at)
    assert [s.base_offset for s in log.segments()] == [0, 4, 6] and log.recovery_point == 6
    assert log.delete_records(4) == 4  # its directory fsync makes the roll's entries durable
    log = killed(log, directory)
    log = killed(log, directory, os_crash=os_crash)  # the snapshot at 6 is torn: replay from 4
    log = killed(log, directory)  # replays from the snapshot at 6 the last open wrote
    log.flush()
    log = killed(log, directory, os_crash=os_crash)
    try:
        found = [(a.first_offset, a.last_offset) for a in log.aborted_transactions(4, 7)]
        assert found == entry, "the abort at 5 is still indexed"
    finally:
        log.close()
