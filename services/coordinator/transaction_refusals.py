"""The transaction state machine's refusals (the answers that write nothing) and fencing rules.

Theory of operation. Every operation of transaction_state.py first decides whether the request
may touch the transactional id's metadata at all; when it may not, it answers one of the errors
below and changes nothing (an `Outcome` with an error and no metadata or markers). Which state
refuses what is the state machine's table and stays there; this module only knows who the
request's producer is against the current metadata, which InitProducerId is malformed whatever
the state (`init_refusal`, checked before a producer id is taken for it), and how each refusal
is worded — so that a client (or an operator reading its log) learns what to do next.

Fencing rules. Before any state rule, AddPartitionsToTxn (a broker's verify_only check too:
`verify_refusal`) and EndTxn check the producer's identity against
`TransactionMetadata.answer_identity()` (`identity_refusal`):
- another producer id is INVALID_PRODUCER_ID_MAPPING (call InitProducerId again), except the id
  the transactional id held before a rotation to a new producer id, which is PRODUCER_FENCED;
- the right id at another epoch is PRODUCER_FENCED: a newer instance (or a timeout abort) bumped
  the epoch, and this producer must close.
An EndTxn retried with the identity from before its own bump (its answer was lost) is recognised
before this check (`is_end_retry`): PREPARE_x and COMPLETE_x remember that previous identity. Fences
store no previous epoch, so a fenced producer never passes for a retry.

Pure: no I/O, no clock; every refusal is a new `Outcome`.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.transaction_model import (
    COMPLETED,
    DEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    ONGOING,
    PREPARE_EPOCH_FENCE,
    PREPARED,
    Outcome,
    TransactionMetadata,
    refusal,
)


def concurrent_transactions(current: TransactionMetadata) -> Outcome:
    """CONCURRENT_TRANSACTIONS (retriable): the id is finishing a transaction."""
    return refusal(
        ErrorCode.CONCURRENT_TRANSACTIONS,
        f"transactional id {current.transactional_id!r} is finishing a transaction "
        f"({current.state.name}): retry after a backoff",
    )


def init_refusal(transactional_id: str, timeout_ms: int, max_timeout_ms: int) -> Outcome | None:
    """The refusal of a malformed InitProducerId, whatever the id's state, or None."""
    if not transactional_id:
        return refusal(ErrorCode.INVALID_REQUEST, "a transactional id must not be empty")
    if not 0 < timeout_ms <= max_timeout_ms:
        return refusal(
            ErrorCode.INVALID_TRANSACTION_TIMEOUT,
            f"transaction.timeout.ms {timeout_ms} is outside 1..{max_timeout_ms} "
            "(the coordinator's transaction.max.timeout.ms): lower it",
        )
    return None


def identity_refusal(
    current: TransactionMetadata, producer_id: int, producer_epoch: int
) -> Outcome | None:
    """The refusal for a request whose producer identity is not the current one, if it is not."""
    expected_id, expected_epoch = current.answer_identity()
    name = current.transactional_id
    if producer_id != expected_id:
        if producer_id != NO_PRODUCER_ID and producer_id in (
            current.producer_id,
            current.previous_producer_id,
        ):
            return refusal(
                ErrorCode.PRODUCER_FENCED,
                f"producer id {producer_id} of transactional id {name!r} was replaced by "
                f"{expected_id}: this producer is fenced, close it",
            )
        return refusal(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            f"producer id {producer_id} is not the one of transactional id {name!r}: "
            "call InitProducerId again",
        )
    if producer_epoch != expected_epoch:
        return refusal(
            ErrorCode.PRODUCER_FENCED,
            f"producer epoch {producer_epoch} of transactional id {name!r} is not the current "
            f"{expected_epoch}: another instance took over, close this producer",
        )
    return None


def verify_refusal(
    current: TransactionMetadata | None, producer_id: int, producer_epoch: int
) -> Outcome | None:
    """KIP-890 verification's refusal of the whole request, or None, in Kafka's order (its
    handleVerifyPartitionsInTransaction): the id, then the producer's identity (PRODUCER_FENCED:
    the broker fails the produce and the producer closes), then a decided transaction whose
    markers are being written (CONCURRENT_TRANSACTIONS: asked again), then no transaction open
    (INVALID_TXN_STATE, as for a partition not in the open one)."""
    if current is None or current.state == DEAD:
        return invalid_producer_id_mapping(current)
    refused = identity_refusal(current, producer_id, producer_epoch)
    if refused is not None:
        return refused
    if current.state in PREPARED or current.state == PREPARE_EPOCH_FENCE:
        return concurrent_transactions(current)
    if current.state != ONGOING:
        return refusal(
            ErrorCode.INVALID_TXN_STATE,
            f"producer {producer_id} (epoch {producer_epoch}) has no open transaction under "
            f"{current.transactional_id!r}",
        )
    return None


def is_end_retry(current: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """True for an EndTxn carrying the identity from before the bump of the decision on record."""
    return (
        current.state in PREPARED | COMPLETED
        and current.previous_producer_epoch != NO_PRODUCER_EPOCH
        and (producer_id, producer_epoch)
        == (current.previous_producer_id, current.previous_producer_epoch)
    )


def invalid_producer_id_mapping(current: TransactionMetadata | None) -> Outcome:
    """INVALID_PRODUCER_ID_MAPPING for an id that has no metadata, or only a tombstone (DEAD)."""
    name = "the transactional id" if current is None else repr(current.transactional_id)
    return refusal(
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        f"{name} is unknown or expired: call InitProducerId",
    )


def invalid_txn_state(current: TransactionMetadata, txn_commit: bool) -> Outcome:
    """INVALID_TXN_STATE: the EndTxn's decision contradicts the one taken, or none is open."""
    decision = "commit" if txn_commit else "abort"
    return refusal(
        ErrorCode.INVALID_TXN_STATE,
        f"cannot {decision} transactional id {current.transactional_id!r} in state "
        f"{current.state.name}: the transaction already ended otherwise, or none is open",
    )
