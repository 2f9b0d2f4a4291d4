"""Goal: whatever an unclean stop does to the active segment — a torn tail, a flipped byte, zeros
or garbage appended — and to the index files, the reopened log holds exactly the longest valid
prefix of what was appended, its indexes equal the ones appends would have built, every offset
and timestamp lookup is right, and appends continue from the new end.

Method: hypothesis draws batch sizes, record counts, timestamps, an optional flush point, one
damage to the active segment and one per index file. The log is abandoned without close (its
descriptors are closed, nothing is flushed), damaged with plain file writes and reopened. The
expected state comes from the batches' known boundaries; the expected index files from a fresh
log fed the surviving batches as a follower and closed. A flipped byte avoids base_offset and
partition_leader_epoch: they sit outside the CRC by design (the broker stamps them without
re-signing), so no checksum can see them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from samsa.common.record.codec import build_batch, decode_batches
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log

UNPROTECTED = set(range(0, 8)) | set(range(12, 16))  # base_offset, partition_leader_epoch


def config(index_interval_bytes: int) -> LogConfig:
    return LogConfig(
        segment_bytes=2048, index_interval_bytes=index_interval_bytes, max_message_bytes=1024
    )


def stored_batches(log: Log) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        position = 0
        for batch in decode_batches(result.records):
            out.append(result.records[position : position + batch.header.size_bytes])
            position += batch.header.size_bytes
        offset = result.next_offset
    return out


def abandon(log: Log) -> None:
    log._local_log.close()  # close descriptors only: no flush, no checkpoint, no marker


@st.composite
def appends(draw: st.DrawFn) -> list[bytes]:
    count = draw(st.integers(1, 30))
    batches = []
    for index in range(count):
        size = draw(st.integers(0, 250))
        records = draw(st.integers(1, 3))
        timestamps = draw(st.lists(st.integers(0, 10_000), min_size=records, max_size=records))
        batches.append(build_batch([bytes([index % 251]) * size] * records, timestamps=timestamps))
    return batches


def damage_segment(data: bytes, boundaries: list[int], draw: st.DrawFn) -> tuple[bytes, int]:
    """Damage the active segment's bytes; return them and how many whole batches stay valid."""
    kind = draw(st.sampled_from(["none", "truncate", "flip", "zeros", "garbage"]))
    if kind == "truncate" and data:
        length = draw(st.integers(0, len(data) - 1))
        return data[:length], sum(1 for end in boundaries[1:] if end <= length)
    if kind == "flip" and data:
        position = draw(st.integers(0, len(data) - 1))
        batch_index = max(i for i, start in enumerate(boundaries[:-1]) if start <= position)
        if position - boundaries[batch_index] in UNPROTECTED:
            return data, len(boundaries) - 1
        flipped = data[:position] + bytes([data[position] ^ 0x20]) + data[position + 1 :]
        return flipped, batch_index
    if kind == "zeros":
        return data + bytes(draw(st.integers(1, 100))), len(boundaries) - 1
    if kind == "garbage":
        return data + draw(st.binary(min_size=1, max_size=100)), len(boundaries) - 1
    return data, len(boundaries) - 1


def damage_index(path: Path, draw: st.DrawFn) -> None:
    kind = draw(st.sampled_from(["none", "delete", "torn", "garbage", "empty"]))
    if not path.exists() or kind == "none":
        return
    data = path.read_bytes()
    if kind == "delete":
        path.unlink()
    elif kind == "torn" and data:
        path.write_bytes(data[: draw(st.integers(0, len(data) - 1))])
    elif kind == "garbage":
        path.write_bytes(data + draw(st.binary(min_size=1, max_size=24)))
    elif kind == "empty" and path.suffix == ".index":
        path.write_bytes(b"")


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process crash loses no written byte whether or not it was fsynced, so fsync costs this
    test time and buys nothing: skip it (power loss is not what is simulated here)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=appends(), data=st.data())
def test_reopen_after_an_unclean_stop_keeps_the_longest_valid_prefix(
    no_fsync: None,
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[bytes],
    data: st.DataObject,
) -> None:
    directory = tmp_path_factory.mktemp("log")
    interval = data.draw(st.sampled_from([0, 100, 400]))
    flush_after = data.draw(st.none() | st.integers(0, len(batches) - 1))
    log = Log.open(directory, config(interval), now_ms=0)
    for index, raw in enumerate(batches):
        log.append_as_leader(raw, leader_epoch=index // 4, now_ms=index)
        if index == flush_after:
            log.flush()
            log.checkpoint()
    appended = stored_batches(log)
    active_base = log.segments()[-1].base_offset
    abandon(log)

    active = directory / f"{active_base:020d}.log"
    active_batches = [raw for raw in appended if int.from_bytes(raw[:8], "little") >= active_base]
    boundaries = [0]
    for raw in active_batches:
        boundaries.append(boundaries[-1] + len(raw))
    # The active segment is re-checked after any unclean stop, flushed or not.
    damaged, kept = damage_segment(active.read_bytes(), boundaries, data.draw)
    active.write_bytes(damaged)
    event(f"damage kept {'all' if kept == len(active_batches) else 'a prefix'} of the segment")
    for path in sorted(directory.glob("*index")):
        damage_index(path, data.draw)
    expected = appended[: len(appended) - len(active_batches) + kept]

    reopened = Log.open(directory, config(interval), now_ms=0)
    assert stored_batches(reopened) == expected
    records = [record for raw in expected for record in decode_batches(raw)[0]]
    end = records[-1].offset + 1 if records else active_base
    assert reopened.log_end_offset == end
    for record in records:
        result = reopened.read(record.offset, 1)
        assert result.first_offset <= record.offset < result.next_offset
    for probe in sorted({r.timestamp for r in records} | {0, 10_001}):
        first = next(((r.offset, r.timestamp) for r in records if r.timestamp >= probe), None)
        assert reopened.offset_for_timestamp(probe) == first
    assert reopened.append_as_leader(batches[0], leader_epoch=99, now_ms=0).first_offset == end
    reopened.truncate_to(end)
    reopened.close()

    reference_directory = tmp_path_factory.mktemp("reference")
    reference = Log.open(reference_directory, config(interval), now_ms=0)
    for raw in expected:
        reference.append_as_follower(raw, now_ms=0)
    reference.close()
    assert _index_files(directory) == _index_files(reference_directory)


def _index_files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*index"))}
