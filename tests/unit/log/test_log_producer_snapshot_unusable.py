"""Goal: a clean open whose producer snapshots are all unusable rebuilds the idempotent producers
from the log instead of starting with none (a producer's retry would then be stored twice), and
keeps them through a later close and clean open. A clean open starts empty only when it finds no
snapshot file at all (close keeps one whenever the state holds producers); one it found and had to
drop (its CRC fails, or it lies above the log end after the open found a corrupt tail) means the
state was not empty, so the log is replayed, as Kafka's open does when any snapshot file exists.
The replayed state is snapshotted at the log end: the close of a log untouched since a clean open
writes no snapshot, so the next clean open would otherwise find none and start empty again.

Method: a real Log in tmp_path. Producer 7 writes offsets 0-1, the log is closed cleanly, then the
close's snapshot (or the magic byte of the segment's last batch, a plain one) is damaged. The log
is opened, closed untouched and opened again; each open must know producer 7, and a retry of its
batch must store nothing and answer its original offsets.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, idempotent_batch, small_config

from samsa.services.broker.log.log import Log
from samsa.services.broker.log.producer_snapshots import SNAPSHOT_SUFFIX
from samsa.services.broker.log.segment import LOG_SUFFIX, segment_path

NOW = 1_000_000
CONFIG = small_config(segment_bytes=1 << 20)


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def producer_7_sequences(log: Log) -> dict[int, int]:
    return {e.producer_id: e.batches[-1].last_sequence for e in log.producer_entries()}


@pytest.mark.parametrize("damage", ["close snapshot fails its CRC", "last batch fails its CRC"])
def test_a_clean_open_with_no_usable_snapshot_replays_the_log(tmp_path: Path, damage: str) -> None:
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    first = idempotent_batch(7, 0, 2, at=NOW)
    log.append_as_leader(first, leader_epoch=0, now_ms=NOW)
    if damage == "last batch fails its CRC":
        log.append_as_leader(batch(b"plain", timestamp=NOW), leader_epoch=0, now_ms=NOW)
    log_end_offset = log.log_end_offset
    log.close()
    snapshots = [name for name in os.listdir(tmp_path) if name.endswith(SNAPSHOT_SUFFIX)]
    assert snapshots == [segment_path(tmp_path, log_end_offset, SNAPSHOT_SUFFIX).name]
    if damage == "close snapshot fails its CRC":
        flip_byte(tmp_path / snapshots[0], -1)
    else:  # the open keeps the unframeable batch out of the log (its end offset 2: loading
        # keeps a durable segment's bad bytes for the repair), and drops the close's snapshot
        path = segment_path(tmp_path, 0, LOG_SUFFIX)
        flip_byte(path, int.from_bytes(path.read_bytes()[8:12], "little") + 12 + 16)  # magic

    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert log.log_end_offset == 2
    assert producer_7_sequences(log) == {7: 1}
    log.close()  # untouched since the clean open: no snapshot of its own
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    try:
        assert producer_7_sequences(log) == {7: 1}
        retried = log.append_as_leader(first, leader_epoch=0, now_ms=NOW)
        assert (retried.record_count, retried.first_offset, retried.last_offset) == (0, 0, 1)
        assert log.log_end_offset == 2
    finally:
        log.close()
