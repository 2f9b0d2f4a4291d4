"""The partition log keeps transactions: the last stable offset and the aborted-transaction index.

Goal: whatever path the log took — appends as leader or follower, rolls, truncation, a clean
close, a crash that lost or tore the index files' unsynced tails — its `.txnindex` entries are
exactly the aborted transactions its batches imply (each in the segment holding its ABORT
marker), a read_committed fetch gets every aborted transaction overlapping what it reads, and
the last stable offset stops at the first open transaction. A marker is checked as KIP-890 says
before a byte is written; a producer cannot open a transaction the coordinator did not verify.

Method: real logs on disk (tmp_path) with 2 KiB segments. A seeded simulation drives one log
with random transactional appends, markers, plain batches, truncations, clean reopens and
crashes, and after every step compares the log with a model computed from the batches it holds.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from log_helpers import small_config

from samsa.common.errors import ErrorCode, InvalidRecordError, SamsaError
from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
)
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.segment import TXN_INDEX_SUFFIX, segment_path
from samsa.services.broker.log.transaction_index import AbortedTransaction, encode_entry

NOW = 1_000_000


def data(
    pid: int, epoch: int, sequence: int, count: int = 1, *, transactional: bool = True
) -> bytes:
    return build_batch(
        [os.urandom(60) for _ in range(count)],
        timestamps=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=transactional,
    )


def marker(kind: int, pid: int, epoch: int) -> bytes:
    return build_control_batch(
        kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp=NOW
    )


def append(log: Log, batch: bytes) -> int:
    """Append as leader (transactions verified); returns the batch's first offset."""
    return log.append_as_leader(
        batch,
        leader_epoch=0,
        now_ms=NOW,
        allow_control_batches=True,
        allow_transactional=True,
    ).first_offset


def flat(log: Log) -> list[AbortedTransaction]:
    return [entry for entries in log.transaction_index().values() for entry in entries]


