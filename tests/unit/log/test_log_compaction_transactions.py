"""Goal: compaction is transaction-aware (Kafka's cleaner): an aborted transaction's records are
removed and shadow nothing, a committed transaction's records are compacted like any others, a
COMMIT marker goes once its transaction is empty and delete.retention.ms old (never its producer's
last batch), an ABORT marker stays, and nothing a read_committed reader sees changes but superseded
records, on the leader or on a follower that copied part of a transaction before it was cleaned;
the log reopens (cleanly or after a crash, replaying from a snapshot taken inside a transaction
whose marker went) with no transaction left open.

Method: a real Log with 2 KiB segments and cleanup.policy=compact; transactions written as the
broker writes them (data batches, then a marker at the next epoch); a read_committed view built
the way a consumer builds it (the log's read, its aborted transactions, the SDK's filter); a
follower is a second Log fed the leader's reads. Without the later-batch rule a crash leaves
transaction 0 hanging; with ABORT markers removed as Kafka removes them, the follower shows an
aborted record.
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


def compact_config(**overrides: object):
    return small_config(cleanup_policy=frozenset({"compact"}), **overrides)


def transaction(log: Log, epoch: int, records: dict[bytes, bytes], end: int) -> None:
    """One transaction of PID at `epoch` (sequences from 0), ended by a marker at epoch + 1."""
    transaction_records(log, epoch, records)
    append(log, marker(end, PID, epoch + 1))


def transaction_records(
    log: Log, epoch: int, records: dict[bytes, bytes], first_sequence: int = 0
) -> None:
    """The records of PID's transaction at `epoch`, not ended."""
    for sequence, (key, value) in enumerate(records.items(), start=first_sequence):
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


def crash_copy(log: Log, directory: Path) -> Path:
    """The log's directory as a crash would leave it (nothing closed cleanly), then close."""
    crashed = directory.with_name(directory.name + "-crashed")
    shutil.copytree(directory, crashed)
    log.close()
    return crashed


def test_aborted_records_go_committed_ones_compact_and_young_markers_stay(tmp_path: Path) -> None:
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
    recovered = Log.open(crash_copy(log, tmp_path), compact_config(), now_ms=NOW)
    assert read_committed(recovered) == after
    assert recovered.last_stable_offset(recovered.log_end_offset) == recovered.log_end_offset
    assert [v for _, k, v in after if k == b"k1"] == [b"b1"]
    recovered.close()


def fill(log: Log) -> None:
    """Plain records that close the segments before them (compaction skips the active one)."""
    for n in range(30):
        plain(log, b"f%d" % (n % 3), b"f%d" % n)


def test_commit_markers_of_emptied_transactions_go_so_the_log_stays_bounded(
    tmp_path: Path,
) -> None:
    """A consumer group's offsets committed in transactions: one key rewritten by every
    transaction, as in __consumer_offsets. Once delete.retention.ms passed, compaction leaves
    the newest record, its transaction's marker and the ABORT marker, whatever the number of
    transactions."""
    config = compact_config(delete_retention_ms=1_000)
    log = Log.open(tmp_path, config, now_ms=NOW)
    for epoch in range(40):
        kind = CONTROL_TYPE_ABORT if epoch == 20 else CONTROL_TYPE_COMMIT
        transaction(log, epoch, {b"offsets": b"%02d" % epoch}, kind)
    fill(log)
    end = log.log_end_offset
    before = read_committed(log)
    later = NOW + 1_000

    early = log.compact(now_ms=later - 1, high_watermark=end)
    assert early.markers_removed == 0 and early.records_removed > 0
    assert not log.compaction_due(now_ms=later - 1, high_watermark=end), "nothing new, none due"
    assert log.compact(now_ms=later - 1, high_watermark=end).markers_removed == 0, "too young"
    assert log.compaction_due(now_ms=later, high_watermark=end), "the emptied markers may go"
    removed = log.compact(now_ms=later, high_watermark=end)
    assert removed.markers_removed == 38
    assert not log.compaction_due(now_ms=later + 10**9, high_watermark=end), "nothing left"

    markers = marker_offsets(log)
    assert len(markers) == 2, "the ABORT marker and the marker of the newest record's transaction"
    after = read_committed(log)
    assert set(after) <= set(before)
    assert [v for _, k, v in after if k == b"offsets"] == [b"39"]
    assert log.last_stable_offset(end) == end
    assert log.compact(now_ms=later, high_watermark=end).markers_removed == 0, "nothing left"
    log.close()

    reopened = Log.open(tmp_path, config, now_ms=later)
    assert read_committed(reopened) == after and marker_offsets(reopened) == markers
    assert reopened.last_stable_offset(end) == end, "no transaction reopened"
    transaction(reopened, 40, {b"offsets": b"40"}, CONTROL_TYPE_COMMIT)  # the producer goes on
    assert reopened.last_stable_offset(reopened.log_end_offset) == reopened.log_end_offset
    reopened.close()


def until_a_roll(log: Log) -> None:
    segments = len(log.segments())
    n = 0
    while len(log.segments()) == segments:
        plain(log, b"f%d" % (n % 3), b"f%d" % n)
        n += 1


def roll_inside_transaction(log: Log) -> dict[bytes, bytes]:
    """PID's transaction at epoch 0, with a segment roll inside it (that roll's producer
    snapshot shows it open), then a flush and checkpoint: the recovery point is inside it too.
    Returns its records."""
    until_a_roll(log)
    while log.segments()[-1].size_bytes < 1600:  # room for one of its records, not three
        plain(log, b"f", b"f")
    segments = len(log.segments())
    records: dict[bytes, bytes] = {}
    while len(log.segments()) == segments:
        key = b"k%d" % len(records)
        transaction_records(log, 0, {key: b"a"}, first_sequence=len(records))
        records[key] = b"a"
    assert len(records) > 1, "the roll came after its first record"
    log.flush()
    log.checkpoint()
    return records


