"""Goal: the transaction coordinator's state machine does exactly what transaction_state's table
says: every (state, operation) pair with its error code, new state and epoch answered; decisions
bump the epoch and name the markers; writing markers outside a prepare is a programmer error; a
wrong producer id or epoch is refused in every state.

Method: one hand-built metadata per state (transaction_state_cases.py: producer id 7, the
producer holding epoch 3 or, after a transaction's end, 4) fed to each operation, asserting the
exact error, new state, epochs and markers. Each operation's own rules (InitProducerId, epoch
exhaustion, AddPartitions, timeouts, expiry, load) are test_transaction_state_operations.py's;
replaying the emitted records is test_transaction_state_replay.py's.
"""

from __future__ import annotations

import pytest
from transaction_state_cases import NEW_ID, NOW, OTHER_PART, PART, TIMEOUT, TXN, E, metadata

from samsa.common.errors import ErrorCode
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
    MarkerWrite,
    Outcome,
    TransactionMetadata,
    TransactionState,
)


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
