"""Goal: each operation of the transaction coordinator's state machine keeps its own rules beyond
the table: InitProducerId's timeout bounds and fencing of an open transaction, epoch exhaustion
moving to a new producer id, AddPartitions' bounds, timeout aborts that fence the producer, idle
ids expiring into tombstones, and resuming phase 2 after a load (a failover between the phases).

Method: hand-built metadata (transaction_state_cases.py) fed to each operation, and short
scenarios applying each Outcome the way the coordinator will (write, then apply), asserting the
exact errors, states, producer ids, epochs and markers.
"""

from __future__ import annotations

import pytest
from transaction_state_cases import NEW_ID, NOW, OTHER_PART, PART, TIMEOUT, TXN, E, metadata

from samsa.services.coordinator import transaction_records as records
from samsa.services.coordinator import transaction_state as s
from samsa.services.coordinator.coordinator_partition import MAX_BATCH_BYTES
from samsa.services.coordinator.transaction_model import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PRODUCER_EPOCH_MAX,
    MarkerWrite,
    Outcome,
    TransactionMetadata,
    TransactionState,
    apply,
)
from samsa.services.coordinator.transaction_refusals import init_refusal


def write_and_apply(transactions: dict[str, TransactionMetadata], outcome: Outcome) -> None:
    if outcome.metadata is not None:
        apply(transactions, outcome.metadata)


# --- init_producer_id ----------------------------------------------------------------------


@pytest.mark.parametrize("timeout_ms", [0, -1, s.TRANSACTION_TIMEOUT_MS_MAX + 1])
def test_init_refuses_a_bad_timeout(timeout_ms: int) -> None:
    for md in (None, metadata(EMPTY)):
        outcome = s.init_producer_id(md, TXN, timeout_ms, NOW, NEW_ID)
        assert outcome.error == E.INVALID_TRANSACTION_TIMEOUT
        assert outcome.metadata is None


def test_init_accepts_the_maximum_timeout_and_records_it() -> None:
    outcome = s.init_producer_id(metadata(EMPTY), TXN, s.TRANSACTION_TIMEOUT_MS_MAX, NOW, None)
    assert outcome.error == E.NONE
    assert outcome.metadata is not None
    assert outcome.metadata.transaction_timeout_ms == s.TRANSACTION_TIMEOUT_MS_MAX


def test_init_checks_the_configured_maximum_timeout() -> None:
    """transaction.max.timeout.ms set on the coordinator replaces the 15-minute default."""
    refused = s.init_producer_id(metadata(EMPTY), TXN, 3001, NOW, None, max_timeout_ms=3000)
    assert refused.error == E.INVALID_TRANSACTION_TIMEOUT
    assert "1..3000" in refused.message
    accepted = s.init_producer_id(metadata(EMPTY), TXN, 3000, NOW, None, max_timeout_ms=3000)
    assert accepted.error == E.NONE


def test_init_refuses_an_empty_transactional_id() -> None:
    assert s.init_producer_id(None, "", TIMEOUT, NOW, NEW_ID).error == E.INVALID_REQUEST


def test_init_of_a_new_id_needs_a_producer_id() -> None:
    assert s.init_needs_new_producer_id(None)
    assert not s.init_needs_new_producer_id(metadata(EMPTY))
    with pytest.raises(AssertionError):
        s.init_producer_id(None, TXN, TIMEOUT, NOW, None)


def test_init_fences_an_open_transaction() -> None:
    """A new instance's InitProducerId aborts the old instance's transaction at a bumped epoch;
    the old instance is refused from then on, the new one retries until the abort completes."""
    transactions: dict[str, TransactionMetadata] = {TXN: metadata(ONGOING)}
    fence = s.init_producer_id(transactions[TXN], TXN, TIMEOUT, NOW, NEW_ID)
    assert fence.error == E.CONCURRENT_TRANSACTIONS
    assert fence.markers == MarkerWrite(TXN, False, 7, 4, (PART,))
    write_and_apply(transactions, fence)
    fenced = transactions[TXN]
    assert (fenced.state, fenced.producer_epoch, fenced.previous_producer_epoch) == (
        PREPARE_ABORT,
        4,
        -1,
    )
    assert s.add_partitions(fenced, 7, 3, [OTHER_PART], NOW).error == E.PRODUCER_FENCED
    assert s.end_transaction(fenced, 7, 3, True, NOW).error == E.PRODUCER_FENCED
    assert s.end_transaction(fenced, 7, 3, False, NOW).error == E.PRODUCER_FENCED
    retry = s.init_producer_id(fenced, TXN, TIMEOUT, NOW + 1, NEW_ID)
    assert (retry.error, retry.metadata) == (E.CONCURRENT_TRANSACTIONS, None)
    write_and_apply(transactions, s.markers_written(fenced, NOW + 2))
    assert transactions[TXN].state == COMPLETE_ABORT
    init = s.init_producer_id(transactions[TXN], TXN, TIMEOUT, NOW + 3, None)
    assert (init.error, init.producer_id, init.producer_epoch) == (E.NONE, 7, 5)
    write_and_apply(transactions, init)
    for epoch in (3, 4):
        assert s.add_partitions(transactions[TXN], 7, epoch, [PART], NOW).error == (
            E.PRODUCER_FENCED
        )
    assert s.add_partitions(transactions[TXN], 7, 5, [PART], NOW).error == E.NONE


