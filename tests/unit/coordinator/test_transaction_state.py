"""Goal: the transaction coordinator's state machine does exactly what transaction_state's table
says — every (state, operation) pair, each refusal with its error code, epoch fencing, epoch
exhaustion moving to a new producer id, timeout aborts, idempotent EndTxn retries, expiry and
resuming phase 2 after a load — and the records it emits replay to the state it held.

Method: one hand-built metadata per state (producer id 7, the producer holding epoch 3 or, after a
transaction's end, 4) fed to each operation, asserting the exact error, new state, epochs and
markers; short scenarios applying each Outcome the way the coordinator will (write, then apply);
and a hypothesis test driving random operations on a few transactional ids, writing every record
to an in-memory log of bytes, and checking after every step that replaying the log gives the
coordinator's map (what a failover relies on).
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.common.errors import ErrorCode
from samsa.services.coordinator import transaction_records as records
from samsa.services.coordinator import transaction_state as s
from samsa.services.coordinator.transaction_model import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARED,
    PRODUCER_EPOCH_MAX,
    MarkerWrite,
    Outcome,
    TransactionMetadata,
    TransactionState,
    apply,
)

E = ErrorCode
NOW = 1_000_000
TIMEOUT = 60_000
NEW_ID = 99
TXN = "tx"
PART = ("t", 0)
OTHER_PART = ("u", 1)


def metadata(state: TransactionState, **changes: object) -> TransactionMetadata:
    """A valid metadata in `state` for producer id 7: epoch 3 before an end, 4 after one (whose
    EndTxn carried 7/3, the retry identity)."""
    ended = state in (PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT)
    fenced = state == PREPARE_EPOCH_FENCE
    with_partitions = state in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE)
    base = TransactionMetadata(
        transactional_id=TXN,
        producer_id=7,
        producer_epoch=4 if ended or fenced else 3,
        transaction_timeout_ms=TIMEOUT,
        state=state,
        last_update_ms=NOW - 10,
        partitions=frozenset({PART}) if with_partitions else frozenset(),
        transaction_start_ms=NOW - 100 if with_partitions else -1,
        previous_producer_id=7,
        previous_producer_epoch=-1 if fenced else 3 if ended else 2,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def current_identity(md: TransactionMetadata | None) -> tuple[int, int]:
    return (7, 3) if md is None else md.answer_identity()


def run(op: str, md: TransactionMetadata | None) -> Outcome:
    producer_id, producer_epoch = current_identity(md)
    if op == "init":
        return s.init_producer_id(md, TXN, TIMEOUT, NOW, NEW_ID)
    if op == "add":
        return s.add_partitions(md, producer_id, producer_epoch, [OTHER_PART], NOW)
    if op in ("commit", "abort"):
        return s.end_transaction(md, producer_id, producer_epoch, op == "commit", NOW)
    assert op in ("commit_retry", "abort_retry")
    return s.end_transaction(md, 7, 3, op == "commit_retry", NOW)


def write_and_apply(transactions: dict[str, TransactionMetadata], outcome: Outcome) -> None:
    if outcome.metadata is not None:
        apply(transactions, outcome.metadata)


# --- the table: (state, operation) -> (error, new state or None for "no record", epoch answered)

TABLE = [
    (None, "init", E.NONE, EMPTY, 0),
    (None, "add", E.INVALID_PRODUCER_ID_MAPPING, None, -1),
    (None, "commit", E.INVALID_PRODUCER_ID_MAPPING, None, -1),
    (None, "abort", E.INVALID_PRODUCER_ID_MAPPING, None, -1),
    (EMPTY, "init", E.NONE, EMPTY, 4),
    (EMPTY, "add", E.NONE, ONGOING, 3),
    (EMPTY, "commit", E.INVALID_TXN_STATE, None, -1),
    (EMPTY, "abort", E.NONE, COMPLETE_ABORT, 4),
    (ONGOING, "init", E.CONCURRENT_TRANSACTIONS, PREPARE_ABORT, -1),
    (ONGOING, "add", E.NONE, ONGOING, 3),
    (ONGOING, "commit", E.NONE, PREPARE_COMMIT, 4),
    (ONGOING, "abort", E.NONE, PREPARE_ABORT, 4),
    (PREPARE_COMMIT, "init", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_COMMIT, "add", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_COMMIT, "commit", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_COMMIT, "abort", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_COMMIT, "commit_retry", E.NONE, None, 4),
    (PREPARE_COMMIT, "abort_retry", E.INVALID_TXN_STATE, None, -1),
    (PREPARE_ABORT, "init", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_ABORT, "add", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_ABORT, "commit", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_ABORT, "abort", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_ABORT, "abort_retry", E.NONE, None, 4),
    (PREPARE_ABORT, "commit_retry", E.INVALID_TXN_STATE, None, -1),
    (COMPLETE_COMMIT, "init", E.NONE, EMPTY, 5),
    (COMPLETE_COMMIT, "add", E.NONE, ONGOING, 4),
    (COMPLETE_COMMIT, "commit", E.INVALID_TXN_STATE, None, -1),
    (COMPLETE_COMMIT, "abort", E.NONE, COMPLETE_ABORT, 5),
    (COMPLETE_COMMIT, "commit_retry", E.NONE, None, 4),
    (COMPLETE_COMMIT, "abort_retry", E.INVALID_TXN_STATE, None, -1),
    (COMPLETE_ABORT, "init", E.NONE, EMPTY, 5),
    (COMPLETE_ABORT, "add", E.NONE, ONGOING, 4),
    (COMPLETE_ABORT, "commit", E.INVALID_TXN_STATE, None, -1),
    (COMPLETE_ABORT, "abort", E.NONE, COMPLETE_ABORT, 5),
    (COMPLETE_ABORT, "abort_retry", E.NONE, None, 4),
    (COMPLETE_ABORT, "commit_retry", E.INVALID_TXN_STATE, None, -1),
    (PREPARE_EPOCH_FENCE, "init", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_EPOCH_FENCE, "add", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_EPOCH_FENCE, "commit", E.CONCURRENT_TRANSACTIONS, None, -1),
    (PREPARE_EPOCH_FENCE, "abort", E.CONCURRENT_TRANSACTIONS, None, -1),
    (DEAD, "init", E.CONCURRENT_TRANSACTIONS, None, -1),
    (DEAD, "add", E.INVALID_PRODUCER_ID_MAPPING, None, -1),
    (DEAD, "commit", E.INVALID_PRODUCER_ID_MAPPING, None, -1),
    (DEAD, "abort", E.INVALID_PRODUCER_ID_MAPPING, None, -1),
]


@pytest.mark.parametrize(
    ("state", "op", "error", "new_state", "answer_epoch"),
    TABLE,
    ids=[f"{'none' if row[0] is None else row[0].name}-{row[1]}" for row in TABLE],
)
def test_transition_table(
    state: TransactionState | None,
    op: str,
    error: ErrorCode,
    new_state: TransactionState | None,
    answer_epoch: int,
) -> None:
    md = None if state is None else metadata(state)
    outcome = run(op, md)
    assert outcome.error == error, outcome.message
    if error != E.NONE:
        assert outcome.message
    if new_state is None:
        assert outcome.metadata is None
        assert outcome.markers is None
    else:
        assert outcome.metadata is not None
        assert outcome.metadata.state == new_state
        assert outcome.metadata.last_update_ms == NOW
        if md is not None:
            assert new_state in s.TRANSITIONS[md.state]
    if answer_epoch >= 0:
        assert outcome.producer_epoch == answer_epoch
        assert outcome.producer_id == (NEW_ID if state is None else 7)


def test_the_table_covers_every_state_and_operation() -> None:
    rows = {(row[0], row[1]) for row in TABLE}
    for state in [None, *TransactionState]:
        for op in ("init", "add", "commit", "abort"):
            assert (state, op) in rows
    assert set(s.TRANSITIONS) == set(TransactionState)


@pytest.mark.parametrize("state", [ONGOING, PREPARE_COMMIT, PREPARE_ABORT])
def test_decisions_bump_the_epoch_and_name_the_markers(state: TransactionState) -> None:
    if state == ONGOING:
        commit = s.end_transaction(metadata(ONGOING), 7, 3, True, NOW)
        assert commit.markers == MarkerWrite(TXN, True, 7, 4, (PART,))
        abort = s.end_transaction(metadata(ONGOING), 7, 3, False, NOW)
        assert abort.markers == MarkerWrite(TXN, False, 7, 4, (PART,))
        assert abort.metadata is not None
        assert (abort.metadata.previous_producer_id, abort.metadata.previous_producer_epoch) == (
            7,
            3,
        )
    else:
        complete = s.markers_written(metadata(state), NOW)
        assert complete.metadata is not None
        expected = COMPLETE_COMMIT if state == PREPARE_COMMIT else COMPLETE_ABORT
        assert complete.metadata.state == expected
        assert complete.metadata.partitions == frozenset()
        assert complete.metadata.transaction_start_ms == -1
        assert complete.metadata.producer_epoch == 4
        assert complete.markers is None


@pytest.mark.parametrize("state", [EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD])
def test_markers_written_outside_a_prepare_is_a_programmer_error(state: TransactionState) -> None:
    with pytest.raises(AssertionError):
        s.markers_written(metadata(state), NOW)


IDENTITY_STATES = [
    EMPTY,
    ONGOING,
    PREPARE_COMMIT,
    PREPARE_ABORT,
    COMPLETE_COMMIT,
    COMPLETE_ABORT,
    PREPARE_EPOCH_FENCE,
]


@pytest.mark.parametrize("state", IDENTITY_STATES, ids=lambda st: st.name)
@pytest.mark.parametrize("op", ["add", "commit", "abort"])
@pytest.mark.parametrize(
    ("producer_id", "producer_epoch", "error"),
    [
        (42, 3, E.INVALID_PRODUCER_ID_MAPPING),
        (-1, 3, E.INVALID_PRODUCER_ID_MAPPING),
        (7, 0, E.PRODUCER_FENCED),
        (7, 9, E.PRODUCER_FENCED),
    ],
    ids=["unknown-id", "no-id", "older-epoch", "newer-epoch"],
)
def test_wrong_identity_is_refused_in_every_state(
    state: TransactionState, op: str, producer_id: int, producer_epoch: int, error: ErrorCode
) -> None:
    md = metadata(state)
    if op == "add":
        outcome = s.add_partitions(md, producer_id, producer_epoch, [OTHER_PART], NOW)
    else:
        outcome = s.end_transaction(md, producer_id, producer_epoch, op == "commit", NOW)
    assert outcome.error == error, outcome.message
    assert outcome.metadata is None


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
    assert s.end_needs_new_producer_id(transactions[TXN])
    with pytest.raises(AssertionError):
        s.end_transaction(transactions[TXN], 7, 32766, True, NOW)
    end = s.end_transaction(transactions[TXN], 7, 32766, True, NOW, new_producer_id=NEW_ID)
    assert (end.error, end.producer_id, end.producer_epoch) == (E.NONE, NEW_ID, 0)
    assert end.markers == MarkerWrite(TXN, True, 7, PRODUCER_EPOCH_MAX, (PART,))
    write_and_apply(transactions, end)
    prepared = transactions[TXN]
    assert (prepared.producer_id, prepared.next_producer_id) == (7, NEW_ID)
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


def test_an_empty_abort_at_the_exhausted_epoch_moves_to_the_new_id_at_once() -> None:
    md = metadata(EMPTY, producer_epoch=32766)
    assert s.end_needs_new_producer_id(md)
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


# --- property: the emitted records replay to the coordinator's map -------------------------

IDS = ["a", "b"]
EXPIRATION_MS = 10 * TIMEOUT
# Weighted (repeats) so that whole transactions, commits and epoch exhaustion happen often.
OPERATION_KINDS = [
    *["init"] * 2,
    *["add"] * 3,
    *["commit"] * 3,
    *["abort"] * 2,
    *["markers"] * 4,
    "stale_end",
    "retry",
    "tick",
    "expire",
]
OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(OPERATION_KINDS),
        st.sampled_from(IDS),
        st.integers(min_value=0, max_value=3),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(OPERATIONS, st.booleans())
def test_replaying_the_emitted_records_gives_the_same_metadata(
    operations: list[tuple[str, str, int]], near_exhaustion: bool
) -> None:
    """Random operations (valid and not) on two ids; after every step the replay of the log
    equals the coordinator's map."""
    _drive(operations, near_exhaustion, check_every=1)


