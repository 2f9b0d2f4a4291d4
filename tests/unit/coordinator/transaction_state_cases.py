"""The cases the transaction state machine's tests share (test_transaction_state.py,
test_transaction_state_operations.py, test_transaction_state_replay.py): one transactional id,
TXN, its partitions PART and OTHER_PART, a clock at NOW, and `metadata(state)`, a valid
hand-built metadata in each state for producer id 7, holding epoch 3 before a transaction's end
and 4 after one, that a test changes field by field.
"""

from __future__ import annotations

import dataclasses

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.transaction_model import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    TransactionMetadata,
    TransactionState,
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
