"""Transaction administration, the pure half (KIP-664): answers into dataclasses.

TransactionAdminCalls (transaction_admin_calls.py, behind Admin) does the I/O: ListTransactions
on every live coordinator, DescribeTransactions at each transactional id's coordinator (found with
FindCoordinator), retrying the coordinator errors until request.timeout.ms; DescribeProducers at
each partition's leader, AbortTransaction at any live coordinator, retrying those errors and the
leader's (`abort_retriable`). How an operator finds a hanging transaction: list the ones open
longer than their timeout should allow, describe them, and read the partitions' producers
(`describe_producers`): a producer with an open transaction (current_txn_start_offset >= 0) that
no listed transaction explains, silent for longer than transaction.max.timeout.ms, hangs;
`abort_transaction` ends it. `find_hanging_transactions` does those steps (Kafka's
`kafka-transactions.sh find-hanging`), deciding with `silent_open_transactions` and
`is_hanging` below.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from samsa.client.errors import KafkaError
from samsa.client.group_admin import COORDINATOR_ERRORS
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2
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

# The coordinators' transaction.max.timeout.ms unless configured otherwise (Kafka's too).
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000

# The states in which a coordinator will still end a transaction's partitions: open, writing
# its markers (phase 2), or fencing its producer (PrepareEpochFence goes on to PrepareAbort and
# its markers). In any other state it has nothing more to write anywhere.
STATES_STILL_ENDING = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})

# Answers of DescribeProducers and AbortTransaction that a retry may cure once the partition's
# leader is found again (the metadata refreshed, or the coordinator's image moved on).
LEADER_ERRORS = frozenset(
    {
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.FENCED_LEADER_EPOCH,
    }
)


class TransactionError(KafkaError):
    """An admin operation on a transactional id failed (unknown id, no coordinator, …)."""


@dataclass(frozen=True)
class PreparedTransaction:
    """A transaction one producer wrote and left open (`Producer.prepare_transaction`), and
    what another process needs to complete it (`Admin.complete_transaction`)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


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


@dataclass(frozen=True)
class ProducerState:
    """One producer a partition's leader remembers (Kafka's ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1 when it wrote only markers since its epoch began
    last_timestamp_ms: int  # its largest batch timestamp on the partition (its own clock)
    current_txn_start_offset: int  # the first offset of its open transaction there, or -1
    # How long ago the leader appended its last batch there, by the leader's clock: how long it
    # has been silent (0 from a broker that predates it: never silent).
    last_append_age_ms: int = 0


@dataclass(frozen=True)
class OpenTransaction:
    """A producer's transaction left open on one partition, as the partition's leader shows it;
    what `samsa transactions abort` needs to end it."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int  # the transaction's first offset on the partition
    silent_ms: int  # how long ago the producer last wrote there, by the leader's clock


def silent_open_transactions(
    producers: Mapping[tuple[str, int], Sequence[ProducerState]],
    max_transaction_timeout_ms: int,
) -> list[OpenTransaction]:
    """The open transactions whose producer has written nothing to the partition for at least
    `max_transaction_timeout_ms`, by partition and producer id: the candidates for hanging. A
    coordinator ends any transaction it knows within its transaction.timeout.ms, which may not
    exceed the coordinator's transaction.max.timeout.ms, so a younger one is not looked at.
    Silence is the leader's age of the last append, not the record timestamps, which are the
    producer's clock (an old CreateTime would make a live transaction look silent), as the
    coordinator's AbortTransaction guard reads it."""
    return [
        OpenTransaction(
            topic,
            partition,
            state.producer_id,
            state.producer_epoch,
            state.current_txn_start_offset,
            state.last_append_age_ms,
        )
        for (topic, partition), states in sorted(producers.items())
        for state in states
        if state.current_txn_start_offset >= 0
        and state.last_append_age_ms >= max_transaction_timeout_ms
    ]


def is_hanging(candidate: OpenTransaction, description: TransactionDescription | None) -> bool:
    """Whether no coordinator will ever end `candidate`: no transactional id of its producer
    is known (`description` None), or the id's coordinator holds another producer id, is not
    ending a transaction (STATES_STILL_ENDING), or is ending one without this partition."""
    if description is None or description.producer_id != candidate.producer_id:
        return True
    if description.state not in STATES_STILL_ENDING:
        return True
    return (candidate.topic, candidate.partition) not in description.partitions


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


def abort_retriable(code: int) -> bool:
    """True when AbortTransaction should be sent again (to a live coordinator): the coordinator
    or the partition's leader was unavailable. CONCURRENT_TRANSACTIONS is not: the transaction
    may not hang, and the message says how long to wait before trying again."""
    return code in COORDINATOR_ERRORS or code in LEADER_ERRORS


def producers_of(
    answer: broker_pb2.DescribeProducersResponse.PartitionResponse,
) -> list[ProducerState]:
    """A successful partition answer's producers, by producer id."""
    assert answer.error_code == ErrorCode.NONE, answer.error_code
    return sorted(
        (
            ProducerState(
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_sequence,
                last_timestamp_ms=entry.last_timestamp_ms,
                current_txn_start_offset=entry.current_txn_start_offset,
                last_append_age_ms=entry.last_append_age_ms,
            )
            for entry in answer.active_producers
        ),
        key=lambda state: state.producer_id,
    )
