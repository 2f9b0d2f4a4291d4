"""Goal: compaction is transaction-aware (Kafka's cleaner): an aborted transaction's records are
removed and shadow nothing, a committed transaction's records are compacted like any others, the
markers stay, and nothing a read_committed reader sees changes but superseded records; the log
reopens (cleanly or after a crash) with no transaction left open.

Method: a real Log with 2 KiB segments and cleanup.policy=compact; transactions written as the
broker writes them (data batches, then a marker at the next epoch); a read_committed view built
the way a consumer builds it (the log's read, its aborted transactions, the SDK's filter).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from log_helpers import read_all, read_batches, small_config
from test_log_transactions import NOW, append, marker

from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    decode_batches,
)
from samsa.common.record.transaction_filter import AbortedTransactionFilter
from samsa.services.broker.log.log import Log

PID = 5


def compact_config():
    return small_config(cleanup_policy=frozenset({"compact"}))


def transaction(log: Log, epoch: int, records: dict[bytes, bytes], end: int) -> None:
    """One transaction of PID at `epoch` (sequences from 0), ended by a marker at epoch + 1."""
    for sequence, (key, value) in enumerate(records.items()):
        append(
            log,
            build_batch(
                [value + b"." * 100],
                keys=[key],
                timestamps=NOW,
                producer_id=PID,
                producer_epoch=epoch,
                base_sequence=sequence,
                transactional=True,
            ),
        )
    append(log, marker(end, PID, epoch + 1))


def plain(log: Log, key: bytes, value: bytes) -> None:
    append(log, build_batch([value + b"." * 100], keys=[key], timestamps=NOW))


def read_committed(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value prefix) of what a read_committed consumer gets, all of the log."""
    end = log.last_stable_offset(log.log_end_offset)
    shown = AbortedTransactionFilter(
        (t.producer_id, t.first_offset) for t in log.aborted_transactions(0, end)
    )
    out = []
    offset = log.log_start_offset
    while offset < end:
        read = log.read(offset, 4096, max_offset=end)
        for batch in decode_batches(read.records):
            if shown.batch_is_visible(batch):
                out += [
                    (r.offset, r.key, None if r.value is None else r.value[:2])
                    for r in batch
                    if r.offset >= offset
                ]
        offset = read.next_offset
    return out


def marker_offsets(log: Log) -> list[int]:
    batches = [b for raw in read_batches(log) for b in decode_batches(raw)]
    return [b.header.base_offset for b in batches if b.header.is_control]


def test_aborted_records_go_committed_ones_compact_and_markers_stay(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(), now_ms=NOW)
    transaction(log, 0, {b"k1": b"a1", b"k2": b"a2"}, CONTROL_TYPE_COMMIT)
    transaction(log, 1, {b"k1": b"b1", b"k3": b"b3"}, CONTROL_TYPE_ABORT)  # must shadow nothing
    plain(log, b"k2", b"p2")  # supersedes the committed a2
    transaction(log, 2, {b"k3": b"c3"}, CONTROL_TYPE_COMMIT)
    for n in range(30):  # closes the segments above (compaction leaves the active one alone)
        plain(log, b"f%d" % (n % 3), b"f%d" % n)
    end = log.log_end_offset
    before = read_committed(log)
    markers_before = marker_offsets(log)
    assert len(markers_before) == 3
    assert [v for _, k, v in before if k in (b"k1", b"k2", b"k3")] == [b"a1", b"a2", b"p2", b"c3"]

    result = log.compact(now_ms=NOW, high_watermark=end)

    stored = read_all(log)
    values = [r.value[:2] for r in stored if r.value is not None and r.key in (b"k1", b"k2", b"k3")]
    assert values == [b"a1", b"p2", b"c3"], "aborted b1 and b3 gone, committed a2 superseded"
    assert result.records_removed >= 3
    assert marker_offsets(log) == markers_before, "every marker stays"
    after = read_committed(log)
    superseded = {(o, k, v) for o, k, v in before} - set(after)
    assert set(after) <= set(before), "no record appears, none changes"
    assert {k for _, k, _ in superseded} <= {b"k2", b"f0", b"f1", b"f2"}
    assert {k for _, k, _ in after} == {k for _, k, _ in before}, "every key keeps its newest"
    assert log.last_stable_offset(end) == end and log.log_end_offset == end
    log.close()

    reopened = Log.open(tmp_path, compact_config(), now_ms=NOW)
    assert read_committed(reopened) == after
    assert reopened.last_stable_offset(end) == end, "no transaction reopened"
    assert not reopened.has_open_transaction(PID, 3)
    transaction(reopened, 3, {b"k9": b"d9"}, CONTROL_TYPE_COMMIT)  # the producer goes on
    assert reopened.last_stable_offset(reopened.log_end_offset) == reopened.log_end_offset
    reopened.close()


def test_a_crash_after_compaction_reopens_no_transaction(tmp_path: Path) -> None:
    log = Log.open(tmp_path, compact_config(), now_ms=NOW)
    transaction(log, 0, {b"k1": b"a1"}, CONTROL_TYPE_ABORT)
    transaction(log, 1, {b"k1": b"b1"}, CONTROL_TYPE_COMMIT)
    for n in range(30):
        plain(log, b"f%d" % (n % 3), b"f%d" % n)
    end = log.log_end_offset
    log.compact(now_ms=NOW, high_watermark=end)
    after = read_committed(log)
    # A crash: nothing closed cleanly, so the next open recovers and replays producer state.
    crashed = tmp_path.parent / "crashed"
    shutil.copytree(tmp_path, crashed)
    log.close()
    recovered = Log.open(crashed, compact_config(), now_ms=NOW)
    assert read_committed(recovered) == after
    assert recovered.last_stable_offset(recovered.log_end_offset) == recovered.log_end_offset
    assert [v for _, k, v in after if k == b"k1"] == [b"b1"]
    recovered.close()