# --- epoch exhaustion ------------------------------------------------------------------------


def test_init_at_the_exhausted_epoch_takes_a_new_producer_id() -> None:
    below = metadata(EMPTY, producer_epoch=32765)
    assert not s.init_needs_new_producer_id(below)
    bumped = s.init_producer_id(below, TXN, TIMEOUT, NOW, None)
    assert (bumped.producer_id, bumped.producer_epoch) == (7, 32766)
    exhausted = metadata(COMPLETE_COMMIT, producer_epoch=32766)
    assert s.init_needs_new_producer_id(exhausted)
    with pytest.raises(AssertionError):
        s.init_producer_id(exhausted, TXN, TIMEOUT, NOW, None)
    rotated = s.init_producer_id(exhausted, TXN, TIMEOUT, NOW, NEW_ID)
    assert (rotated.producer_id, rotated.producer_epoch) == (NEW_ID, 0)
    assert rotated.metadata is not None
    assert (rotated.metadata.previous_producer_id, rotated.metadata.previous_producer_epoch) == (
        7,
        32766,
    )
    # The instance that held the old producer id is fenced, not told its id is unknown.
    old = s.add_partitions(rotated.metadata, 7, 32766, [PART], NOW)
    assert old.error == E.PRODUCER_FENCED


def test_end_at_the_exhausted_epoch_moves_to_a_new_producer_id_after_the_markers() -> None:
    transactions = {TXN: metadata(ONGOING, producer_epoch=32766)}
    assert s.end_needs_new_producer_id(transactions[TXN], 7, 32766, True)
    with pytest.raises(AssertionError):
        s.end_transaction(transactions[TXN], 7, 32766, True, NOW)
    end = s.end_transaction(transactions[TXN], 7, 32766, True, NOW, new_producer_id=NEW_ID)
    assert (end.error, end.producer_id, end.producer_epoch) == (E.NONE, NEW_ID, 0)
    assert end.markers == MarkerWrite(TXN, True, 7, PRODUCER_EPOCH_MAX, (PART,))
    write_and_apply(transactions, end)
    prepared = transactions[TXN]
    assert (prepared.producer_id, prepared.next_producer_id) == (7, NEW_ID)
    assert not s.end_needs_new_producer_id(prepared, 7, 32766, True), "a retry takes none"
    retry = s.end_transaction(prepared, 7, 32766, True, NOW)
    assert (retry.error, retry.metadata, retry.producer_id, retry.producer_epoch) == (
        E.NONE,
        None,
        NEW_ID,
        0,
    )
    assert s.add_partitions(prepared, NEW_ID, 0, [PART], NOW).error == E.CONCURRENT_TRANSACTIONS
    assert s.add_partitions(prepared, 7, PRODUCER_EPOCH_MAX, [PART], NOW).error == (
        E.PRODUCER_FENCED
    )
    write_and_apply(transactions, s.markers_written(prepared, NOW))
    complete = transactions[TXN]
    assert (complete.state, complete.producer_id, complete.producer_epoch) == (
        COMPLETE_COMMIT,
        NEW_ID,
        0,
    )
    assert complete.next_producer_id == -1
    assert s.end_transaction(complete, 7, 32766, True, NOW).producer_id == NEW_ID
    assert s.add_partitions(complete, NEW_ID, 0, [PART], NOW).metadata is not None


@pytest.mark.parametrize(
    ("md", "producer_epoch", "txn_commit"),
    [
        (
            metadata(COMPLETE_COMMIT, producer_epoch=32766, previous_producer_epoch=32765),
            32765,
            True,
        ),
        (
            metadata(COMPLETE_COMMIT, producer_epoch=32766, previous_producer_epoch=32765),
            32765,
            False,
        ),
        (metadata(ONGOING, producer_epoch=32766), 32765, True),
        (metadata(PREPARE_ABORT, producer_epoch=32767, previous_producer_epoch=-1), 32766, False),
    ],
    ids=["retry", "retry-otherwise", "fenced", "finishing"],
)
def test_an_end_that_decides_nothing_takes_no_producer_id_at_the_exhausted_epoch(
    md: TransactionMetadata, producer_epoch: int, txn_commit: bool
) -> None:
    """Its answer must not depend on whether a producer id can be taken (the allocation is a
    broker round trip that may fail)."""
    assert not s.end_needs_new_producer_id(md, 7, producer_epoch, txn_commit)
    outcome = s.end_transaction(md, 7, producer_epoch, txn_commit, NOW)  # no id: no assertion
    assert outcome.metadata is None