@pytest.mark.parametrize("seed", range(8))
def test_a_long_seeded_walk_replays_to_the_same_metadata(seed: int) -> None:
    """The same driver over 500 seeded steps (hypothesis favours short runs): whole transactions,
    fences, timeouts, expiry and epoch exhaustion all happen, and the replay still matches."""
    rng = random.Random(seed)
    operations = [
        (rng.choice(OPERATION_KINDS), rng.choice(IDS), rng.randrange(4)) for _ in range(500)
    ]
    emitted = _drive(operations, near_exhaustion=seed % 2 == 1, check_every=25)
    reached = {md.state for md in emitted}
    assert {ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT} <= reached, (
        f"seed {seed} reached only {sorted(st.name for st in reached)}"
    )
    if seed % 2 == 1:
        rotations = [
            md
            for md in emitted
            if md.next_producer_id != -1 or md.previous_producer_id not in (-1, md.producer_id)
        ]
        assert rotations, f"seed {seed}: the epoch was never exhausted"


def _drive(
    operations: list[tuple[str, str, int]], near_exhaustion: bool, check_every: int
) -> list[TransactionMetadata]:
    """Run operations the way the coordinator will: every emitted metadata is encoded into an
    in-memory log, then applied; the producer of each id uses what it was last answered. Checks
    that the replay of the log equals the map (every `check_every` steps and at the end), that
    only expected errors come out, and that a producer id's handed-out epoch never goes down.
    Returns every emitted metadata."""
    log: list[tuple[bytes, bytes | None]] = []
    emitted: list[TransactionMetadata] = []
    transactions: dict[str, TransactionMetadata] = {}
    held: dict[str, tuple[int, int]] = {}  # what each id's producer was last answered
    now_ms = NOW
    next_producer_id = 1000
    if near_exhaustion:  # start every id one init away from the exhausted epoch
        for name in IDS:
            md = TransactionMetadata(name, 500 + len(transactions), 32765, TIMEOUT, EMPTY, now_ms)
            log.append(records.encode(md))
            apply(transactions, md)
            held[name] = (md.producer_id, md.producer_epoch)
    for step, (op, name, number) in enumerate(operations, start=1):
        now_ms += 1
        next_producer_id += 1
        outcomes = _step(op, name, number, transactions, held, now_ms, next_producer_id)
        if op == "tick":
            now_ms += TIMEOUT * number
        elif op == "expire":
            now_ms += EXPIRATION_MS * number // 2
        for outcome in outcomes:
            assert outcome.error in ANSWERABLE, outcome
            if outcome.metadata is not None:
                log.append(records.encode(outcome.metadata))
                emitted.append(outcome.metadata)
                apply(transactions, outcome.metadata)
            if outcome.error == E.NONE and op in ("init", "commit", "abort", "retry"):
                _check_handed_out(held.get(name), outcome)
                held[name] = (outcome.producer_id, outcome.producer_epoch)
        if step % check_every == 0:
            assert records.replay(log) == transactions, f"after step {step}"
    assert records.replay(log) == transactions
    return emitted


