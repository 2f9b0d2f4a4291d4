"""Goal: opening a log costs no more durable writes than its state needs, without weakening
recovery. A brand-new log writes no checkpoint file (an absent file already means the default);
a clean re-open removes the clean-shutdown marker without a directory fsync, and the first change
to the log's files makes that removal durable before it touches them, so an OS crash can never
bring the marker back over a log changed since the open.

Method: real files in tmp_path. Directory fsyncs made by the log itself are counted by wrapping
`fsync_directory` where log_durability.py looks it up (the fsync still happens); the log is not
mocked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.services.broker.log import log_durability as durability_module
from samsa.services.broker.log.loading import (
    CHECKPOINT_FILES,
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
)
from samsa.services.broker.log.log import Log


@pytest.fixture
def directory_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories the log fsyncs (log_durability.py), in order."""
    synced: list[Path] = []
    real = durability_module.fsync_directory

    def counting(directory: Path) -> None:
        synced.append(directory)
        real(directory)

    monkeypatch.setattr(durability_module, "fsync_directory", counting)
    return synced


def append(log: Log, count: int, *, epoch: int = 0) -> None:
    for index in range(count):
        log.append_as_leader(batch(b"value %d" % index), leader_epoch=epoch, now_ms=1)


def test_a_new_log_writes_no_checkpoint_file(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    log.checkpoint()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["00000000000000000000.log"]
    log.close()


def test_an_epoch_with_no_record_yet_is_not_written_at_close(tmp_path: Path) -> None:
    """A broker leading thousands of empty partitions stops in seconds: an epoch a leader
    started at the log end waits for its first record before it costs a checkpoint write."""
    log = Log.open(tmp_path, small_config(), now_ms=0)
    log.start_leader_epoch(3)
    log.close()
    assert "leader-epoch-checkpoint" not in {path.name for path in tmp_path.iterdir()}
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    append(reopened, 2, epoch=4)  # elected again after the restart, at a new epoch
    reopened.checkpoint()
    assert reopened.end_offset_for_epoch(4) == (4, 2)
    reopened.close()


def test_a_log_appended_checkpointed_and_closed_reopens_to_the_same_state(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    append(log, 30, epoch=2)
    log.delete_records(4)
    log.flush()
    log.checkpoint()
    assert {name for name in CHECKPOINT_FILES if (tmp_path / name).exists()} == set(
        CHECKPOINT_FILES
    ), "values away from the defaults are written"
    state = (log.log_start_offset, log.log_end_offset, log.leader_epoch_entries(), read_all(log))
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert (
        reopened.log_start_offset,
        reopened.log_end_offset,
        reopened.leader_epoch_entries(),
        read_all(reopened),
    ) == state
    assert reopened.recovery_point == reopened.log_end_offset
    reopened.close()


def test_a_log_left_at_its_defaults_reopens_after_a_crash(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    append(log, 5)  # epoch 0 from offset 0: the epoch checkpoint moves off its default
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).exists()
    log._local_log.close()  # a crash: descriptors closed, nothing flushed or marked
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.log_end_offset == 5 and reopened.leader_epoch_entries() == [(0, 0)]
    assert [record.value for record in read_all(reopened)] == [b"value %d" % i for i in range(5)]
    reopened.close()


def test_the_first_flush_of_a_new_log_makes_its_segment_file_durable(
    tmp_path: Path, directory_fsyncs: list[Path]
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    assert directory_fsyncs == [], "creating the log fsyncs nothing"
    append(log, 1)
    log.flush()
    assert directory_fsyncs == [tmp_path], "the new segment's directory entry"
    log.flush()
    assert directory_fsyncs == [tmp_path]
    log.close()


def test_a_clean_open_defers_the_marker_fsync_to_the_first_append(
    tmp_path: Path, directory_fsyncs: list[Path]
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    append(log, 3)
    log.close()
    directory_fsyncs.clear()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "the marker is consumed"
    assert directory_fsyncs == [], "no directory fsync at open"
    assert reopened._durability.marker_removal_unsynced
    reopened.read(0, 4096)
    assert directory_fsyncs == [], "reads change no file"
    append(reopened, 1)
    assert directory_fsyncs == [tmp_path], "the removal is made durable by the first append"
    assert not reopened._durability.marker_removal_unsynced
    append(reopened, 1)
    assert directory_fsyncs == [tmp_path], "once"
    reopened.close()


@pytest.mark.parametrize("change", ["truncate_to", "truncate_fully", "retention", "delete_records"])
def test_every_other_change_after_a_clean_open_syncs_the_marker_removal_first(
    tmp_path: Path, directory_fsyncs: list[Path], change: str
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    append(log, 60)  # several 2 KiB segments
    log.close()
    reopened = Log.open(tmp_path, small_config(retention_bytes=1), now_ms=0)
    directory_fsyncs.clear()
    if change == "truncate_to":
        reopened.truncate_to(10)
    elif change == "truncate_fully":
        reopened.truncate_fully_and_start_at(100)
    elif change == "retention":
        assert reopened.apply_retention(now_ms=1, high_watermark=reopened.log_end_offset) > 0
    else:
        reopened.delete_records(reopened.segments()[1].base_offset)
    assert directory_fsyncs[:1] == [tmp_path], "before the change"
    assert not reopened._durability.marker_removal_unsynced
    reopened.close()


def test_an_unclean_open_has_no_marker_to_sync(
    tmp_path: Path, directory_fsyncs: list[Path]
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    append(log, 3)
    log.flush()
    log._local_log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert not reopened._durability.marker_removal_unsynced
    directory_fsyncs.clear()
    append(reopened, 1)
    assert directory_fsyncs == []
    reopened.close()


def test_a_corrupt_epoch_checkpoint_still_consumes_the_marker(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    append(log, 3, epoch=1)
    log.close()
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(b"garbage")
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.leader_epoch_entries() == [(1, 0)], "rebuilt from the batches"
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "a later crash must not look clean"
    reopened.close()
