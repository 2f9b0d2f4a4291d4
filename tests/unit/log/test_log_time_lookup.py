"""Goal: offset_for_timestamp finds the first record whose timestamp is >= T — across idle gaps,
segments, out-of-order producer timestamps, LogAppendTime and a moved log start — and answers
the same after a reopen (indexes rebuilt or loaded); a seeded simulation adds truncations,
crashes, lost time indexes, compaction, negative timestamps and transaction markers (Kafka's
search counts markers too).

Method: a real Log whose records carry chosen timestamps; every answer is compared with a dumb
reference: a scan over every record read back from the log.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.common.record.codec import CONTROL_TYPE_COMMIT, build_control_batch, decode_batches
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.segment import TIME_INDEX_SUFFIX


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


# --- a seeded simulation -------------------------------------------------------------------------


def random_append(rng: random.Random, log: Log) -> None:
    """One to three batches a follower stores (any offsets, markers anywhere): keyed records
    for compaction, timestamps out of order, some negative, now and then LogAppendTime."""
    batches: list[bytes] = []
    offset = log.log_end_offset
    for _ in range(rng.randint(1, 3)):
        offset += rng.choice([0, 0, 0, 1, 4])  # a gap: a compacted leader's log
        if rng.random() < 0.1:
            stored = build_control_batch(
                CONTROL_TYPE_COMMIT,
                producer_id=3,
                producer_epoch=0,
                coordinator_epoch=0,
                timestamp=rng.randrange(-3, 200),
                base_offset=offset,
            )
        else:
            count = rng.randint(1, 4)
            stored = batch(
                *[rng.randbytes(rng.randrange(0, 120)) for _ in range(count)],
                keys=[b"k%d" % rng.randrange(6) for _ in range(count)],
                timestamp=[rng.randrange(-4, 200) for _ in range(count)],
                base_offset=offset,
                log_append_time=rng.random() < 0.05,
            )
        batches.append(stored)
        offset = decode_batches(stored)[0].header.next_offset
    log.append_as_follower(b"".join(batches), now_ms=1)


def scanned(log: Log) -> list[tuple[int, int]]:
    """(offset, timestamp) of every stored record from the log start, markers too; reads step
    over a follower's offset gaps, which can leave a read empty (read_all refuses those)."""
    records, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 16)
        for stored in decode_batches(result.records):
            records += [(r.offset, r.timestamp) for r in stored if r.offset >= offset]
        offset = result.next_offset
    return records


def check_against_a_scan(log: Log, where: str) -> None:
    """Every probe around every stored timestamp answers as the scan over all records does."""
    records = scanned(log)
    timestamps = {timestamp for _, timestamp in records} | {-5, -1, 0, 10**6}
    for probe in sorted(timestamps | {t + 1 for t in timestamps} | {t - 1 for t in timestamps}):
        expected = next(((o, t) for o, t in records if t >= probe), None)
        assert log.offset_for_timestamp(probe) == expected, f"{where} timestamp {probe}"


@pytest.mark.parametrize("seed", range(10))
def test_random_logs_answer_as_a_scan_does(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "log"
    config = small_config(
        cleanup_policy=frozenset({"compact", "delete"}),
        index_interval_bytes=rng.choice([0, 64, 128, 512]),
    )
    log = Log.open(directory, config, now_ms=0)
    for step in range(120):
        action = rng.random()
        if action < 0.55:
            random_append(rng, log)
        elif action < 0.62:
            log.delete_records(rng.randint(log.log_start_offset, log.log_end_offset))
        elif action < 0.70:
            log.truncate_to(rng.randint(log.log_start_offset, log.log_end_offset))
        elif action < 0.77:
            log.compact(now_ms=10**9, high_watermark=log.log_end_offset)
        elif action < 0.84:
            log.close()
            log = Log.open(directory, config, now_ms=0)
        elif action < 0.92:  # a crash: the files as they are, without a clean close
            crashed = tmp_path / f"crashed-{step}"
            shutil.copytree(directory, crashed)
            log.close()
            shutil.rmtree(directory)
            crashed.rename(directory)
            log = Log.open(directory, config, now_ms=0)
        else:  # lost time indexes: rebuilt from the log on open
            log.close()
            for path in directory.glob(f"*{TIME_INDEX_SUFFIX}"):
                path.unlink()
            log = Log.open(directory, config, now_ms=0)
        check_against_a_scan(log, f"seed {seed}, step {step}:")
    log.close()
