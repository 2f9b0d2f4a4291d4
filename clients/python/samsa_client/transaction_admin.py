"""Transaction administration, the pure half (KIP-664): answers into dataclasses.

Admin (admin.py) does the I/O: ListTransactions on every live coordinator, DescribeTransactions
at each transactional id's coordinator (found with FindCoordinator), retrying the coordinator
errors until request.timeout.ms. How an operator finds a hanging transaction: list the ones open
longer than their timeout should allow, describe them, and read the partitions' producers
(`describe_producers`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from samsa.client.errors import KafkaError
from samsa.v1 import transaction_records_pb2 as t
from samsa.v1 import transactions_pb2 as x

# Kafka's names for the states (TransactionState.toString).
STATE_NAMES = {
    t.TRANSACTION_STATE_EMPTY: "Empty",
    t.TRANSACTION_STATE_ONGOING: "Ongoing",
    t.TRANSACTION_STATE_PREPARE_COMMIT: "PrepareCommit",
    t.TRANSACTION_STATE_PREPARE_ABORT: "PrepareAbort",
    t.TRANSACTION_STATE_COMPLETE_COMMIT: "CompleteCommit",
    t.TRANSACTION_STATE_COMPLETE_ABORT: "CompleteAbort",
    t.TRANSACTION_STATE_PREPARE_EPOCH_FENCE: "PrepareEpochFence",
    t.TRANSACTION_STATE_DEAD: "Dead",
}
STATES_BY_NAME = {name.lower(): state for state, name in STATE_NAMES.items()}


class TransactionError(KafkaError):
    """An admin operation on a transactional id failed (unknown id, no coordinator, …)."""


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_ms: int  # -1 when no transaction is open
    partitions: tuple[tuple[str, int], ...]


def state_name(state: int) -> str:
    return STATE_NAMES.get(state, f"Unknown({state})")  # type: ignore[call-overload]


def state_of(name: str) -> int:
    """The proto state for a name as `samsa transactions list --state` takes it."""
    state = STATES_BY_NAME.get(name.lower())
    if state is None:
        raise ValueError(f"unknown state {name!r}; known: {', '.join(STATE_NAMES.values())}")
    return state


def listings_of(answers: Iterable[x.ListTransactionsResponse]) -> list[TransactionListing]:
    """Every listed id once (an id whose partition is moving may be listed twice), sorted."""
    seen: dict[str, TransactionListing] = {}
    for answer in answers:
        for listed in answer.transactions:
            seen.setdefault(
                listed.transactional_id,
                TransactionListing(
                    listed.transactional_id, listed.producer_id, state_name(listed.state)
                ),
            )
    return [seen[name] for name in sorted(seen)]


def description_of(described: x.DescribedTransaction) -> TransactionDescription:
    if described.error_code:
        raise TransactionError.of(described.error_code, described.error_message)
    return TransactionDescription(
        transactional_id=described.transactional_id,
        state=state_name(described.state),
        producer_id=described.producer_id,
        producer_epoch=described.producer_epoch,
        transaction_timeout_ms=described.transaction_timeout_ms,
        transaction_start_ms=described.transaction_start_ms,
        partitions=tuple(
            (entry.topic, number) for entry in described.partitions for number in entry.partitions
        ),
    )
