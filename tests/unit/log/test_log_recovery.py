"""Goal: a log reopens to exactly what it held — after a clean close without re-reading the data,
after an unclean stop by re-checking from the recovery point — and never trusts an index file
over the log: a missing, torn, non-monotonic, out-of-range or simply wrong index is rebuilt, and
the rebuilt files equal the ones the appends wrote.

Method: real files in tmp_path. An unclean stop is a second `Log.open` on a directory whose first
Log was never closed (its file descriptors are closed without any flush or checkpoint). Damage is
done with plain file writes. "Equal" is checked on records read back and on index-file bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from log_helpers import batch, file_bytes, read_all, read_batches, small_config

from samsa.services.broker.log import segment as segment_module
from samsa.services.broker.log.loading import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT_FILE
from samsa.services.broker.log.log import Log


def abandon(log: Log) -> None:
    """Stop using `log` as a crash would: no flush, no checkpoint, no marker."""
    log._local_log.close()  # the test needs the descriptors closed, nothing else


def filled(directory: Path, *, batches: int = 40, **overrides: object) -> Log:
    log = Log.open(directory, small_config(**overrides), now_ms=0)
    for index in range(batches):
        log.append_as_leader(
            batch(b"value %d " % index + b"." * 100, timestamp=1_000 + index),
            leader_epoch=index // 10,
            now_ms=1,
        )
    return log


def index_files(directory: Path) -> dict[str, bytes]:
    return {name: data for name, data in file_bytes(directory).items() if "index" in name}


def test_reopen_after_clean_close_keeps_everything(tmp_path: Path) -> None:
    log = filled(tmp_path)
    log.delete_records(3)
    state = (log.log_start_offset, log.log_end_offset, log.segments(), log.leader_epoch_entries())
    records = read_all(log)
    log.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "the marker is consumed on open"
    assert reopened.recovery_point == reopened.log_end_offset
    assert (
        reopened.log_start_offset,
        reopened.log_end_offset,
        reopened.segments(),
        reopened.leader_epoch_entries(),
    ) == state
    assert read_all(reopened) == records
    assert reopened.append_as_leader(batch(b"more"), leader_epoch=3, now_ms=2).first_offset == 40


def test_unclean_stop_keeps_every_whole_batch(tmp_path: Path) -> None:
    log = filled(tmp_path)
    stored = read_batches(log)
    abandon(log)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert read_batches(reopened) == stored
    assert reopened.leader_epoch_entries() == [(0, 0), (1, 10), (2, 20), (3, 30)]
    assert reopened.recovery_point == 0, "nothing was flushed, nothing is declared durable"


def test_a_torn_tail_is_cut_at_the_last_whole_batch(tmp_path: Path) -> None:
    log = filled(tmp_path)
    stored = read_batches(log)
    active = sorted(tmp_path.glob("*.log"))[-1]
    abandon(log)
    with active.open("r+b") as file:
        file.truncate(active.stat().st_size - 5)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert read_batches(reopened) == stored[:-1]
    assert reopened.log_end_offset == 39
    assert reopened.leader_epoch_entries()[-1] == (3, 30)
    assert reopened.append_as_leader(batch(b"again"), leader_epoch=4, now_ms=2).first_offset == 39


def test_corruption_in_an_unflushed_segment_deletes_every_later_segment(tmp_path: Path) -> None:
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    stored = read_batches(log)
    abandon(log)
    second = tmp_path / f"{bases[1]:020d}.log"
    with second.open("r+b") as file:  # flip a payload byte of the second segment's 2nd batch
        first_size = struct.unpack("<i", file.read(12)[8:12])[0] + 12
        file.seek(first_size + 100)
        byte = file.read(1)
        file.seek(first_size + 100)
        file.write(bytes([byte[0] ^ 0x55]))
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.log_end_offset == bases[1] + 1
    assert [s.base_offset for s in reopened.segments()] == bases[:2]
    assert read_batches(reopened) == stored[: bases[1] + 1]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [f"{b:020d}.log" for b in bases[:2]]


def test_segments_below_the_recovery_point_are_trusted_and_the_rest_rechecked(
    tmp_path: Path,
) -> None:
    log = filled(tmp_path)
    log.flush()
    log.checkpoint()
    flushed_end = log.log_end_offset
    log.append_as_leader(batch(b"unflushed"), leader_epoch=3, now_ms=2)
    stored = read_batches(log)
    active = sorted(tmp_path.glob("*.log"))[-1]
    abandon(log)
    with active.open("ab") as file:
        file.write(b"\x00" * 300)  # a file extended but never written: zeros
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.recovery_point == flushed_end
    assert read_batches(reopened) == stored


def test_a_clean_marker_does_not_hide_a_damaged_last_batch(tmp_path: Path) -> None:
    """The open CRC-checks the active segment's last batch; bad after a clean close, it is
    corruption at rest of durable records: found, kept as stored and exposed for the partition
    to mark the replica corrupt (test_log_corrupt_at_open.py), not cut."""
    log = filled(tmp_path)
    stored = read_batches(log)
    log.close()
    active = sorted(tmp_path.glob("*.log"))[-1]
    data = bytearray(active.read_bytes())
    data[-1] ^= 0xFF
    active.write_bytes(bytes(data))
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    found = reopened.corrupt_at_open
    assert found is not None and found.offset == 39
    assert found.position == len(data) - len(stored[-1]) and found.segment_size_bytes == len(data)
    assert reopened.log_end_offset == 40
    assert reopened.read(39, 4096).records == bytes(data[found.position :])  # served as stored


DAMAGE = {
    "missing": lambda data: None,
    "torn": lambda data: data[:-3],
    "empty": lambda data: b"",
    "garbage appended": lambda data: data + b"\xff" * 8,
    "reversed entries": lambda data: b"".join(
        data[i : i + 8] for i in range(len(data) - 8, -1, -8)
    ),
    "position past the end": lambda data: data[:-4] + struct.pack("<I", 10**6),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("clean", [True, False])
def test_damaged_offset_index_is_rebuilt(tmp_path: Path, damage: str, clean: bool) -> None:
    log = filled(tmp_path)
    log.flush()
    log.checkpoint()
    records = read_all(log)
    log.close()
    originals = index_files(tmp_path)
    if not clean:
        (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    for path in tmp_path.glob("*.index"):
        damaged = DAMAGE[damage](path.read_bytes())
        if damaged is None:
            path.unlink()
        else:
            path.write_bytes(damaged)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert read_all(reopened) == records
    for record in records:
        assert reopened.read(record.offset, 1).first_offset == record.offset
    reopened.close()
    assert index_files(tmp_path) == originals


TIME_INDEX_DAMAGE = {
    **DAMAGE,
    # Sane but stale: a prefix of whole entries decodes fine and understates the max timestamp
    # (lookups would skip the segment, retention would delete it early).
    "cut at an entry boundary": lambda data: data[:-12],
    # Monotonic and in range, so it decodes; but the batch it names never reached that time.
    "a larger max forged": lambda data: data[:-12] + struct.pack("<q", 10**12) + data[-4:],
}


@pytest.mark.parametrize(
    "damage",
    [
        "missing",
        "torn",
        "garbage appended",
        "empty",
        "cut at an entry boundary",
        "a larger max forged",
    ],
)
@pytest.mark.parametrize("clean", [True, False])
def test_damaged_time_index_is_rebuilt(tmp_path: Path, damage: str, clean: bool) -> None:
    log = filled(tmp_path)
    log.flush()
    log.checkpoint()
    log.close()
    if not clean:
        (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    originals = index_files(tmp_path)
    for path in tmp_path.glob("*.timeindex"):
        damaged = TIME_INDEX_DAMAGE[damage](path.read_bytes())
        if damaged is None:
            path.unlink()
        else:
            path.write_bytes(damaged)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.offset_for_timestamp(1_020) == (20, 1_020)
    reopened.close()
    assert index_files(tmp_path) == originals


def test_a_sane_but_wrong_index_entry_is_caught_at_lookup(tmp_path: Path) -> None:
    log = filled(tmp_path, segment_bytes=1 << 20)
    records = read_all(log)
    log.close()
    index = next(tmp_path.glob("*.index"))
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    # Point the second entry at the first entry's batch: monotonic, in range, and wrong.
    relative_offset, _ = struct.unpack_from("<II", data, 8)
    struct.pack_into("<II", data, 8, relative_offset, struct.unpack_from("<II", data, 0)[1] + 1)
    index.write_bytes(bytes(data))
    reopened = Log.open(tmp_path, small_config(segment_bytes=1 << 20), now_ms=0)
    for record in records:
        assert reopened.read(record.offset, 1).first_offset == record.offset


def test_flush_messages_one_fsyncs_every_append(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(flush_messages=1), now_ms=0)
    for expected_end in range(1, 4):
        log.append_as_leader(batch(b"durable"), leader_epoch=0, now_ms=1)
        assert log.recovery_point == expected_end


def test_maybe_flush_follows_flush_ms(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(flush_ms=1_000), now_ms=0)
    assert not log.maybe_flush(now_ms=5_000), "nothing to flush"
    log.append_as_leader(batch(b"a"), leader_epoch=0, now_ms=10)
    assert not log.maybe_flush(now_ms=999)
    assert log.recovery_point == 0
    assert log.maybe_flush(now_ms=1_000)
    assert log.recovery_point == 1
    log.append_as_leader(batch(b"b"), leader_epoch=0, now_ms=1_100)
    assert not log.maybe_flush(now_ms=1_999)
    assert log.maybe_flush(now_ms=2_000)


def test_corrupt_checkpoints_fall_back_to_safe_values(tmp_path: Path) -> None:
    log = filled(tmp_path)
    records = read_all(log)
    log.close()
    (tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).write_bytes(b"0\n1\nnot a number\n")
    (tmp_path / "leader-epoch-checkpoint").write_bytes(b"garbage")
    (tmp_path / "log-start-offset-checkpoint.tmp").write_bytes(b"a torn temp file")
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert read_all(reopened) == records
    assert reopened.leader_epoch_entries() == [(0, 0), (1, 10), (2, 20), (3, 30)]
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("index_interval_bytes", [0, 1, 128, 10_000])
def test_every_index_interval_reopens_cleanly_to_the_same_index(
    tmp_path: Path, index_interval_bytes: int
) -> None:
    log = filled(tmp_path, index_interval_bytes=index_interval_bytes)
    records = read_all(log)
    log.close()
    originals = index_files(tmp_path)
    reopened = Log.open(tmp_path, small_config(index_interval_bytes=index_interval_bytes), now_ms=0)
    assert read_all(reopened) == records
    reopened.close()
    assert index_files(tmp_path) == originals
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    for path in tmp_path.glob("*index"):
        path.unlink()
    rebuilt = Log.open(tmp_path, small_config(index_interval_bytes=index_interval_bytes), now_ms=0)
    rebuilt.close()
    assert index_files(tmp_path) == originals


def test_a_clean_open_does_not_rescan_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = filled(tmp_path)
    log.close()

    def no_scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("a clean open re-read a whole segment")

    monkeypatch.setattr(segment_module.Segment, "scan", no_scan)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.log_end_offset == 40
    abandon(reopened)
    with pytest.raises(AssertionError, match="re-read"):
        Log.open(tmp_path, small_config(), now_ms=0)  # unclean now: the scan is required
