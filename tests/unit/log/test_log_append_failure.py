"""Goal: an append whose bytes reached the segment but whose bookkeeping after the write failed
(disk full writing a checkpoint or an index) leaves the log's in-memory state matching its
bytes, so that the producer's retry is recognised as a duplicate and not stored twice.

Method: a real log on disk; the leader-epoch checkpoint write after the first append of a new
epoch raises OSError (ENOSPC); the same idempotent batch is then retried.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.common.record.codec import CONTROL_TYPE_ABORT, build_control_batch
from samsa.services.broker.log import log_durability, transaction_log_state
from samsa.services.broker.log.log import Log

NOW = 1_000_000


def test_a_retry_after_a_failed_epoch_checkpoint_is_not_stored_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    sent = batch(b"a", b"b", timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=0)

    def disk_full(files: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_durability, "write_atomically_many", disk_full)
    with pytest.raises(OSError, match="No space left"):
        log.append_as_leader(sent, leader_epoch=3, now_ms=NOW)
    monkeypatch.undo()

    retry = log.append_as_leader(sent, leader_epoch=3, now_ms=NOW)
    assert (retry.first_offset, retry.record_count) == (0, 0), "a retry of stored batches"
    assert [record.value for record in read_all(log)] == [b"a", b"b"]
    assert log.leader_epoch_entries() == [(3, 0)]
    log.close()


def test_a_close_that_fails_still_closes_every_segment_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    for _ in range(20):  # a few segments
        log.append_as_leader(batch(b"x" * 200, timestamp=NOW), leader_epoch=0, now_ms=NOW)
    fds = [segment.fd for segment in log._local_log.segments]
    assert len(fds) > 1

    def disk_full(files: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_durability, "write_atomically_many", disk_full)
    with pytest.raises(OSError, match="No space left"):
        log.close()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)  # closed: a deleted partition's files do not stay held open
    log.close()  # a second close does nothing


def test_an_abort_whose_index_write_fails_still_hides_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker is in the log: the aborted transaction's index entry must be kept (and made
    durable later), or read_committed readers would get the aborted records as committed."""
    verified = {"leader_epoch": 0, "now_ms": NOW, "allow_transactional": True}
    data = batch(
        b"t", timestamp=NOW, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True
    )
    abort = build_control_batch(
        CONTROL_TYPE_ABORT, producer_id=1, producer_epoch=1, coordinator_epoch=0, timestamp=NOW
    )
    healthy = Log.open(tmp_path / "healthy", small_config(), now_ms=NOW)
    healthy.append_as_leader(data, **verified)
    healthy.append_as_leader(abort, allow_control_batches=True, **verified)
    expected = healthy.aborted_transactions(0, healthy.log_end_offset)
    assert len(expected) == 1
    healthy.close()

    log = Log.open(tmp_path / "full", small_config(), now_ms=NOW)
    log.append_as_leader(data, **verified)

    def disk_full(fd: int, data: object) -> None:
        os.write(fd, b"\x00" * 7)  # a torn entry, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(transaction_log_state, "write_all", disk_full)
    with pytest.raises(OSError, match="No space left"):
        log.append_as_leader(abort, allow_control_batches=True, **verified)
    monkeypatch.undo()
    assert log.aborted_transactions(0, log.log_end_offset) == expected
    log.close()
    reopened = Log.open(tmp_path / "full", small_config(), now_ms=NOW)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == expected
    reopened.close()
