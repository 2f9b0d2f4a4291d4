"""Goal: recovery never discards data silently. Each cut of a torn or corrupt tail is one WARN line
naming the log directory, the offset and byte position of the cut, the bytes discarded and why;
whole segments deleted after a cut are a WARN line too; an index rebuilt because it failed its
check, or because its segment was written after the last flush, is an INFO line.

Method: real logs in tmp_path, stopped uncleanly (descriptors closed, no flush or marker) or
closed cleanly, damaged with plain file writes, reopened under caplog; the lines are checked on
their message text (what an operator reads) and on their structured `extra` fields.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from log_helpers import batch, small_config

from samsa.services.broker.log.log import Log

SEGMENT_LOGGER = "samsa.services.broker.log.segment"
LOG_LOGGER = "samsa.services.broker.log.loading"


def filled(directory: Path, batches: int = 40) -> Log:
    log = Log.open(directory, small_config(), now_ms=0)
    for index in range(batches):
        log.append_as_leader(batch(b"value %d " % index + b"." * 100), leader_epoch=0, now_ms=1)
    return log


def abandon(log: Log) -> None:
    log._local_log.close()


def warnings_from(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


def test_a_torn_tail_is_cut_with_one_warning_that_says_where_how_much_and_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = filled(tmp_path)
    end_offset = log.log_end_offset
    active = sorted(tmp_path.glob("*.log"))[-1]
    abandon(log)
    torn_size = active.stat().st_size - 5
    with active.open("r+b") as file:
        file.truncate(torn_size)
    caplog.set_level(logging.INFO)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    cut_offset = reopened.log_end_offset
    assert cut_offset == end_offset - 1
    [warning] = warnings_from(caplog, SEGMENT_LOGGER)
    kept_bytes = active.stat().st_size
    message = warning.getMessage()
    assert str(tmp_path) in message
    assert f"offset {cut_offset} " in message
    assert f"byte position {kept_bytes} " in message
    assert f"discarding {torn_size - kept_bytes} bytes" in message
    assert "truncated" in message
    assert warning.discarded_bytes == torn_size - kept_bytes  # type: ignore[attr-defined]
    assert warning.log_dir == str(tmp_path)  # type: ignore[attr-defined]


def test_a_crc_mismatch_names_the_crc_and_the_deleted_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    abandon(log)
    second = tmp_path / f"{bases[1]:020d}.log"
    with second.open("r+b") as file:  # flip a payload byte of the second segment's 2nd batch
        first_size = struct.unpack("<i", file.read(12)[8:12])[0] + 12
        file.seek(first_size + 100)
        byte = file.read(1)
        file.seek(first_size + 100)
        file.write(bytes([byte[0] ^ 0x55]))
    second_size = second.stat().st_size
    later_bytes = sum((tmp_path / f"{b:020d}.log").stat().st_size for b in bases[2:])
    caplog.set_level(logging.INFO)
    Log.open(tmp_path, small_config(), now_ms=0)
    [cut] = warnings_from(caplog, SEGMENT_LOGGER)
    assert "CRC-32C" in cut.getMessage()
    assert f"offset {bases[1] + 1} " in cut.getMessage()
    assert f"discarding {second_size - first_size} bytes" in cut.getMessage()
    [dropped] = warnings_from(caplog, LOG_LOGGER)
    assert str(tmp_path) in dropped.getMessage()
    assert f"deletes the {len(bases) - 2} segments" in dropped.getMessage()
    assert f"{later_bytes} bytes" in dropped.getMessage()


def test_an_index_that_fails_its_check_is_rebuilt_with_an_info_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = filled(tmp_path)
    log.close()
    index = sorted(tmp_path.glob("*.index"))[0]
    index.write_bytes(index.read_bytes()[:-3])  # torn: not a whole number of entries
    caplog.set_level(logging.INFO)
    Log.open(tmp_path, small_config(), now_ms=0)
    rebuilt = [
        r
        for r in caplog.records
        if r.name == SEGMENT_LOGGER and r.levelno == logging.INFO and "rebuilding" in r.msg
    ]
    assert len(rebuilt) == 1
    assert index.with_suffix(".log").name in rebuilt[0].getMessage()
    assert not warnings_from(caplog, SEGMENT_LOGGER), "nothing was discarded"


def test_recovering_an_unflushed_segment_is_an_info_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    abandon(filled(tmp_path))
    caplog.set_level(logging.INFO)
    Log.open(tmp_path, small_config(), now_ms=0)
    recovering = [r for r in caplog.records if r.name == SEGMENT_LOGGER]
    assert recovering and all(r.levelno == logging.INFO for r in recovering)
    assert all("rebuilding its indexes" in r.getMessage() for r in recovering)
    assert len(recovering) == len(list(tmp_path.glob("*.log"))), "nothing was flushed"


def test_a_clean_reopen_logs_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    filled(tmp_path).close()
    caplog.set_level(logging.INFO)
    Log.open(tmp_path, small_config(), now_ms=0)
    assert not [r for r in caplog.records if r.name in (SEGMENT_LOGGER, LOG_LOGGER)]
