"""Goal: closing a log pays fsyncs only where its files changed, without weakening recovery. A
broker holding thousands of partitions closes them all when it stops (~2 ms of fsyncs each
otherwise), within the grace its launcher gives it before SIGKILL.

- A log untouched since a clean open gets its clean-shutdown marker back without an fsync: its
  files are what the last close left (every change persists the marker's removal first), so the
  marker tells the truth, and an OS crash that loses it only costs a re-check.
- A log that holds no record closes without a marker: its next open has nothing to re-check.
- Both still write a checkpoint that changed; a log start DeleteRecords moved is kept.
- A log written to since its open flushes, writes its indexes and the marker durably.

Method: real files in tmp_path; os.fsync and os.fdatasync are counted by wrapping them (they
still run); the log is not mocked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.services.broker.log.loading import CLEAN_SHUTDOWN_FILE
from samsa.services.broker.log.log import Log


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every os.fsync / os.fdatasync from now on, by name, in order."""
    calls: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def counting(fd: int, real=real, name=name) -> None:  # type: ignore[no-untyped-def]
            calls.append(name)
            real(fd)

        monkeypatch.setattr(os, name, counting)
    return calls


def written(directory: Path, count: int = 30) -> list:
    """A log with `count` records over several segments, closed; its records."""
    log = Log.open(directory, small_config(), now_ms=0)
    for index in range(count):
        log.append_as_leader(batch(b"value %d" % index), leader_epoch=0, now_ms=1)
    records = read_all(log)
    log.close()
    return records


def test_a_log_untouched_since_a_clean_open_closes_without_an_fsync(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    records = written(tmp_path)
    log = Log.open(tmp_path, small_config(), now_ms=0)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "a clean open consumes the marker"
    assert read_all(log) == records
    fsyncs.clear()
    log.close()
    assert fsyncs == []
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "the marker is back"
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert read_all(reopened) == records
    reopened.close()


def test_a_log_start_moved_after_a_clean_open_survives_an_untouched_close(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    records = written(tmp_path)
    log = Log.open(tmp_path, small_config(), now_ms=0)
    start = log.delete_records(records[2].offset)  # within the first segment: no file deleted
    assert log.segments()[0].base_offset < start
    log.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.log_start_offset == start
    assert read_all(reopened)[0].offset >= start
    reopened.close()


def test_a_log_written_after_a_clean_open_closes_durably(tmp_path: Path, fsyncs: list[str]) -> None:
    written(tmp_path)
    log = Log.open(tmp_path, small_config(), now_ms=0)
    log.append_as_leader(batch(b"one more"), leader_epoch=0, now_ms=2)
    fsyncs.clear()
    log.close()
    assert "fdatasync" in fsyncs and "fsync" in fsyncs
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


@pytest.mark.parametrize("start", [0, 50])
def test_a_log_without_records_closes_without_an_fsync_or_a_marker(
    tmp_path: Path, fsyncs: list[str], start: int
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    if start:
        log.truncate_fully_and_start_at(start)
    fsyncs.clear()
    log.close()
    assert fsyncs == []
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.log_start_offset == reopened.log_end_offset == start
    reopened.append_as_leader(batch(b"first"), leader_epoch=0, now_ms=1)
    assert [record.offset for record in read_all(reopened)] == [start]
    reopened.close()