def test_init_refusals_come_first_and_take_no_producer_id() -> None:
    """A malformed InitProducerId is refused whatever the id's state, so the runtime checks it
    before allocating."""
    assert init_refusal(TXN, 60_000, 60_000) is None
    for name, timeout_ms in ((TXN, 60_001), (TXN, 0), ("", 60_000)):
        refused = init_refusal(name, timeout_ms, 60_000)
        assert refused is not None
        assert s.init_producer_id(None, name, timeout_ms, NOW, None, 60_000) == refused


def test_an_empty_abort_at_the_exhausted_epoch_moves_to_the_new_id_at_once() -> None:
    md = metadata(EMPTY, producer_epoch=32766)
    assert s.end_needs_new_producer_id(md, 7, 32766, False)
    assert not s.end_needs_new_producer_id(md, 7, 32766, True), "refused: nothing to commit"
    outcome = s.end_transaction(md, 7, 32766, False, NOW, new_producer_id=NEW_ID)
    assert outcome.metadata is not None
    assert (outcome.metadata.state, outcome.producer_id, outcome.producer_epoch) == (
        COMPLETE_ABORT,
        NEW_ID,
        0,
    )
    assert outcome.markers is None


def test_a_fence_at_the_last_held_epoch_still_fits() -> None:
    fence = s.init_producer_id(metadata(ONGOING, producer_epoch=32766), TXN, TIMEOUT, NOW, None)
    assert fence.metadata is not None
    assert fence.metadata.producer_epoch == PRODUCER_EPOCH_MAX
    complete = s.markers_written(fence.metadata, NOW).metadata
    assert complete is not None
    assert s.init_needs_new_producer_id(complete)


# --- add_partitions -----------------------------------------------------------------------------


def test_adding_keeps_the_start_time_and_nothing_new_writes_nothing() -> None:
    begin = s.add_partitions(metadata(EMPTY), 7, 3, [PART, PART], NOW)
    assert begin.metadata is not None
    assert (begin.metadata.transaction_start_ms, begin.metadata.partitions) == (NOW, {PART})
    more = s.add_partitions(begin.metadata, 7, 3, [OTHER_PART, PART], NOW + 5)
    assert more.metadata is not None
    assert more.metadata.transaction_start_ms == NOW
    assert more.metadata.partitions == {PART, OTHER_PART}
    again = s.add_partitions(more.metadata, 7, 3, [PART], NOW + 6)
    assert (again.error, again.metadata, again.producer_epoch) == (E.NONE, None, 3)
    nothing = s.add_partitions(metadata(EMPTY), 7, 3, [], NOW)
    assert (nothing.error, nothing.metadata) == (E.NONE, None)


@pytest.mark.parametrize("partition", [("", 0), ("t", -1)])
def test_adding_a_bad_partition_is_refused(partition: tuple[str, int]) -> None:
    outcome = s.add_partitions(metadata(EMPTY), 7, 3, [partition], NOW)
    assert (outcome.error, outcome.metadata) == (E.INVALID_REQUEST, None)


def test_a_transaction_spans_at_most_the_maximum_partitions() -> None:
    full = [("t", n) for n in range(s.TRANSACTION_PARTITIONS_MAX)]
    ongoing = s.add_partitions(metadata(EMPTY), 7, 3, full, NOW).metadata
    assert ongoing is not None
    outcome = s.add_partitions(ongoing, 7, 3, [("u", 0)], NOW)
    assert (outcome.error, outcome.metadata) == (E.INVALID_REQUEST, None)


def test_a_transactions_partitions_fit_its_record_however_many_topics_they_span() -> None:
    # A record the broker refuses as too large would fail the coordinator partition's writer.
    topics = [f"{n:05d}".ljust(249, "x") for n in range(s.TRANSACTION_PARTITIONS_MAX)]
    fitting = [(topic, 0) for topic in topics[:400]]
    ongoing = s.add_partitions(metadata(EMPTY), 7, 3, fitting, NOW).metadata
    assert ongoing is not None
    _, value = records.encode(ongoing)
    assert value is not None and len(value) <= s.partitions_bytes(fitting), "an upper bound"
    many = [(topic, 0) for topic in topics[: len(fitting) + 200]]
    outcome = s.add_partitions(ongoing, 7, 3, many, NOW)
    assert (outcome.error, outcome.metadata) == (E.INVALID_REQUEST, None)
    assert "commit more often" in outcome.message
    biggest = s.TRANSACTION_PARTITIONS_BYTES_MAX + 400  # the record's other fields
    assert biggest * 2 <= MAX_BATCH_BYTES, "a whole record fits a coordinator batch, with room"


