"""Goal: a process crash at any step of retention deleting segments off a log's front keeps every
idempotent producer's state and open transaction: the deleted batches' producers survive only in
the producer snapshot at the new first segment, so the next (unclean) open must use it, whatever
the recovery-point checkpoint on disk says (loading.py raises it to the first segment's base).

Method: a real Log in two shapes: retention takes every segment (a new empty one is rolled at
the log end first) or the two oldest of three. Producer 7 wrote offsets 0-3, all deleted. The
crash is an exception raised at one step of `apply_retention`: before the roll, before the
snapshot's fsync, before the k-th segment's deletion, before the directory fsync, or inside the
checkpoint write with any subset of its files replaced (each is old or new after a crash,
independently: checkpoint_file.write_atomically_many). The log is then abandoned (descriptors
closed, nothing written) and opened again; the reopened log must know producer 7's sequence (its
retry is not stored twice), keep its transaction open, and finish the retention. A last test
checks that the raise trusts no segment more than before (a torn tail is still cut).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from log_helpers import batch, small_config

from samsa.services.broker.log import log_durability
from samsa.services.broker.log.checkpoint_file import write_atomically
from samsa.services.broker.log.loading import CHECKPOINT_FILES
from samsa.services.broker.log.local_log import LocalLog
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.log_durability import LogDurability
from samsa.services.broker.log.producer_transactions import ProducerTransactions
from samsa.services.broker.log.segment import LOG_SUFFIX, Segment, segment_path

NOW = 1_000_000
HOUR_MS = 3_600_000
CONFIG = small_config(retention_ms=HOUR_MS, segment_bytes=1 << 20, segment_ms=1_000)
# (shape, appended at, retention's now_ms, high watermark, segments deleted, producers kept)
SHAPES = {
    "every segment": ([NOW, NOW], NOW + HOUR_MS + 1, 4, 1, [(7, 3)]),
    "two of three": ([NOW, NOW + 2_000], NOW + HOUR_MS + 5_000, 5, 2, [(7, 3), (8, 0)]),
}


class Crash(Exception):
    """The process dies here."""


def producer_batch(producer_id: int, sequence: int, count: int, *, at: int, txn: bool) -> bytes:
    values = [os.urandom(50) for _ in range(count)]
    return batch(
        *values,
        timestamp=at,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=txn,
    )


def filled(directory: Path, shape: str, *, txn: bool) -> Log:
    """Producer 7's batches (sequences 0-1, 2-3) at the shape's times; in "two of three",
    producer 8's one batch an hour later opens a third segment that retention keeps."""
    times, _, _, _, _ = SHAPES[shape]
    log = Log.open(directory, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    for sequence, at in zip((0, 2), times, strict=True):
        appended = producer_batch(7, sequence, 2, at=at, txn=txn)
        log.append_as_leader(appended, leader_epoch=3, now_ms=at, allow_transactional=txn)
    if shape == "two of three":
        late = NOW + HOUR_MS + 4_000
        appended = producer_batch(8, 0, 1, at=late, txn=False)
        log.append_as_leader(appended, leader_epoch=3, now_ms=late)
    return log


def crash_before(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> None:
    def crashed(*args: Any, **kwargs: Any) -> None:
        raise Crash(name)

    monkeypatch.setattr(owner, name, crashed)


def crash_at_deletion(monkeypatch: pytest.MonkeyPatch, deleted_before: int) -> None:
    """The process dies before the segment deletion number `deleted_before` (0-based)."""
    delete = Segment.delete
    calls = itertools.count()

    def counted(segment: Segment) -> None:
        if next(calls) == deleted_before:
            raise Crash("delete")
        delete(segment)

    monkeypatch.setattr(Segment, "delete", counted)


def crash_in_checkpoint(monkeypatch: pytest.MonkeyPatch, replaced: frozenset[str]) -> None:
    """The checkpoint write dies with only the files named in `replaced` new on disk."""

    def partly_written(files: Mapping[Path, bytes]) -> None:
        for path, data in files.items():
            if path.name in replaced:
                write_atomically(path, data)
        raise Crash("checkpoint")

    monkeypatch.setattr(log_durability, "write_atomically_many", partly_written)


def crash_points(shape: str) -> list[str]:
    _, _, _, deleted, _ = SHAPES[shape]
    points = ["roll_at_end"] if shape == "every segment" else []
    points.append("sync_snapshots")
    points += [f"delete {k}" for k in range(deleted)]
    points.append("sync_directory")
    subsets = itertools.chain.from_iterable(
        itertools.combinations(CHECKPOINT_FILES, size) for size in range(len(CHECKPOINT_FILES) + 1)
    )
    points += ["checkpoint " + "+".join(subset) for subset in subsets]
    return points


def crash(monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    owners = {
        "roll_at_end": LocalLog,
        "sync_snapshots": ProducerTransactions,
        "sync_directory": LogDurability,
    }
    if point in owners:
        crash_before(monkeypatch, owners[point], point)
    elif point.startswith("delete "):
        crash_at_deletion(monkeypatch, int(point.split()[1]))
    else:
        replaced = point.removeprefix("checkpoint").strip()
        crash_in_checkpoint(monkeypatch, frozenset(replaced.split("+")) - {""})


def abandon(log: Log) -> None:
    """Stop using `log` as a crash would: descriptors closed, nothing written."""
    for segment in log._local_log.segments:
        if segment.fd >= 0:
            segment.close()


def producers(log: Log) -> list[tuple[int, int]]:
    return [(e.producer_id, e.batches[-1].last_sequence) for e in log.producer_entries()]


@pytest.mark.parametrize("txn", [False, True], ids=["idempotent", "transactional"])
@pytest.mark.parametrize(
    ("shape", "point"), [(shape, point) for shape in SHAPES for point in crash_points(shape)]
)
def test_producers_survive_a_crash_at_any_step_of_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, point: str, txn: bool
) -> None:
    _, retention_ms, high_watermark, _, kept = SHAPES[shape]
    log = filled(tmp_path, shape, txn=txn)
    log_end_offset = log.log_end_offset
    with monkeypatch.context() as patched:
        crash(patched, point)
        with pytest.raises(Crash):
            log.apply_retention(now_ms=retention_ms, high_watermark=high_watermark)
    abandon(log)
    reopened = Log.open(tmp_path, CONFIG, now_ms=retention_ms + 1)
    try:
        assert reopened.log_end_offset == log_end_offset
        assert producers(reopened) == kept
        assert reopened.has_open_transaction(7, 0) == txn
        retried = producer_batch(7, 2, 2, at=NOW, txn=txn)
        appended = reopened.append_as_leader(
            retried, leader_epoch=3, now_ms=retention_ms + 1, allow_transactional=txn
        )
        assert appended.record_count == 0, "a retried batch is not stored twice"
        left = sum(segment.base_offset < 4 for segment in reopened.segments())
        count = reopened.apply_retention(now_ms=retention_ms + 1, high_watermark=high_watermark)
        assert count == left, "the retention the crash interrupted completes"
        assert reopened.log_start_offset == 4
        assert producers(reopened) == kept
    finally:
        reopened.close()


def test_the_raised_recovery_point_trusts_no_segment_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The raise (to the first segment's base) re-checks the same segments as before: after
    DeleteRecords deleted segments 0 and 1 and crashed before its checkpoint, a torn tail in
    segment 2 still cuts the log there and drops the segment after it, as any unclean stop
    does; trusting segment 2 would only re-frame its tail and keep segment 3."""
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    for index in range(4):  # segment.ms (1 s) rolls a segment per batch
        at = NOW + 2_000 * index
        log.append_as_leader(batch(b"x", timestamp=at), leader_epoch=3, now_ms=at)
    assert [segment.base_offset for segment in log.segments()] == [0, 1, 2, 3]
    with monkeypatch.context() as patched:
        crash_before(patched, LogDurability, "checkpoint")
        with pytest.raises(Crash):
            log.delete_records(2)
    abandon(log)
    with segment_path(tmp_path, 2, LOG_SUFFIX).open("ab") as torn:
        torn.write(b"\xff" * 30)
    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW + 10_000)
    try:
        assert [segment.base_offset for segment in reopened.segments()] == [2]
        assert (reopened.log_start_offset, reopened.log_end_offset) == (2, 3)
    finally:
        reopened.close()
