"""Goal: where the cleaner got to survives a restart (Kafka's cleaner-offset-checkpoint), so that
a compacted partition with nothing new is not due again after every broker restart; and the
checkpoint never makes a pass look unneeded when it is: a missing or garbled file, or one that
claims more than the reopened log holds (or less than its log start), means never cleaned, and a
truncation below the cleaned point lowers it durably at once.

Method: a real Log with 2 KiB segments and cleanup.policy=compact, compacted, then closed and
reopened, or copied while open (what a crash leaves on disk) and the copy opened; the checkpoint
file is read back, deleted or overwritten between the steps.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.services.broker.log.checkpoint_format import decode_checkpoint, encode_checkpoint
from samsa.services.broker.log.compaction import NEVER
from samsa.services.broker.log.loading import CLEANER_OFFSET_CHECKPOINT_FILE
from samsa.services.broker.log.log import Log

NOW = 1_000_000
CONFIG = small_config(cleanup_policy=frozenset({"compact"}))


def write(log: Log, count: int, *, first: int = 0) -> None:
    """`count` records to five keys, rewritten over and over: superseded records to clean."""
    for n in range(first, first + count):
        log.append_as_leader(
            batch(b"v%03d" % n + b"." * 100, keys=[b"k%d" % (n % 5)], timestamp=NOW),
            leader_epoch=0,
            now_ms=NOW,
        )


def compacted_log(directory: Path) -> Log:
    """A log of many closed segments, compacted once (nothing kept for a delete horizon)."""
    log = Log.open(directory, CONFIG, now_ms=NOW)
    write(log, 60)
    assert len(log.segments()) > 3
    assert due(log), "never compacted"
    assert log.compact(now_ms=NOW, high_watermark=log.log_end_offset).records_removed > 0
    assert not due(log), "nothing new"
    return log


def due(log: Log) -> bool:
    return log.compaction_due(now_ms=NOW, high_watermark=log.log_end_offset)


def checkpointed(directory: Path) -> tuple[int, ...]:
    """The cleaner checkpoint's first entry: (cleaned_to, due_ms) (the first-cleaned ranges
    follow it)."""
    entries = decode_checkpoint((directory / CLEANER_OFFSET_CHECKPOINT_FILE).read_bytes(), fields=2)
    return entries[0]


def test_a_compacted_log_reopened_with_nothing_new_is_not_due(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    cleaned_to = log.segments()[-1].base_offset
    assert checkpointed(tmp_path) == (cleaned_to, NEVER), "written when the pass was swapped in"
    log.close()

    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert not due(reopened), "the restart alone makes no pass due"
    write(reopened, 60, first=60)  # as much again: well over min.cleanable.dirty.ratio
    assert due(reopened), "what was written since the last pass is dirty"
    reopened.close()


def test_a_crash_copy_of_a_compacted_log_reopens_not_due(tmp_path: Path) -> None:
    log = compacted_log(tmp_path / "log")
    shutil.copytree(tmp_path / "log", tmp_path / "crashed")  # no flush, no close, no marker
    log.close()

    reopened = Log.open(tmp_path / "crashed", CONFIG, now_ms=NOW)
    assert not due(reopened)
    reopened.close()


@pytest.mark.parametrize(
    "garbage",
    [None, b"", b"\xff\xfe", b"0\n1\n17\n", b"0\n1\n-5 7\n", b"0\n2\n5 7\n", b"1\n1\n5 7\n"],
    ids=["missing", "empty", "binary", "one-field", "negative", "count", "version"],
)
def test_a_missing_or_garbled_checkpoint_means_never_cleaned(
    tmp_path: Path, garbage: bytes | None
) -> None:
    compacted_log(tmp_path).close()
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE
    if garbage is None:
        path.unlink()
    else:
        path.write_bytes(garbage)

    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert due(reopened), "a pass is due, as before the first one"
    if garbage is not None:
        assert checkpointed(tmp_path) == (0, NEVER), "rewritten as never cleaned"
    reopened.close()


def test_a_checkpoint_beyond_the_log_end_means_never_cleaned(tmp_path: Path) -> None:
    """What a crash that lost records the last pass covered leaves: a checkpoint above the log
    end, which must not count the records written there again as clean once the log grows."""
    log = compacted_log(tmp_path)
    end = log.log_end_offset
    log.close()
    (tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).write_bytes(encode_checkpoint([(end + 50, NEVER)]))

    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert due(reopened)
    assert checkpointed(tmp_path) == (0, NEVER)
    reopened.close()


def test_a_checkpoint_below_the_log_start_means_never_cleaned(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    cleaned_to = log.segments()[-1].base_offset
    write(log, 40, first=60)
    log.delete_records(log.segments()[-1].base_offset)  # the log start passes the cleaned point
    assert log.log_start_offset > cleaned_to
    assert checkpointed(tmp_path) == (cleaned_to, NEVER)
    log.close()

    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert checkpointed(tmp_path) == (0, NEVER)
    reopened.close()


def test_truncation_below_the_cleaned_point_lowers_it_durably(tmp_path: Path) -> None:
    log = compacted_log(tmp_path / "log")
    cleaned_to = log.segments()[-1].base_offset
    survivors = [record.offset for record in read_all(log) if record.offset < cleaned_to]
    log.truncate_to(survivors[-2])  # inside what the pass cleaned
    truncated_to = log.log_end_offset
    assert truncated_to < cleaned_to
    assert checkpointed(tmp_path / "log") == (truncated_to, NEVER), "lowered at once"
    write(log, 80, first=60)  # the log grows past the old cleaned point again
    assert log.log_end_offset > cleaned_to
    assert due(log), "the records written again are dirty"
    shutil.copytree(tmp_path / "log", tmp_path / "crashed")
    log.close()

    for directory in (tmp_path / "log", tmp_path / "crashed"):
        reopened = Log.open(directory, CONFIG, now_ms=NOW)
        assert checkpointed(directory) == (truncated_to, NEVER)
        assert due(reopened), "the old cleaned point did not come back"
        reopened.close()


def test_a_full_truncation_restarts_the_cleaner(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    log.truncate_fully_and_start_at(5)
    assert checkpointed(tmp_path) == (5, NEVER)
    write(log, 60, first=60)
    assert due(log)
    log.close()
    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert due(reopened)
    reopened.close()


def test_a_kept_tombstone_is_still_due_at_its_horizon_after_a_restart(tmp_path: Path) -> None:
    """The time a pass is next due for what the last one kept is checkpointed with it."""
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    write(log, 40)
    log.append_as_leader(batch(None, keys=[b"k0"], timestamp=NOW), leader_epoch=0, now_ms=NOW)
    for n in range(40):  # k0 not among them: the tombstone stays the newest k0
        keyed = batch(b"w%03d" % n + b"." * 100, keys=[b"k%d" % (1 + n % 4)], timestamp=NOW)
        log.append_as_leader(keyed, leader_epoch=0, now_ms=NOW)
    log.compact(now_ms=NOW, high_watermark=log.log_end_offset)
    horizon = NOW + CONFIG.delete_retention_ms
    assert checkpointed(tmp_path)[1] == horizon
    log.close()

    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)
    end = reopened.log_end_offset
    assert not reopened.compaction_due(now_ms=horizon - 1, high_watermark=end)
    assert reopened.compaction_due(now_ms=horizon, high_watermark=end)
    reopened.close()
