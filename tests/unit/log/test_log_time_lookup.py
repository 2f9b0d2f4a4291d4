"""Goal: offset_for_timestamp finds the first record whose timestamp is >= T — across idle gaps,
segments, out-of-order producer timestamps, LogAppendTime and a moved log start — and answers
the same after a reopen (indexes rebuilt or loaded).

Method: a real Log whose records carry chosen timestamps; every answer is compared with a dumb
reference: a scan over every record read back from the log.
"""

from __future__ import annotations

import random
from pathlib import Path

from log_helpers import batch, read_all, small_config

from samsa.services.broker.log.log import Log


def reference(log: Log, timestamp: int) -> tuple[int, int] | None:
    for record in read_all(log):
        if record.timestamp >= timestamp and record.offset >= log.log_start_offset:
            return record.offset, record.timestamp
    return None


def check_every_timestamp(log: Log, timestamps: set[int]) -> None:
    probes = set(timestamps) | {t + 1 for t in timestamps} | {t - 1 for t in timestamps} | {0}
    for probe in sorted(probes):
        assert log.offset_for_timestamp(probe) == reference(log, probe), probe


def test_lookup_across_idle_gaps_and_segments(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    timestamps: set[int] = set()
    clock = 1_000
    for burst in range(6):
        for _ in range(8):
            clock += 10
            log.append_as_leader(batch(b"x" * 100, timestamp=clock), leader_epoch=0, now_ms=clock)
            timestamps.add(clock)
        clock += 1_000_000 * (burst + 1)  # idle
    assert len(log.segments()) > 2
    assert log.offset_for_timestamp(1_010) == (0, 1_010)
    assert log.offset_for_timestamp(1_011) == (1, 1_020)
    assert log.offset_for_timestamp(clock) is None
    check_every_timestamp(log, timestamps)


def test_lookup_with_out_of_order_timestamps(tmp_path: Path) -> None:
    rng = random.Random(7)
    log = Log.open(tmp_path, small_config(), now_ms=0)
    timestamps: set[int] = set()
    for _ in range(40):
        stamps = [rng.randrange(1, 5_000) for _ in range(rng.randrange(1, 4))]
        log.append_as_leader(
            batch(*[b"v" * 60] * len(stamps), timestamp=stamps), leader_epoch=0, now_ms=1
        )
        timestamps.update(stamps)
    check_every_timestamp(log, timestamps)
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    check_every_timestamp(reopened, timestamps)


def test_lookup_under_log_append_time(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(message_timestamp_type="LogAppendTime"), now_ms=0)
    for now_ms in (100, 200, 300):
        log.append_as_leader(batch(b"a", b"b", timestamp=5), leader_epoch=0, now_ms=now_ms)
    assert log.offset_for_timestamp(5) == (0, 100)
    assert log.offset_for_timestamp(150) == (2, 200)
    assert log.offset_for_timestamp(301) is None


def test_lookup_skips_records_below_the_log_start(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    log.append_as_leader(batch(b"a", b"b", b"c", timestamp=[10, 20, 30]), leader_epoch=0, now_ms=1)
    log.delete_records(2)
    assert log.offset_for_timestamp(0) == (2, 30)
    assert log.offset_for_timestamp(15) == (2, 30)