# --- timeouts, expiry, load ------------------------------------------------------------------


def test_timed_out_transactions_are_aborted_and_their_producer_fenced() -> None:
    ongoing = metadata(ONGOING, transaction_start_ms=NOW)
    others = {
        TXN: ongoing,
        "empty": metadata(EMPTY, transactional_id="empty", last_update_ms=0),
        "prepared": metadata(PREPARE_COMMIT, transactional_id="prepared", transaction_start_ms=0),
    }
    assert s.timed_out(others, NOW + TIMEOUT) == []
    assert s.timed_out(others, NOW + TIMEOUT + 1) == [TXN]
    assert s.abort_timed_out(ongoing, NOW + TIMEOUT) == Outcome()
    abort = s.abort_timed_out(ongoing, NOW + TIMEOUT + 1)
    assert abort.error == E.NONE
    assert abort.markers == MarkerWrite(TXN, False, 7, 4, (PART,))
    assert abort.metadata is not None
    assert (abort.metadata.state, abort.metadata.previous_producer_epoch) == (PREPARE_ABORT, -1)
    for txn_commit in (True, False):
        late = s.end_transaction(abort.metadata, 7, 3, txn_commit, NOW + TIMEOUT + 2)
        assert late.error == E.PRODUCER_FENCED
    assert s.add_partitions(abort.metadata, 7, 3, [PART], NOW).error == E.PRODUCER_FENCED
    # Already ended meanwhile: nothing to do.
    assert s.abort_timed_out(metadata(COMPLETE_COMMIT), NOW + 10 * TIMEOUT) == Outcome()


def test_idle_ids_expire_into_tombstones() -> None:
    expiration_ms = s.TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT
    transactions = {
        state.name: metadata(state, transactional_id=state.name, last_update_ms=0)
        for state in TransactionState
        if state != DEAD
    }
    assert s.expired(transactions, expiration_ms - 1, expiration_ms) == []
    dead = s.expired(transactions, expiration_ms, expiration_ms)
    assert [md.transactional_id for md in dead] == ["COMPLETE_ABORT", "COMPLETE_COMMIT", "EMPTY"]
    assert all(md.state == DEAD for md in dead)
    for md in dead:
        assert records.encode(md)[1] is None
        apply(transactions, md)
    assert "EMPTY" not in transactions
    assert transactions["ONGOING"].state == ONGOING
    fresh = s.init_producer_id(transactions.get("EMPTY"), "EMPTY", TIMEOUT, NOW, NEW_ID)
    assert (fresh.producer_id, fresh.producer_epoch) == (NEW_ID, 0)


def test_resume_after_load_finishes_what_was_decided() -> None:
    transactions = {
        state.name: metadata(state, transactional_id=state.name)
        for state in TransactionState
        if state != DEAD
    }
    outcomes = s.resume_after_load(transactions)
    assert [o.markers for o in outcomes] == [
        MarkerWrite("PREPARE_ABORT", False, 7, 4, (PART,)),
        MarkerWrite("PREPARE_COMMIT", True, 7, 4, (PART,)),
        MarkerWrite("PREPARE_EPOCH_FENCE", False, 7, 4, (PART,)),
    ]
    assert [o.metadata for o in outcomes[:2]] == [None, None]
    fence_abort = outcomes[2].metadata
    assert fence_abort is not None
    assert (fence_abort.state, fence_abort.producer_epoch) == (PREPARE_ABORT, 4)


def test_a_failover_between_the_phases_resumes_the_same_markers() -> None:
    """The coordinator decides, writes PREPARE_COMMIT and dies before the markers: the next owner
    replays the log and is told to write exactly the markers the first one would have."""
    log: list[tuple[bytes, bytes | None]] = []
    transactions: dict[str, TransactionMetadata] = {}
    for outcome_of in (
        lambda: s.init_producer_id(None, TXN, TIMEOUT, NOW, NEW_ID),
        lambda: s.add_partitions(transactions[TXN], NEW_ID, 0, [PART, OTHER_PART], NOW),
        lambda: s.end_transaction(transactions[TXN], NEW_ID, 0, True, NOW),
    ):
        outcome = outcome_of()
        assert outcome.metadata is not None
        log.append(records.encode(outcome.metadata))
        apply(transactions, outcome.metadata)
    decided_markers = outcome.markers
    loaded = records.replay(log)
    assert loaded == transactions
    assert [o.markers for o in s.resume_after_load(loaded)] == [decided_markers]