def _step(
    op: str,
    name: str,
    number: int,
    transactions: dict[str, TransactionMetadata],
    held: dict[str, tuple[int, int]],
    now_ms: int,
    new_id: int,
) -> list[Outcome]:
    current = transactions.get(name)
    producer_id, producer_epoch = held.get(name, (0, 0))
    if op == "init":
        return [s.init_producer_id(current, name, TIMEOUT, now_ms, new_id)]
    if op == "add":
        partitions = [("t", number), ("u", number % 2)]
        return [s.add_partitions(current, producer_id, producer_epoch, partitions, now_ms)]
    if op in ("commit", "abort"):
        txn_commit = op == "commit"
        return [s.end_transaction(current, producer_id, producer_epoch, txn_commit, now_ms, new_id)]
    if op == "stale_end" and producer_epoch > 0:
        stale_epoch = producer_epoch - 1
        return [s.end_transaction(current, producer_id, stale_epoch, number % 2 == 0, now_ms)]
    if op == "retry" and current is not None:
        previous = (current.previous_producer_id, current.previous_producer_epoch)
        return [s.end_transaction(current, *previous, number % 2 == 0, now_ms)]
    if op == "markers" and current is not None and current.state in PREPARED:
        return [s.markers_written(current, now_ms)]
    if op == "tick":
        later_ms = now_ms + TIMEOUT * number
        return [
            s.abort_timed_out(transactions[timed_out_id], later_ms)
            for timed_out_id in s.timed_out(transactions, later_ms)
        ]
    if op == "expire":
        later_ms = now_ms + EXPIRATION_MS * number // 2
        return [Outcome(metadata=md) for md in s.expired(transactions, later_ms, EXPIRATION_MS)]
    return []


ANSWERABLE = {
    E.NONE,
    E.CONCURRENT_TRANSACTIONS,
    E.INVALID_PRODUCER_ID_MAPPING,
    E.PRODUCER_FENCED,
    E.INVALID_TXN_STATE,
}


def _check_handed_out(before: tuple[int, int] | None, outcome: Outcome) -> None:
    assert 0 <= outcome.producer_epoch < PRODUCER_EPOCH_MAX
    if before is not None and before[0] == outcome.producer_id:
        assert outcome.producer_epoch >= before[1]
