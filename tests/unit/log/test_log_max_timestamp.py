"""Goal: Log.max_timestamp_record (ListOffsets MAX_TIMESTAMP, KIP-734) answers the record with the
largest timestamp at or above the log start and below the given end — the lowest offset among
equals, a transaction marker never — whatever the log holds: out-of-order and tied timestamps,
zstd and plain batches, LogAppendTime, offset gaps, many segments, bounds cutting through
batches, a moved log start, truncation, a clean reopen, rebuilt indexes and a crash's recovery;
and it decodes a few batches, not the log.

Method: logs built by follower appends (any offsets, markers anywhere, no producer checks) are
compared with a dumb reference: a scan over every record read back from the log. A seeded
simulation mixes appends with DeleteRecords, truncations, reopens and crashes, and checks many
end offsets after every step.
"""

from __future__ import annotations

import random
import shutil
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_helpers import batch, small_config

from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    RecordBatch,
    build_batch,
    build_control_batch,
    decode_batches,
)
from samsa.common.record.header import COMPRESSION_NONE, COMPRESSION_ZSTD
from samsa.services.broker.log import local_log
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.segment import TIME_INDEX_SUFFIX


def stored_batches(log: Log) -> Iterator[RecordBatch]:
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 16)
        yield from decode_batches(result.records)
        offset = result.next_offset


class Reference:
    """Every record the log holds from its start, ranked by scanning them all."""

    def __init__(self, log: Log) -> None:
        records = sorted(
            (record.offset, record.timestamp)
            for stored in stored_batches(log)
            if not stored.header.is_control
            for record in stored
            if record.offset >= log.log_start_offset
        )
        self.offsets = [offset for offset, _ in records]
        # best[i]: the answer over records[: i + 1] — largest timestamp, then lowest offset.
        self.best: list[tuple[int, int]] = []
        for offset, timestamp in records:
            if not self.best or timestamp > self.best[-1][1]:
                self.best.append((offset, timestamp))
            else:
                self.best.append(self.best[-1])

    def answer(self, end: int) -> tuple[int, int] | None:
        count = bisect_left(self.offsets, end)
        return self.best[count - 1] if count else None


def check(log: Log, ends: set[int], where: str = "") -> None:
    reference = Reference(log)
    for end in sorted(ends):
        assert log.max_timestamp_record(end) == reference.answer(end), f"{where} end {end}"


def follower(log: Log, *batches: bytes) -> None:
    log.append_as_follower(b"".join(batches), now_ms=1)


def marker(base_offset: int, timestamp: int, producer_id: int = 9) -> bytes:
    return build_control_batch(
        CONTROL_TYPE_COMMIT,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=timestamp,
        base_offset=base_offset,
    )


def data(base_offset: int, timestamps: list[int], **fields: object) -> bytes:
    values = [b"v" * 40] * len(timestamps)
    return build_batch(values, timestamps=timestamps, base_offset=base_offset, **fields)  # type: ignore[arg-type]


# --- chosen cases --------------------------------------------------------------------------------


