"""Goal: a compaction pass planned on the log's thread may run on another while the log goes on
appending and serving reads, and is swapped in only if its segments are still as planned: when
retention, DeleteRecords, truncation or a close got there first, or the pass was cancelled, it
changes nothing and leaves no file behind, and the next pass compacts as if it never ran. A
pass is due only when min.cleanable.dirty.ratio of the log is new since the last one, or when a
tombstone it kept may go.

Method: a real Log with 2 KiB segments and cleanup.policy=compact; `plan_compaction`, the job's
`run` (on a real thread where it matters) and `finish_compaction`, with the interfering change
made between the steps; the log's records and directory compared before and after.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.services.broker.log.cleaner import NOTHING_CLEANED, CleaningCancelled, CleaningJob
from samsa.services.broker.log.log import Log

NOW = 1_000_000


def compacted_log(directory: Path) -> Log:
    """Five keys rewritten 60 times: closed segments full of superseded records."""
    log = Log.open(directory, small_config(cleanup_policy=frozenset({"compact"})), now_ms=NOW)
    for n in range(60):
        log.append_as_leader(
            batch(b"v%02d" % n + b"." * 100, keys=[b"k%d" % (n % 5)], timestamp=NOW),
            leader_epoch=0,
            now_ms=NOW,
        )
    assert len(log.segments()) > 3
    return log


def newest_by_key(log: Log) -> dict[bytes | None, bytes | None]:
    return {record.key: record.value for record in read_all(log)}


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap"))


def test_a_pass_run_on_another_thread_while_the_log_appends_is_swapped_in(
    tmp_path: Path,
) -> None:
    log = compacted_log(tmp_path)
    end = log.log_end_offset
    job = log.plan_compaction(now_ms=NOW, high_watermark=end)
    assert job is not None
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(job.run()))
    worker.start()
    for n in range(60, 80):  # the log goes on meanwhile
        log.append_as_leader(
            batch(b"v%02d" % n, keys=[b"k%d" % (n % 5)], timestamp=NOW), leader_epoch=0, now_ms=NOW
        )
        assert log.read(0, 1 << 20).records
    worker.join()
    before = log.size_bytes()

    result = log.finish_compaction(job, outcome[0])  # type: ignore[arg-type]

    assert result.records_removed > 0 and log.size_bytes() < before
    assert newest_by_key(log) == {b"k%d" % k: b"v%02d" % (75 + k) for k in range(5)}
    assert log.log_end_offset == 80 and leftovers(tmp_path) == []
    log.close()


def retention_deletes_the_oldest(log: Log) -> None:
    log.delete_records(log.segments()[1].base_offset)


def truncation_reaches_a_closed_segment(log: Log) -> None:
    log.truncate_to(log.segments()[1].base_offset + 1)


@pytest.mark.parametrize(
    "change",
    [retention_deletes_the_oldest, truncation_reaches_a_closed_segment],
    ids=["retention", "truncation"],
)
def test_a_pass_whose_segments_changed_is_discarded(
    tmp_path: Path, change: Callable[[Log], None]
) -> None:
    log = compacted_log(tmp_path)
    job = planned(log)
    cleaned = job.run()
    assert leftovers(tmp_path), "the pass wrote its cleaned files"
    change(log)
    kept = read_all(log)

    assert log.finish_compaction(job, cleaned) == NOTHING_CLEANED
    assert read_all(log) == kept and leftovers(tmp_path) == []
    assert log.compact(now_ms=NOW, high_watermark=log.log_end_offset).records_removed > 0
    log.close()


def planned(log: Log) -> CleaningJob:
    job = log.plan_compaction(now_ms=NOW, high_watermark=log.log_end_offset)
    assert job is not None
    return job


def test_a_pass_finished_after_the_log_closed_leaves_nothing(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    job = planned(log)
    cleaned = job.run()
    log.close()
    assert log.finish_compaction(job, cleaned) == NOTHING_CLEANED
    assert leftovers(tmp_path) == []
    reopened = Log.open(tmp_path, log.config, now_ms=NOW)
    assert len(read_all(reopened)) == 60, "nothing was compacted"
    reopened.close()


def test_a_cancelled_pass_raises_and_its_discard_leaves_nothing(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    job = planned(log)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(CleaningCancelled):
        job.run(cancel)
    job.discard()
    assert leftovers(tmp_path) == [] and len(read_all(log)) == 60
    log.close()


def test_nothing_to_plan_without_closed_segments_or_compaction(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "one", small_config(cleanup_policy=frozenset({"compact"})), now_ms=0)
    log.append_as_leader(batch(b"v", keys=[b"k"]), leader_epoch=0, now_ms=0)
    assert log.plan_compaction(now_ms=0, high_watermark=1) is None
    log.close()
    plain = compacted_log(tmp_path / "compacted")
    assert plain.plan_compaction(now_ms=NOW, high_watermark=0) is None, "nothing below the HW"
    plain.close()


def test_a_pass_is_due_when_half_the_log_is_new_or_a_tombstone_may_go(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(cleanup_policy=frozenset({"compact"})), now_ms=NOW)

    def write(values: list[bytes | None], keys: int = 40) -> None:
        """`values` to keys k0, k1, ... k<keys - 1>, k0, ..."""
        for n, value in enumerate(values):
            keyed = batch(value, keys=[b"k%d" % (n % keys)], timestamp=NOW)
            log.append_as_leader(keyed, leader_epoch=0, now_ms=NOW)

    write([b"old" + b"." * 100] * 80)  # 40 keys twice
    end = log.log_end_offset
    assert log.compaction_due(now_ms=NOW, high_watermark=end), "never compacted"
    log.compact(now_ms=NOW, high_watermark=end)
    assert not log.compaction_due(now_ms=NOW, high_watermark=end), "nothing new"

    write([b"new" + b"." * 100] * 15)  # about a quarter of what is cleanable
    assert not log.compaction_due(now_ms=NOW, high_watermark=log.log_end_offset)
    write([b"new" + b"." * 100] * 40)
    assert log.compaction_due(now_ms=NOW, high_watermark=log.log_end_offset)

    write([None], keys=1)  # k0 deleted
    for n in range(60):  # the others rewritten, so that the tombstone's segment closes
        keyed = batch(b"after" + b"." * 100, keys=[b"k%d" % (1 + n % 39)], timestamp=NOW)
        log.append_as_leader(keyed, leader_epoch=0, now_ms=NOW)
    end = log.log_end_offset
    log.compact(now_ms=NOW, high_watermark=end)
    retention = log.config.delete_retention_ms
    assert None in [r.value for r in read_all(log)], "the tombstone stays until its horizon"
    assert not log.compaction_due(now_ms=NOW + retention - 1, high_watermark=end)
    assert log.compaction_due(now_ms=NOW + retention, high_watermark=end)
    log.compact(now_ms=NOW + retention, high_watermark=end)
    assert None not in [r.value for r in read_all(log)]
    assert not log.compaction_due(now_ms=NOW + 2 * retention, high_watermark=end)
    log.close()
