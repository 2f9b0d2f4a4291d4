"""The transaction coordinator's pure core for one partition of `__transaction_state`: requests of
transactions.proto in, `Outcome`s and answers out, one write in flight per transactional id.

Theory of operation (DESIGN §5). `TransactionShard` holds the metadata of every transactional id
of one partition (the replay of its records, transaction_records.py) and the ids with a write in
flight. The runtime (not here: it does the I/O) loads the partition by calling `replay` for each
record in log order, then asks `resume_after_load` what to finish. From then on, for each
request it calls a handler, which decides with transaction_state.py and returns a `TxnStep`:

- `step.record`: the one record to append (the id's new state), or None. While it is in flight
  the id is *pending*, and every other request for it answers CONCURRENT_TRANSACTIONS
  (retriable; Kafka's pendingState), so the state machine always decides against durable state
  (or against COMPLETE_x, which a reload derives: below).
  Once the record is durable the runtime calls `on_durable(step)` (which applies it) or, when the
  write failed, `on_failed(step)` (the old state stands; the runtime reloads the partition).
- `step.response`: the answer, to send once the record is durable (or at once without one).
- `step.outcome.markers`: phase 2 to start once the record is durable; the runtime writes the
  markers, then calls `markers_written`, and writes the `completion_step` it then asks for.

Completion before its record. Once every marker is written, COMPLETE_x becomes the id's state at
once (`markers_written`), before its record is written; the runtime asks `completion_step` for
that record a moment later. The one exception to "the state is the replay of the log" is safe:
COMPLETE_x is what a reload derives anyway (it finds PREPARE_x, resumes phase 2, whose markers
the brokers take once, and records COMPLETE_x). It saves a write on every transaction's critical
path: the producer's next transaction begins as soon as EndTxn answers, so its first partition's
add nearly always waits here for phase 2. Decided against the completed state at once, the add's
own record (ONGOING at the bumped epoch) supersedes COMPLETE_x, which then is never written:
one write instead of two.

Producer ids: `init_transactions` and `end_transaction` need a fresh producer id when the epoch
is exhausted; the runtime asks `init_needs_producer_id` / `end_needs_producer_id` first and
allocates one (I/O) before calling.
No I/O, no clock (time comes in as `now_ms`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from samsa.common.errors import ErrorCode
from samsa.services.coordinator import transaction_records, transaction_state
from samsa.services.coordinator.transaction_model import (
    NO_TIMESTAMP,
    Outcome,
    TopicPartition,
    TransactionMetadata,
    apply,
)
from samsa.services.coordinator.transaction_refusals import init_refusal, verify_refusal
from samsa.services.runtime.caller import Visible, everything
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

R = TypeVar("R")

KeyValue = tuple[bytes, bytes | None]


@dataclass(frozen=True)
class TxnStep(Generic[R]):
    """One handler's decision: the record to write (None: nothing), the answer, and the outcome
    it came from (its `metadata` is what `on_durable` applies, its `markers` start phase 2)."""

    transactional_id: str
    outcome: Outcome
    response: R

    @property
    def record(self) -> KeyValue | None:
        metadata = self.outcome.metadata
        return None if metadata is None else transaction_records.encode(metadata)


class TransactionShard:
    """The transactional ids of one partition of `__transaction_state`."""

    def __init__(self) -> None:
        self.transactions: dict[str, TransactionMetadata] = {}
        self.pending: set[str] = set()

    # --- loading ----------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record read from the log (loading); ValueError for an unreadable one.
        Writer-epoch records (the runtime's fences) hold no state."""
        if transaction_records.is_writer_epoch(key):
            return
        transactional_id, metadata = transaction_records.decode(key, value)
        if metadata is None:
            self.transactions.pop(transactional_id, None)
        else:
            apply(self.transactions, metadata)

    def resume_after_load(self) -> list[TxnStep[None]]:
        """Phase 2 of every decided transaction, and the abort of a loaded epoch fence."""
        steps = []
        for outcome in transaction_state.resume_after_load(self.transactions):
            assert outcome.markers is not None
            steps.append(self._step(outcome.markers.transactional_id, outcome, None))
        return steps

    # --- writes in flight -------------------------------------------------------------------

    def on_durable(self, step: TxnStep[R]) -> None:
        """The step's record is durable: it becomes the id's state."""
        if step.outcome.metadata is not None:
            apply(self.transactions, step.outcome.metadata)
        self.pending.discard(step.transactional_id)

    def on_failed(self, step: TxnStep[R]) -> None:
        """The step's record was not written: the old state stands."""
        self.pending.discard(step.transactional_id)

    # --- the protocol -----------------------------------------------------------------------

    def init_needs_producer_id(
        self,
        request: x.InitTransactionsRequest,
        max_timeout_ms: int = transaction_state.TRANSACTION_TIMEOUT_MS_MAX,
    ) -> bool:
        """Whether `init_transactions(request)` will take a new producer id: allocate one first.
        Never for a request refused (or busy), whose answer must not wait on the allocation."""
        name = request.transactional_id
        if name in self.pending or init_refusal(
            name, request.transaction_timeout_ms, max_timeout_ms
        ):
            return False
        return transaction_state.init_needs_new_producer_id(self.transactions.get(name))

    def end_needs_producer_id(self, request: x.EndTxnRequest) -> bool:
        """Whether `end_transaction(request)` will take a new producer id: allocate one first.
        Never for a retry, a refusal or a busy id (see init_needs_producer_id)."""
        producer = request.producer
        if producer.transactional_id in self.pending:
            return False
        return transaction_state.end_needs_new_producer_id(
            self.transactions.get(producer.transactional_id),
            producer.producer_id,
            producer.producer_epoch,
            request.committed,
        )

    def init_transactions(
        self,
        request: x.InitTransactionsRequest,
        now_ms: int,
        new_producer_id: int | None,
        max_timeout_ms: int = transaction_state.TRANSACTION_TIMEOUT_MS_MAX,
    ) -> TxnStep[x.InitTransactionsResponse]:
        name = request.transactional_id
        outcome = self._busy(name) or transaction_state.init_producer_id(
            self.transactions.get(name),
            name,
            request.transaction_timeout_ms,
            now_ms,
            new_producer_id,
            max_timeout_ms,
        )
        return self._step(name, outcome, _identity_answer(x.InitTransactionsResponse, outcome))

    def add_partitions(
        self, request: x.AddPartitionsToTxnRequest, now_ms: int
    ) -> TxnStep[x.AddPartitionsToTxnResponse]:
        """AddPartitionsToTxn (not verify_only: see `verify_partitions`)."""
        producer = request.producer
        wanted = _partitions(request.partitions)
        outcome = self._busy(producer.transactional_id) or transaction_state.add_partitions(
            self.transactions.get(producer.transactional_id),
            producer.producer_id,
            producer.producer_epoch,
            wanted,
            now_ms,
        )
        response = x.AddPartitionsToTxnResponse(
            error_code=outcome.error, error_message=outcome.message
        )
        if outcome.error == ErrorCode.NONE:
            response.results.extend(
                x.TxnPartitionResult(topic=topic, partition=partition)
                for topic, partition in wanted
            )
        return self._step(producer.transactional_id, outcome, response)

    def verify_partitions(
        self, request: x.AddPartitionsToTxnRequest
    ) -> x.AddPartitionsToTxnResponse:
        """KIP-890 verification for a broker: is each partition in the producer's open
        transaction, at this producer id and epoch? Changes nothing. A write in flight for the
        id may be adding them: CONCURRENT_TRANSACTIONS, and the broker retries; a fenced
        producer is told so, not that the partition is missing (transaction_refusals)."""
        producer = request.producer
        current = self.transactions.get(producer.transactional_id)
        refused = self._busy(producer.transactional_id) or verify_refusal(
            current, producer.producer_id, producer.producer_epoch
        )
        if refused is not None:
            return x.AddPartitionsToTxnResponse(
                error_code=refused.error, error_message=refused.message
            )
        assert current is not None
        response = x.AddPartitionsToTxnResponse()
        for topic, partition in _partitions(request.partitions):
            result = response.results.add(topic=topic, partition=partition)
            if (topic, partition) not in current.partitions:
                result.error_code = ErrorCode.INVALID_TXN_STATE  # type: ignore[assignment]
                result.error_message = (
                    f"{topic}-{partition} was not added to the transaction: call "
                    "AddPartitionsToTxn before writing to it"
                )
        return response

    def add_offsets(
        self, request: x.AddOffsetsToTxnRequest, offsets_partition: TopicPartition, now_ms: int
    ) -> TxnStep[x.AddOffsetsToTxnResponse]:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction."""
        producer = request.producer
        outcome = self._busy(producer.transactional_id) or transaction_state.add_partitions(
            self.transactions.get(producer.transactional_id),
            producer.producer_id,
            producer.producer_epoch,
            [offsets_partition],
            now_ms,
        )
        response = x.AddOffsetsToTxnResponse(
            error_code=outcome.error, error_message=outcome.message
        )
        return self._step(producer.transactional_id, outcome, response)

    def end_transaction(
        self, request: x.EndTxnRequest, now_ms: int, new_producer_id: int | None
    ) -> TxnStep[x.EndTxnResponse]:
        producer = request.producer
        outcome = self._busy(producer.transactional_id) or transaction_state.end_transaction(
            self.transactions.get(producer.transactional_id),
            producer.producer_id,
            producer.producer_epoch,
            request.committed,
            now_ms,
            new_producer_id,
        )
        return self._step(
            producer.transactional_id, outcome, _identity_answer(x.EndTxnResponse, outcome)
        )

    def markers_written(self, transactional_id: str, now_ms: int) -> TransactionMetadata:
        """Phase 2 finished for the id's decided transaction: COMPLETE_x is its state from now
        on, before it is written ("Completion before its record" above); returns it for
        `completion_step`. (While it is PREPARE_x every request for it is refused without a
        write, so none can be in flight.)"""
        current = self.transactions[transactional_id]
        completed = transaction_state.markers_written(current, now_ms).metadata
        assert completed is not None
        apply(self.transactions, completed)
        return completed

    def completion_step(self, completed: TransactionMetadata) -> TxnStep[None] | None:
        """The write of `completed` (from `markers_written`), or None when a later state of the
        id was decided since: its record supersedes COMPLETE_x (written, or being written)."""
        name = completed.transactional_id
        if self.transactions.get(name) is not completed or name in self.pending:
            return None
        outcome = Outcome(
            metadata=completed,
            producer_id=completed.producer_id,
            producer_epoch=completed.producer_epoch,
        )
        return self._step(name, outcome, None)

    # --- timers -----------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> list[TxnStep[None]]:
        """Abort (and fence) every open transaction past its timeout that has no write in
        flight; each step's markers follow once its record is durable."""
        steps = []
        for name in transaction_state.timed_out(self.transactions, now_ms):
            if name in self.pending:
                continue
            outcome = transaction_state.abort_timed_out(self.transactions[name], now_ms)
            if outcome.metadata is not None:
                steps.append(self._step(name, outcome, None))
        return steps

    def expire(self, now_ms: int, expiration_ms: int) -> list[TxnStep[None]]:
        """Tombstones for ids idle for `expiration_ms` (transactional.id.expiration.ms)."""
        idle = {n: m for n, m in self.transactions.items() if n not in self.pending}
        return [
            self._step(metadata.transactional_id, Outcome(metadata=metadata), None)
            for metadata in transaction_state.expired(idle, now_ms, expiration_ms)
        ]

    # --- administration ---------------------------------------------------------------------

    def list_transactions(
        self, request: x.ListTransactionsRequest, now_ms: int, visible: Visible = everything
    ) -> list[x.ListedTransaction]:
        """The ids matching the request's filters that `visible` admits (KIP-664: those the
        caller may DESCRIBE, unless it may DESCRIBE the cluster: caller.listing_filter)."""
        states = set(request.state_filters)
        producers = set(request.producer_id_filters)
        listed = []
        for name, metadata in sorted(self.transactions.items()):
            if not visible(name):
                continue
            if states and metadata.state not in states:
                continue
            if producers and metadata.producer_id not in producers:
                continue
            if request.duration_filter_ms and (
                metadata.transaction_start_ms == NO_TIMESTAMP
                or now_ms - metadata.transaction_start_ms < request.duration_filter_ms
            ):
                continue
            listed.append(
                x.ListedTransaction(
                    transactional_id=name,
                    producer_id=metadata.producer_id,
                    state=int(metadata.state),  # type: ignore[arg-type]
                )
            )
        return listed

    def describe_transaction(self, transactional_id: str) -> x.DescribedTransaction:
        described = x.DescribedTransaction(transactional_id=transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            described.error_code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND  # type: ignore[assignment]
            described.error_message = (
                f"transactional id {transactional_id!r} is unknown here (never initialized, or "
                "expired)"
            )
            return described
        described.state = int(metadata.state)  # type: ignore[assignment]
        described.producer_id = metadata.producer_id
        described.producer_epoch = metadata.producer_epoch
        described.transaction_timeout_ms = metadata.transaction_timeout_ms
        described.transaction_start_ms = metadata.transaction_start_ms
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.partitions):
            by_topic.setdefault(topic, []).append(partition)
        described.partitions.extend(
            c.TopicPartitions(topic=topic, partitions=numbers)
            for topic, numbers in by_topic.items()
        )
        return described

    # --- helpers ----------------------------------------------------------------------------

    def _busy(self, transactional_id: str) -> Outcome | None:
        if transactional_id not in self.pending:
            return None
        return Outcome(
            error=ErrorCode.CONCURRENT_TRANSACTIONS,
            message=(
                f"transactional id {transactional_id!r} has a write in flight: retry after a "
                "backoff"
            ),
        )

    def _step(self, transactional_id: str, outcome: Outcome, response: R) -> TxnStep[R]:
        if outcome.metadata is not None:
            assert transactional_id not in self.pending, transactional_id
            self.pending.add(transactional_id)
        return TxnStep(transactional_id, outcome, response)


def _partitions(entries: Iterable[c.TopicPartitions]) -> list[TopicPartition]:
    """The request's partitions in request order, each once."""
    seen: dict[TopicPartition, None] = {}
    for entry in entries:
        for partition in entry.partitions:
            seen.setdefault((entry.topic, partition), None)
    return list(seen)


def _identity_answer(kind: type[R], outcome: Outcome) -> R:
    if outcome.error != ErrorCode.NONE:
        return kind(  # type: ignore[call-arg]
            error_code=outcome.error,
            error_message=outcome.message,
            producer_id=-1,
            producer_epoch=-1,
        )
    return kind(producer_id=outcome.producer_id, producer_epoch=outcome.producer_epoch)  # type: ignore[call-arg]