def test_ties_answer_the_first_offset_and_markers_never_count(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    follower(
        log,
        data(0, [5, 30, 7]),
        marker(3, timestamp=1_000),
        data(4, [30, 2], compression=COMPRESSION_ZSTD),
        marker(6, timestamp=2_000),
    )
    assert log.max_timestamp_record(log.log_end_offset) == (1, 30)
    assert log.max_timestamp_record(2) == (1, 30)
    assert log.max_timestamp_record(1) == (0, 5)
    log.delete_records(2)  # the log start cuts through the first batch
    assert log.max_timestamp_record(log.log_end_offset) == (4, 30)
    assert log.max_timestamp_record(5) == (4, 30)
    assert log.max_timestamp_record(4) == (2, 7)
    assert log.max_timestamp_record(3) == (2, 7), "the marker at 3 is not a record"
    check(log, set(range(10)))


def test_nothing_visible_answers_none(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    assert log.max_timestamp_record(0) is None
    assert log.max_timestamp_record(5) is None
    follower(log, marker(0, timestamp=50), data(1, [10, 20]))
    assert log.max_timestamp_record(1) is None, "only a marker below the end"
    assert log.max_timestamp_record(0) is None
    log.delete_records(3)
    assert log.max_timestamp_record(3) is None, "the end at the log start"
    assert log.max_timestamp_record(2) is None, "the end below the log start"


def test_log_append_time_gives_every_record_the_batch_time(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(message_timestamp_type="LogAppendTime"), now_ms=0)
    for now_ms in (300, 100, 300):
        log.append_as_leader(batch(b"a", b"b", timestamp=[900, 5]), leader_epoch=0, now_ms=now_ms)
    assert log.max_timestamp_record(log.log_end_offset) == (0, 300)
    assert log.max_timestamp_record(1) == (0, 300)
    log.delete_records(1)
    assert log.max_timestamp_record(log.log_end_offset) == (1, 300)
    log.delete_records(2)
    assert log.max_timestamp_record(log.log_end_offset) == (4, 300)


def test_the_newest_segment_need_not_hold_the_answer(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    stamps = [50, 10, 99, 20, 99, 30, 40]  # the first 99 wins: in the third segment of many
    for stamp in stamps:
        for _ in range(12):
            follower(log, data(log.log_end_offset, [stamp - 1, stamp]))
        follower(log, marker(log.log_end_offset, timestamp=10_000))
    assert len(log.segments()) > len(stamps)
    first_99 = 2 * 25 + 1  # two rounds of 12 two-record batches and a marker, then [98, 99]
    assert log.max_timestamp_record(log.log_end_offset) == (first_99, 99)
    check(log, {log.log_end_offset, first_99, first_99 + 1, 60, 100, 150, 10})


def test_a_tie_across_segments_answers_the_older_record(tmp_path: Path) -> None:
    """The newer segment is visited first (its max is a marker's) and its first record ties
    with the older segment's newest: the older record still wins."""
    log = Log.open(tmp_path, small_config(segment_ms=10), now_ms=0)
    log.append_as_follower(data(0, [50, 3]), now_ms=0)
    log.append_as_follower(data(2, [50]), now_ms=100)  # segment.ms passed: a new segment
    log.append_as_follower(marker(3, timestamp=1_000), now_ms=100)
    assert [segment.base_offset for segment in log.segments()] == [0, 2]
    assert log.max_timestamp_record(4) == (0, 50)
    log.delete_records(1)
    assert log.max_timestamp_record(4) == (2, 50)


def test_only_a_few_batches_are_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rising timestamps, each transaction's marker newer than its data (as a coordinator
    writes them): the newest segment's max is a marker, every older segment is older."""
    log = Log.open(tmp_path, small_config(), now_ms=0)
    for n in range(300):
        follower(log, data(log.log_end_offset, [n * 10, n * 10 + 3, n * 10 + 1]))
        follower(log, marker(log.log_end_offset, timestamp=n * 10 + 5))
    assert len(log.segments()) > 20
    decoded: list[int] = []
    real_decode = local_log.decode_batch

    def counting_decode(*args: object, **kwargs: object) -> RecordBatch:
        found = real_decode(*args, **kwargs)  # type: ignore[arg-type]
        decoded.append(found.header.base_offset)
        return found

    monkeypatch.setattr(local_log, "decode_batch", counting_decode)
    assert log.max_timestamp_record(log.log_end_offset) == (299 * 4 + 1, 2993)
    assert len(decoded) <= 3, decoded
    decoded.clear()
    assert log.max_timestamp_record(100 * 4 + 2) == (100 * 4 + 1, 1003)
    assert len(decoded) <= 3, decoded
    decoded.clear()
    log.delete_records(250 * 4 + 2)  # inside a batch: its middle record is the newest left
    assert log.max_timestamp_record(250 * 4 + 3) == (250 * 4 + 2, 2501)
    assert len(decoded) <= 3, decoded


# --- the simulation ------------------------------------------------------------------------------


def random_batch(rng: random.Random, base_offset: int) -> bytes:
    if rng.random() < 0.15:  # a marker, often newer than anything (as a coordinator's clock)
        timestamp = rng.choice([rng.randrange(0, 60), 1_000 + rng.randrange(100)])
        kind = rng.choice([CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT])
        return build_control_batch(
            kind,
            producer_id=rng.randrange(1, 4),
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp=timestamp,
            base_offset=base_offset,
        )
    count = rng.randint(1, 6)
    # A small range of timestamps: ties everywhere, and now and then no timestamp (-1).
    timestamps = [rng.randrange(0, 60) if rng.random() < 0.97 else -1 for _ in range(count)]
    offset_deltas = None
    if rng.random() < 0.2:  # a compacted batch: offsets with holes
        offset_deltas = sorted(rng.sample(range(count * 3), count))
        offset_deltas = [delta - offset_deltas[0] for delta in offset_deltas]
    return build_batch(
        [rng.randbytes(rng.randrange(0, 120)) for _ in range(count)],
        timestamps=timestamps,
        offset_deltas=offset_deltas,
        base_offset=base_offset,
        compression=rng.choice([COMPRESSION_NONE, COMPRESSION_ZSTD]),
        log_append_time=rng.random() < 0.05,
    )


def ends_to_check(rng: random.Random, log: Log) -> set[int]:
    start, end = log.log_start_offset, log.log_end_offset
    ends = {0, start, start + 1, end, end - 1, end + 5}
    ends.update(rng.randrange(start, end + 2) for _ in range(6))
    return {offset for offset in ends if offset >= 0}


@pytest.mark.parametrize("seed", range(12))
def test_random_logs_answer_as_a_scan_does(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "log"
    log = Log.open(directory, small_config(), now_ms=0)
    for step in range(140):
        action = rng.random()
        if action < 0.6:
            batches = []
            offset = log.log_end_offset
            for _ in range(rng.randint(1, 3)):
                offset += rng.choice([0, 0, 0, 0, 1, 4])  # a gap: a compacted leader's log
                batches.append(random_batch(rng, offset))
                offset = decode_batches(batches[-1])[0].header.next_offset
            follower(log, *batches)
        elif action < 0.68:
            log.delete_records(rng.randint(log.log_start_offset, log.log_end_offset))
        elif action < 0.76:
            log.truncate_to(rng.randint(log.log_start_offset, log.log_end_offset))
        elif action < 0.84:
            log.close()
            log = Log.open(directory, small_config(), now_ms=0)
        elif action < 0.90:  # a crash: the files as they are, without a clean close
            crashed = tmp_path / f"crashed-{step}"
            shutil.copytree(directory, crashed)
            log.close()
            shutil.rmtree(directory)
            crashed.rename(directory)
            log = Log.open(directory, small_config(), now_ms=0)
        elif action < 0.94:  # lost time indexes: rebuilt from the log on open
            log.close()
            for path in directory.glob(f"*{TIME_INDEX_SUFFIX}"):
                path.unlink()
            log = Log.open(directory, small_config(), now_ms=0)
        else:
            log.flush()
        check(log, ends_to_check(rng, log), f"seed {seed}, step {step}:")
    log.close()