def test_a_crash_replays_from_a_snapshot_taken_inside_a_transaction_whose_marker_went(
    tmp_path: Path,
) -> None:
    """Recovery replays from a producer snapshot taken while transaction 0 was open; its
    records and marker are gone since. Replay reaches transaction 1's, which ends it: no
    transaction hangs."""
    config = compact_config(delete_retention_ms=1_000)
    log = Log.open(tmp_path, config, now_ms=NOW)
    keys = roll_inside_transaction(log)
    append(log, marker(CONTROL_TYPE_COMMIT, PID, 1))
    for key in keys:
        plain(log, key, b"p")  # supersedes transaction 0's records
    transaction(log, 1, {b"b": b"b"}, CONTROL_TYPE_COMMIT)
    until_a_roll(log)
    end = log.log_end_offset
    log.compact(now_ms=NOW + 1_000, high_watermark=end)
    assert log.compact(now_ms=NOW + 1_000, high_watermark=end).markers_removed == 1
    after = read_committed(log)

    recovered = Log.open(crash_copy(log, tmp_path), config, now_ms=NOW + 1_000)
    assert recovered.last_stable_offset(end) == end, "transaction 0 hangs"
    assert read_committed(recovered) == after
    recovered.close()


def test_the_last_marker_of_a_producer_stays(tmp_path: Path) -> None:
    """Transaction 0's records are superseded and removed, but its marker is its producer's
    last batch: recovery from the snapshot taken inside it needs that marker to end it."""
    config = compact_config(delete_retention_ms=1_000)
    log = Log.open(tmp_path, config, now_ms=NOW)
    keys = roll_inside_transaction(log)
    append(log, marker(CONTROL_TYPE_COMMIT, PID, 1))
    for key in keys:
        plain(log, key, b"p")
    until_a_roll(log)
    end = log.log_end_offset
    for _ in range(3):
        log.compact(now_ms=NOW + 1_000, high_watermark=end)
    assert len(marker_offsets(log)) == 1

    recovered = Log.open(crash_copy(log, tmp_path), config, now_ms=NOW + 1_000)
    assert recovered.last_stable_offset(end) == end, "transaction 0 hangs"
    recovered.close()


def copy(leader: Log, follower: Log, upto: int) -> None:
    """Replicate the leader's batches below `upto` from the follower's log end, as fetches do."""
    while follower.log_end_offset < upto:
        read = leader.read(follower.log_end_offset, 4096, max_offset=upto)
        if not read.records:
            return
        follower.append_as_follower(read.records, now_ms=NOW)


def copied_without_its_marker(tmp_path: Path, kind: int) -> tuple[Log, Log, int]:
    """A leader holding transaction 0 ({k1: a1}) ended by a `kind` marker, and a follower
    that copied the transaction's record but not the marker; and the marker's offset."""
    config = compact_config(delete_retention_ms=1_000)
    leader = Log.open(tmp_path / "leader", config, now_ms=NOW)
    follower = Log.open(tmp_path / "follower", config, now_ms=NOW)
    transaction_records(leader, 0, {b"k1": b"a1"})
    marker_at = leader.log_end_offset
    append(leader, marker(kind, PID, 1))
    copy(leader, follower, marker_at)
    return leader, follower, marker_at


def test_a_follower_that_copied_aborted_records_before_they_went_still_hides_them(
    tmp_path: Path,
) -> None:
    """Why ABORT markers stay (a departure from Kafka): a follower out of the ISR copied an
    aborted transaction's records but not its marker; the leader removed both records and,
    were it allowed, the marker. The follower then copies the producer's next transaction,
    which commits: without the ABORT marker it would take the aborted records for part of it."""
    leader, follower, abort_at = copied_without_its_marker(tmp_path, CONTROL_TYPE_ABORT)
    transaction(leader, 1, {b"k2": b"b2"}, CONTROL_TYPE_COMMIT)
    fill(leader)
    end = leader.log_end_offset
    for _ in range(3):
        leader.compact(now_ms=NOW + 1_000, high_watermark=end)
    assert abort_at in marker_offsets(leader)

    copy(leader, follower, end)
    shown = [(key, value) for _, key, value in read_committed(follower) if key in (b"k1", b"k2")]
    assert shown == [(b"k2", b"b2")], "the aborted a1 is hidden on the follower too"
    assert follower.last_stable_offset(end) == end
    leader.close()
    follower.close()


def test_a_follower_that_copied_committed_records_before_their_marker_went_agrees(
    tmp_path: Path,
) -> None:
    """Why COMMIT markers may go: the leader removes a committed record only for a newer one of
    its key, which the follower copies too. Here the follower copied transaction 0's record but
    not its COMMIT marker, which the leader then removed; the producer's next transaction
    aborts, so the follower hides the old record with it, and still shows each key's newest."""
    leader, follower, commit_at = copied_without_its_marker(tmp_path, CONTROL_TYPE_COMMIT)
    plain(leader, b"k1", b"p1")
    transaction(leader, 1, {b"k2": b"b2"}, CONTROL_TYPE_ABORT)
    fill(leader)
    end = leader.log_end_offset
    for _ in range(3):
        leader.compact(now_ms=NOW + 1_000, high_watermark=end)
    assert commit_at not in marker_offsets(leader)

    copy(leader, follower, end)
    newest = {key: value for _, key, value in read_committed(leader)}
    assert {key: value for _, key, value in read_committed(follower)} == newest
    assert newest[b"k1"] == b"p1" and b"k2" not in newest
    assert follower.last_stable_offset(end) == end
    leader.close()
    follower.close()
