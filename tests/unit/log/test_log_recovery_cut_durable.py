"""Goal: the segments an unclean open deletes after a cut stay deleted through an OS crash, so
records flushed into the cut segment afterwards (acknowledged after an fsync, flush.messages=1)
survive it. Recovery cuts a torn segment at its first bad byte and deletes every later segment;
nothing else fsyncs the directory for those deletions (a flush does only after a roll or a
truncation), so a crash brought a deleted segment back over the flushed records, and the next
open cut them.

Method: a real Log in tmp_path builds segments 0 (offsets 0-1), 2 (2-4) and 5 (5-6, active) and
is abandoned unflushed; a byte of segment 2's last batch is flipped (the OS lost its last page).
An os_crash.OsCrash started then takes the files as durable. The unclean open cuts offset 4 and
deletes segment 5; three records are appended at 4-6 with flush.messages=1; the OS then crashes
(only what fsync made durable stays) and the reopened log must still hold them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config
from os_crash import OsCrash

from samsa.services.broker.log.log import Log
from samsa.services.broker.log.segment import LOG_SUFFIX, segment_path

NOW = 1_000_000
BUILD = small_config(segment_bytes=1 << 20, segment_ms=1_000)  # a segment per 2 s of appends
RUN = small_config(segment_bytes=1 << 20, flush_messages=1)  # fsync before acknowledging


def abandon(log: Log) -> None:
    """Stop using `log` as a crash would: no flush, no checkpoint, no marker."""
    log._local_log.close()


def built(directory: Path) -> None:
    """Segments 0, 2 and 5 (see the module docstring), nothing flushed, segment 2 torn."""
    log = Log.open(directory, BUILD, now_ms=NOW)
    at = NOW
    for values in ([b"a0", b"a1"], [b"b2", b"b3", b"b4"], [b"c5", b"c6"]):
        for value in values:
            log.append_as_leader(batch(value, timestamp=at), leader_epoch=0, now_ms=at)
        at += 2_000
    assert [segment.base_offset for segment in log.segments()] == [0, 2, 5]
    abandon(log)
    path = segment_path(directory, 2, LOG_SUFFIX)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))


def test_records_flushed_after_a_recovery_cut_survive_an_os_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "log"
    built(directory)
    os_crash = OsCrash(directory, monkeypatch)  # what is on disk now is durable
    try:
        log = Log.open(directory, RUN, now_ms=NOW + 10_000)
        assert [segment.base_offset for segment in log.segments()] == [0, 2]
        assert log.log_end_offset == 4
        assert not segment_path(directory, 5, LOG_SUFFIX).exists()
        appended = log.append_as_leader(
            batch(b"n4", b"n5", b"n6", timestamp=NOW), leader_epoch=0, now_ms=NOW + 10_000
        )
        assert (appended.first_offset, appended.last_offset, log.recovery_point) == (4, 6, 7)
        abandon(log)
        os_crash.crash()
        assert not segment_path(directory, 5, LOG_SUFFIX).exists(), "the deleted segment is back"
        log = Log.open(directory, RUN, now_ms=NOW + 20_000)
        try:
            assert [record.value for record in read_all(log)] == [
                b"a0",
                b"a1",
                b"b2",
                b"b3",
                b"n4",
                b"n5",
                b"n6",
            ]
        finally:
            log.close()
    finally:
        os_crash.close()
