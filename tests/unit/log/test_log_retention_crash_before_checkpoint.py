"""Goal: a crash after retention made the deletion of every segment durable but before it wrote
the recovery-point checkpoint still keeps the idempotent producers' state (51a2872). Retention
fsyncs the producer snapshot at the new empty segment, deletes the old segments, fsyncs the
directory, and only then raises and checkpoints the recovery point. An OS crash (or a failed
checkpoint write) in between leaves the old recovery point (0) on disk below the only segment
left; the next open (unclean) drops every snapshot above the recovery point as unusable, finds
no record to replay, and starts with no producers: a live producer's retry is stored twice.

Method: a real Log as in test_log_retention_empty_log; LogDurability.checkpoint is made a no-op
for the retention pass (the crash came just before it), then the directory is opened again
without close().
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, small_config

from samsa.services.broker.log.log import Log
from samsa.services.broker.log.log_durability import LogDurability

NOW = 1_000_000
HOUR_MS = 3_600_000
CONFIG = small_config(retention_ms=HOUR_MS, segment_bytes=1 << 20)


def idempotent(sequence: int, count: int) -> bytes:
    values = [os.urandom(50) for _ in range(count)]
    return batch(*values, timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=sequence)


def test_producers_survive_a_crash_between_the_deletion_and_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    for sequence in (0, 2):
        log.append_as_leader(idempotent(sequence, 2), leader_epoch=3, now_ms=NOW)
    with monkeypatch.context() as crash:
        crash.setattr(LogDurability, "checkpoint", lambda self, log_start_offset: None)
        assert log.apply_retention(now_ms=NOW + HOUR_MS + 1, high_watermark=4) == 1
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW + HOUR_MS + 2)  # no close(): a crash
    try:
        entries = reopened.producer_entries()
        assert [(e.producer_id, e.batches[-1].last_sequence) for e in entries] == [(7, 3)]
    finally:
        reopened.close()
        log.close()