def test_an_aborted_transaction_is_indexed_and_a_committed_one_is_not(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    first_a = append(log, data(1, 0, 0))
    first_b = append(log, data(2, 0, 0))
    append(log, data(1, 0, 1))
    assert log.last_stable_offset(log.log_end_offset) == first_a
    abort_at = append(log, marker(CONTROL_TYPE_ABORT, 1, 1))
    # the marker is not yet below the high watermark: producer 1's transaction is not decided
    assert log.last_stable_offset(abort_at) == first_a
    assert log.last_stable_offset(log.log_end_offset) == first_b
    commit_at = append(log, marker(CONTROL_TYPE_COMMIT, 2, 1))
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset
    # producer 2 was open when producer 1's transaction was aborted: the entry says so
    assert flat(log) == [AbortedTransaction(1, first_a, abort_at, first_b)]
    assert log.aborted_transactions(0, log.log_end_offset) == flat(log)
    assert log.aborted_transactions(abort_at + 1, log.log_end_offset) == []
    assert commit_at == abort_at + 1
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert flat(reopened) == [AbortedTransaction(1, first_a, abort_at, first_b)]
    assert reopened.last_stable_offset(reopened.log_end_offset) == reopened.log_end_offset
    reopened.close()


def test_an_open_transaction_survives_a_restart_and_holds_the_last_stable_offset(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    append(log, build_batch([b"plain"], timestamps=NOW))
    first = append(log, data(5, 3, 0))
    append(log, build_batch([b"plain"], timestamps=NOW))
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert reopened.last_stable_offset(reopened.log_end_offset) == first
    append(reopened, marker(CONTROL_TYPE_COMMIT, 5, 4))
    assert reopened.last_stable_offset(reopened.log_end_offset) == reopened.log_end_offset
    reopened.close()


def test_markers_are_checked_before_a_byte_is_written(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    append(log, data(1, 0, 0))
    append(log, marker(CONTROL_TYPE_ABORT, 1, 1))
    end = log.log_end_offset
    # a retry of the marker (same epoch, no transaction since) stores nothing
    retried = log.append_as_leader(
        marker(CONTROL_TYPE_ABORT, 1, 1), leader_epoch=0, now_ms=NOW, allow_control_batches=True
    )
    assert retried.record_count == 0 and log.log_end_offset == end
    # a late marker after the producer opened its next transaction would end that one
    append(log, data(1, 1, 0))
    with pytest.raises(SamsaError) as late:
        append(log, marker(CONTROL_TYPE_COMMIT, 1, 1))
    assert late.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    # a marker shares its append with nothing
    with pytest.raises(InvalidRecordError, match="alone"):
        append(log, marker(CONTROL_TYPE_COMMIT, 1, 2) + data(1, 2, 0))
    assert log.log_end_offset == end + 1
    assert len(flat(log)) == 1
    log.close()


def test_producers_cannot_write_markers_or_unverified_transactions(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    with pytest.raises(InvalidRecordError, match="only the broker writes"):
        log.append_as_leader(marker(CONTROL_TYPE_ABORT, 1, 1), leader_epoch=0, now_ms=NOW)
    with pytest.raises(SamsaError) as unverified:
        log.append_as_leader(data(1, 0, 0), leader_epoch=0, now_ms=NOW)
    assert unverified.value.code == ErrorCode.INVALID_TXN_STATE
    two_records = build_batch(
        [b"a", b"b"], producer_id=1, producer_epoch=0, transactional=True, control=True
    )
    with pytest.raises(InvalidRecordError, match="exactly one"):
        append(log, two_records)
    assert log.log_end_offset == 0
    log.close()


def test_a_plain_batch_cannot_move_an_open_transactions_epoch(tmp_path: Path) -> None:
    # A client that knows producer 3's id (DescribeProducers) writes a plain batch at the next
    # epoch: stored, it left the coordinator's marker at that epoch refused as late, and the
    # last stable offset stopped at 0 for good.
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    append(log, data(3, 0, 0))
    with pytest.raises(SamsaError) as refused:
        log.append_as_leader(data(3, 1, 0, transactional=False), leader_epoch=0, now_ms=NOW)
    assert refused.value.code == ErrorCode.INVALID_TXN_STATE
    append(log, marker(CONTROL_TYPE_COMMIT, 3, 1))
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset == 2
    log.close()


def test_a_follower_indexes_what_it_replicates(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "leader", small_config(), now_ms=NOW)
    for pid in range(1, 4):
        append(leader, data(pid, 0, 0, count=3))
    for pid, kind in ((2, CONTROL_TYPE_ABORT), (1, CONTROL_TYPE_COMMIT), (3, CONTROL_TYPE_ABORT)):
        append(leader, marker(kind, pid, 1))
    follower = Log.open(tmp_path / "follower", small_config(), now_ms=NOW)
    offset = 0
    while offset < leader.log_end_offset:
        read = leader.read(offset, 100_000)
        follower.append_as_follower(read.records, now_ms=NOW)
        offset = read.next_offset
    assert flat(follower) == flat(leader) and len(flat(leader)) == 2
    leader.close()
    follower.close()


def test_retention_deletes_a_segment_with_its_index_file(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    first = append(log, data(1, 0, 0))
    append(log, marker(CONTROL_TYPE_ABORT, 1, 1))
    while len(log.segments()) < 3:
        append(log, build_batch([os.urandom(200)], timestamps=NOW))
    assert [entry.first_offset for entry in flat(log)] == [first]
    log.delete_records(log.segments()[1].base_offset)
    log.apply_retention(now_ms=NOW, high_watermark=log.log_end_offset)
    assert flat(log) == []
    assert not [name for name in os.listdir(tmp_path) if name.endswith(TXN_INDEX_SUFFIX)]
    log.close()


# --- a seeded simulation against a model ---------------------------------------------------------


@dataclass
class Producer:
    epoch: int = 0
    sequence: int = 0
    open: bool = False


@dataclass
class Model:
    """What the log holds, batch by batch: (base_offset, last_offset, pid, kind, epoch) with
    kind 'data', 'plain' or a marker type."""

    batches: list[tuple[int, int, int, object, int]] = field(default_factory=list)

    def resume(self, pid: int, producer: Producer) -> None:
        """Where `producer` stands once a truncation left only these batches."""
        mine = [batch for batch in self.batches if batch[2] == pid]
        if not mine:
            producer.sequence, producer.open = 0, False
            return
        producer.epoch = mine[-1][4]
        since_marker: list[tuple[int, int, int, object, int]] = []
        for batch in mine:
            since_marker = [*since_marker, batch] if batch[3] == "data" else []
        producer.sequence = sum(last - base + 1 for base, last, *_ in since_marker)
        producer.open = bool(since_marker)

    def aborted(self) -> list[AbortedTransaction]:
        opened: dict[int, int] = {}
        found = []
        for base, last, pid, kind, _ in self.batches:
            if kind == "data":
                opened.setdefault(pid, base)
            elif kind in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT) and pid in opened:
                first = opened.pop(pid)
                if kind == CONTROL_TYPE_ABORT:
                    stable = min([last + 1, *opened.values()])
                    found.append(AbortedTransaction(pid, first, last, stable))
        return found

    def open_first_offsets(self) -> list[int]:
        opened: dict[int, int] = {}
        for base, _, pid, kind, _ in self.batches:
            if kind == "data":
                opened.setdefault(pid, base)
            elif kind != "plain":
                opened.pop(pid, None)
        return list(opened.values())


def crash(directory: Path, synced_sizes: dict[str, int]) -> None:
    """What a crash may leave of the index files: each cut back to what was synced, plus a
    torn partial entry; a file created since the last sync is gone."""
    for name in os.listdir(directory):
        if not name.endswith(TXN_INDEX_SUFFIX):
            continue
        path = directory / name
        if name not in synced_sizes:
            path.unlink()
            continue
        os.truncate(path, synced_sizes[name])
        with path.open("ab") as file:
            file.write(b"\x00torn")


def index_sizes(directory: Path) -> dict[str, int]:
    return {
        name: (directory / name).stat().st_size
        for name in os.listdir(directory)
        if name.endswith(TXN_INDEX_SUFFIX)
    }


@pytest.mark.parametrize("seed", range(6))
def test_the_index_matches_the_log_through_truncation_restarts_and_crashes(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    model = Model()
    producers = {pid: Producer() for pid in range(1, 4)}
    synced = index_sizes(tmp_path)
    for step in range(160):
        action = rng.random()
        pid = rng.choice(list(producers))
        producer = producers[pid]
        if action < 0.45:
            count = rng.randint(1, 3)
            base = append(log, data(pid, producer.epoch, producer.sequence, count))
            model.batches.append((base, base + count - 1, pid, "data", producer.epoch))
            producer.sequence += count
            producer.open = True
        elif action < 0.65:
            kind = rng.choice([CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT])
            producer.epoch += 1
            base = append(log, marker(kind, pid, producer.epoch))
            model.batches.append((base, base, pid, kind, producer.epoch))
            producer.sequence, producer.open = 0, False
        elif action < 0.75:
            base = append(log, build_batch([os.urandom(80)], timestamps=NOW))
            model.batches.append((base, base, -1, "plain", 0))
        elif action < 0.82 and model.batches:
            cut = rng.randrange(len(model.batches))
            log.truncate_to(model.batches[cut][0])
            del model.batches[cut:]
            for pid, producer in producers.items():
                model.resume(pid, producer)
        elif action < 0.88:
            log.flush()
            synced = index_sizes(tmp_path)
        elif action < 0.94:
            log.close()
            log = Log.open(tmp_path, small_config(), now_ms=NOW)
            synced = index_sizes(tmp_path)
        else:
            crash(tmp_path, synced)
            log = Log.open(tmp_path, small_config(), now_ms=NOW)
            synced = index_sizes(tmp_path)
        where = f"seed {seed}, step {step}"
        assert log.log_end_offset == (model.batches[-1][1] + 1 if model.batches else 0), where
        assert flat(log) == model.aborted(), where
        for base, entries in log.transaction_index().items():
            following = [s.base_offset for s in log.segments() if s.base_offset > base]
            limit = following[0] if following else log.log_end_offset
            assert all(base <= entry.last_offset < limit for entry in entries), where
        expected_lso = min([log.log_end_offset, *model.open_first_offsets()])
        assert log.last_stable_offset(log.log_end_offset) == expected_lso, where
        start = rng.randrange(log.log_end_offset + 1)
        overlapping = sorted(
            (e for e in model.aborted() if e.last_offset >= start),
            key=lambda entry: entry.first_offset,
        )
        assert log.aborted_transactions(start, log.log_end_offset) == overlapping, where
    log.close()


# --- transactions and deleted records (found by the transaction simulation's DeleteRecords mode) --


def plain(size: int = 200) -> bytes:
    return build_batch([os.urandom(size)], timestamps=NOW)


def test_the_last_stable_offset_never_falls_below_the_log_start(tmp_path: Path) -> None:
    """A transaction open across a DeleteRecords holds the offsets after the log start, not the
    deleted ones: a read_committed reader's end (and ListOffsets' latest) stays within the log."""
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert append(log, data(1, 0, 0)) == 0
    for _ in range(4):
        append(log, plain())
    log.delete_records(3)
    assert log.last_stable_offset(log.log_end_offset) == 3
    assert log.last_stable_offset(2) == 2  # a high watermark below the start is its own bound
    log.close()


def test_a_crash_after_deletion_does_not_reopen_a_transaction_whose_marker_was_deleted(
    tmp_path: Path,
) -> None:
    """After an unclean stop the producer state is rebuilt from a snapshot at or below the
    recovery point. When DeleteRecords removed the segments after that snapshot, replaying from
    it skipped the deleted ABORT marker: the transaction came back open and held the last stable
    offset for ever (a hanging transaction). Such snapshots are dropped, as Kafka drops them."""
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    append(log, data(1, 0, 0))
    while len(log.segments()) < 2:  # the roll snapshots the state: the transaction is open
        append(log, plain())
    log.flush()  # the recovery point passes that snapshot
    append(log, marker(CONTROL_TYPE_ABORT, 1, 1))
    while len(log.segments()) < 3:  # one more roll: a snapshot with it closed
        append(log, plain())
    log.delete_records(log.segments()[2].base_offset)  # the marker's segment is deleted
    end = log.log_end_offset
    log._local_log.close()  # a crash: no flush, no checkpoint of the recovery point
    reopened = Log.open(tmp_path, small_config(), now_ms=NOW)
    assert reopened.log_end_offset == end
    assert reopened.last_stable_offset(end) == end
    reopened.close()


def test_a_new_segment_does_not_inherit_a_deleted_segments_index_file(tmp_path: Path) -> None:
    """A kill -9 inside Segment.delete (retention, truncation) after the .log file went leaves
    its .txnindex behind; a segment created later at the same base offset (a follower refetching
    the same bytes rolls at the same offsets) must not take its stale aborted transactions, which
    would hide records of a committed transaction from read_committed readers."""
    config = small_config()
    log = Log.open(tmp_path, config, now_ms=NOW)
    while len(log.segments()) < 2:
        append(log, data(9, 0, log.log_end_offset, transactional=False))
    rolled_at = log.segments()[-1].base_offset
    log.close()
    for suffix in (".log", ".index", ".timeindex"):
        segment_path(tmp_path, rolled_at, suffix).unlink(missing_ok=True)
    stale = AbortedTransaction(7, rolled_at, rolled_at + 1, rolled_at)
    segment_path(tmp_path, rolled_at, TXN_INDEX_SUFFIX).write_bytes(encode_entry(stale))

    log = Log.open(tmp_path, config, now_ms=NOW)
    assert log.log_end_offset == rolled_at
    append(log, data(7, 0, 0))  # producer 7 now writes a transaction there, and commits it
    assert [s.base_offset for s in log.segments()][-1] == rolled_at
    append(log, marker(CONTROL_TYPE_COMMIT, 7, 1))
    log.close()
    reopened = Log.open(tmp_path, config, now_ms=NOW)
    assert flat(reopened) == []
    assert reopened.aborted_transactions(rolled_at, reopened.log_end_offset) == []
    reopened.close()
