"""Goal: the producer-state table tracks each producer's open transaction on a partition and
ends it only with a marker that may end it (producer_state.py, KIP-98 and KIP-890): the first
transactional batch opens it, a marker closes it and reports it, a late or stale marker is
refused, a retried one is recognised, a late produce of the ended transaction is refused, so is
a plain batch of a producer whose transaction is open, and the state survives a snapshot and
replay. Method: the pure table, driven with planned batches.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import CONTROL_TYPE_ABORT as ABORT
from samsa.common.record.codec import CONTROL_TYPE_COMMIT as COMMIT
from samsa.services.broker.log.append_info import PlannedBatch
from samsa.services.broker.log.producer_snapshot_codec import decode_snapshot, encode_snapshot
from samsa.services.broker.log.producer_state import (
    NO_MARKER_TYPE,
    NO_OFFSET,
    AppendRefused,
    CompletedTransaction,
    MarkerWrittenBefore,
    ProducerEntry,
    ProducerStateTable,
)


def data(
    producer_id: int, epoch: int, sequence: int, offset: int, records: int = 1, txn: bool = True
) -> PlannedBatch:
    return PlannedBatch(
        position=0,
        base_offset=offset,
        last_offset=offset + records - 1,
        max_timestamp=offset,
        size_bytes=100,
        partition_leader_epoch=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=txn,
    )


def marker(producer_id: int, epoch: int, offset: int, kind: int = COMMIT) -> PlannedBatch:
    return PlannedBatch(
        position=0,
        base_offset=offset,
        last_offset=offset,
        max_timestamp=offset,
        size_bytes=80,
        partition_leader_epoch=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
        control_type=kind,
    )


def appended(table: ProducerStateTable, *batches: PlannedBatch) -> list[CompletedTransaction]:
    """Check each data batch as the leader would, and apply it."""
    completed = []
    for item in batches:
        if not item.is_control:
            assert table.check_leader_append([item]) is None, item
        completed += table.apply([item], 0, item.control_type)
    return completed


def applied(table: ProducerStateTable, batches: list[PlannedBatch]) -> None:
    """Apply as the log does (transaction_index.apply_batches): each marker alone, with its type."""
    for item in batches:
        table.apply([item], 0, item.control_type)


def test_the_first_transactional_batch_opens_the_transaction_and_a_marker_ends_it() -> None:
    table = ProducerStateTable()
    assert appended(table, data(7, 0, 0, 10, records=3)) == []
    assert appended(table, data(7, 0, 3, 20, records=2)) == []
    assert table.open_transactions() == {7: 10}
    assert table.entry(7).current_txn_first_offset == 10  # type: ignore[union-attr]

    assert table.check_marker(7, 1, COMMIT) is None
    assert table.apply([marker(7, 1, 30)], 0, COMMIT) == [CompletedTransaction(7, 10, 30)]
    assert table.open_transactions() == {}
    entry = table.entry(7)
    assert entry is not None
    assert (entry.producer_epoch, entry.batches, entry.current_txn_first_offset) == (1, (), -1)

    # The next transaction, at the bumped epoch, restarts the sequence at 0.
    assert appended(table, data(7, 1, 0, 31)) == []
    assert table.open_transactions() == {7: 31}


def test_non_transactional_batches_open_nothing() -> None:
    table = ProducerStateTable()
    appended(table, data(3, 0, 0, 0, txn=False), data(3, 0, 1, 1, txn=False))
    assert table.open_transactions() == {}
    assert table.check_marker(3, 1, COMMIT) is None  # a marker with nothing open ends nothing
    assert table.apply([marker(3, 1, 2)], 0, COMMIT) == []


def test_a_marker_for_a_producer_never_seen_here_creates_an_entry_without_batches() -> None:
    table = ProducerStateTable()
    assert table.check_marker(9, 4, COMMIT) is None
    assert table.apply([marker(9, 4, 0)], 700, COMMIT) == []
    assert table.entry(9) == ProducerEntry(9, 4, (), 0, NO_OFFSET, 700, COMMIT)
    # Its retry is recognised, and written nowhere.
    assert table.check_marker(9, 4, COMMIT) == MarkerWrittenBefore()


def test_a_retried_marker_is_recognised_and_a_late_one_is_refused() -> None:
    table = ProducerStateTable()
    appended(table, data(5, 0, 0, 0))
    table.apply([marker(5, 1, 1)], 0, COMMIT)
    assert table.check_marker(5, 1, COMMIT) == MarkerWrittenBefore()  # the same marker, again

    appended(table, data(5, 1, 0, 2))  # the next transaction opened at epoch 1
    late = table.check_marker(5, 1, COMMIT)  # the first marker's retry would now end it
    assert isinstance(late, AppendRefused)
    assert late.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "opened a transaction at offset 2" in late.message

    stale = table.check_marker(5, 0, COMMIT)
    assert isinstance(stale, AppendRefused) and stale.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert table.open_transactions() == {5: 2}  # nothing changed

    bad = table.check_marker(5, 40_000, COMMIT)
    assert isinstance(bad, AppendRefused) and bad.code == ErrorCode.INVALID_RECORD


def test_a_marker_of_the_other_type_at_a_written_markers_epoch_is_refused() -> None:
    # An operator's AbortTransaction wrote ABORT at the epoch the coordinator would bump to; the
    # coordinator's COMMIT at that epoch was answered as a retry of a marker written: the
    # transaction counted as committed and this partition's records were aborted, silently.
    table = ProducerStateTable()
    appended(table, data(5, 0, 0, 0))
    table.apply([marker(5, 1, 1, ABORT)], 0, ABORT)
    assert table.check_marker(5, 1, ABORT) == MarkerWrittenBefore()
    conflict = table.check_marker(5, 1, COMMIT)
    assert isinstance(conflict, AppendRefused)
    assert conflict.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "COMMIT marker" in conflict.message and "ended here with ABORT" in conflict.message
    table.apply([marker(6, 2, 2)], 0, COMMIT)
    assert isinstance(table.check_marker(6, 2, ABORT), AppendRefused), "and back"


def test_a_marker_at_an_epoch_with_no_marker_known_is_refused() -> None:
    # The entry's epoch came from data (or from a snapshot before version 5): no marker of that
    # epoch is known here, so none is taken for a retry.
    table = ProducerStateTable()
    appended(table, data(3, 2, 0, 0, txn=False))
    assert table.entry(3).last_marker_type == NO_MARKER_TYPE  # type: ignore[union-attr]
    refused = table.check_marker(3, 2, COMMIT)
    assert isinstance(refused, AppendRefused)
    assert refused.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "no marker known" in refused.message
    # A marker's type lasts while its epoch does; a new epoch forgets it.
    table.apply([marker(3, 3, 1)], 0, COMMIT)
    appended(table, data(3, 3, 0, 2, txn=False))
    assert table.check_marker(3, 3, COMMIT) == MarkerWrittenBefore()
    appended(table, data(3, 4, 0, 3, txn=False))
    assert table.entry(3).last_marker_type == NO_MARKER_TYPE  # type: ignore[union-attr]


def test_a_late_produce_of_an_ended_transaction_is_refused() -> None:
    table = ProducerStateTable()
    appended(table, data(2, 0, 0, 0))
    table.apply([marker(2, 1, 1)], 0, COMMIT)
    late = table.check_leader_append([data(2, 0, 1, 2)])
    assert isinstance(late, AppendRefused) and late.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert table.open_transactions() == {}


def test_a_non_transactional_batch_of_a_producer_with_an_open_transaction_is_refused() -> None:
    # Any client can read a producer's id and epoch (DescribeProducers). A plain batch at the
    # next epoch, written, moved the epoch under the open transaction, and the coordinator's
    # marker at that epoch was then refused as late: the transaction stayed open for good.
    table = ProducerStateTable()
    appended(table, data(4, 0, 0, 0))
    for hostile in (data(4, 1, 0, 1, txn=False), data(4, 0, 1, 1, txn=False)):
        refused = table.check_leader_append([hostile])
        assert isinstance(refused, AppendRefused), hostile
        assert refused.code == ErrorCode.INVALID_TXN_STATE
    assert table.check_marker(4, 1, COMMIT) is None  # the coordinator's marker still ends it
    assert table.apply([marker(4, 1, 1)], 0, COMMIT) == [CompletedTransaction(4, 0, 1)]
    assert table.check_leader_append([data(4, 1, 0, 2, txn=False)]) is None  # nothing open


def test_producers_with_an_open_transaction_do_not_expire() -> None:
    table = ProducerStateTable()
    appended(table, data(1, 0, 0, 0), data(2, 0, 0, 1, txn=False))
    assert table.expire(now_ms=10_000, expiration_ms=1_000) == [2]
    assert table.open_transactions() == {1: 0}
    table.apply([marker(1, 1, 2)], 0, COMMIT)
    assert table.expire(now_ms=10_000, expiration_ms=1_000) == [1]


def test_open_transactions_survive_a_snapshot_and_replay() -> None:
    history = [
        data(1, 0, 0, 0, records=2),
        data(2, 0, 0, 2),
        marker(1, 1, 3),
        data(3, 0, 0, 4, txn=False),
        marker(4, 0, 5),
        data(1, 1, 0, 6),
        data(2, 0, 1, 7),
        marker(2, 1, 8),
    ]
    whole = ProducerStateTable()
    applied(whole, history)
    for cut in range(len(history) + 1):
        before = ProducerStateTable()
        applied(before, history[:cut])
        rebuilt = decode_snapshot(encode_snapshot(before), loaded_ms=0).producers
        assert rebuilt == before, cut
        applied(rebuilt, history[cut:])
        assert rebuilt == whole, cut
    assert whole.open_transactions() == {1: 6}
