"""Transaction administration, the I/O half (KIP-664): Admin's transaction methods.

Three ways of reaching the cluster, each retried until request.timeout.ms:

- ListTransactions on every live coordinator (DescribeCluster names them), merged; a coordinator
  still loading partitions of __transaction_state is asked again;
- DescribeTransactions and EndTxn at one transactional id's coordinator, found with
  FindCoordinator on a bootstrap server and found again after a coordinator error or
  CONCURRENT_TRANSACTIONS (`_at_transaction_coordinator`);
- DescribeProducers at each partition's leader, from the client's metadata, refreshed after a
  leader error (`describe_producers`), and AbortTransaction at any live coordinator, which writes
  the marker through the partition's leader (`abort_transaction`).

`find_hanging_transactions` chains three of them: DescribeProducers for the open transactions,
ListTransactions for their producers' transactional ids, DescribeTransactions for what each id's
coordinator is doing.

Admin (admin.py) owns one TransactionAdminCalls and hands each transaction method to it; deadlines
and FindCoordinator are shared with the group calls (coordinator_calls.py); what is decided from
the answers is pure and lives in transaction_admin.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from samsa.client import group_admin as ga
from samsa.client import transaction_admin as ta
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.coordinator_calls import CoordinatorCalls, status
from samsa.client.errors import KafkaError, first_of
from samsa.client.leader_calls import ask_leaders
from samsa.client.refusals import authorization_error
from samsa.client.transaction_admin import (
    OpenTransaction,
    PreparedTransaction,
    ProducerState,
    TransactionDescription,
    TransactionError,
    TransactionListing,
)
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2, broker_pb2_grpc
from samsa.v1 import controller_pb2 as c
from samsa.v1 import coordinator_pb2 as g
from samsa.v1 import transactions_pb2 as txn
from samsa.v1 import transactions_pb2_grpc as txn_grpc

# `send(stub, timeout_s)` -> (answer, error_code, error_message): one call at an id's coordinator.
Send = Callable[[txn_grpc.TransactionCoordinatorServiceStub, float], tuple[Any, int, str]]


class TransactionAdminCalls:
    """The bodies of Admin's transaction methods (same names; Admin documents them)."""

    def __init__(self, calls: CoordinatorCalls, metadata: ClusterMetadata) -> None:
        self._calls = calls
        self._metadata = metadata  # where each partition's leader is, for DescribeProducers

    def list_transactions(
        self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int
    ) -> list[TransactionListing]:
        # A coordinator filters on at most admin_request_items_max producer ids a request (it
        # refuses more); Kafka's listTransactions takes any number, so they are asked in parts.
        ids = sorted(set(producer_ids))
        step = limits.admin_request_items_max
        requests = [
            txn.ListTransactionsRequest(
                state_filters=[ta.state_of(name) for name in states],  # type: ignore[misc]
                producer_id_filters=ids[start : start + step],
                duration_filter_ms=duration_ms,
            )
            for start in range(0, max(1, len(ids)), step)
        ]

        def ask(
            coordinator: c.DescribeClusterResponse.Coordinator, timeout_s: float
        ) -> tuple[txn.ListTransactionsResponse | None, str | None]:
            stub = self._transaction_stub(coordinator.endpoint)
            merged = txn.ListTransactionsResponse()
            for request in requests:
                answer = stub.ListTransactions(request, timeout=timeout_s)
                if answer.partitions_loading:
                    return None, (
                        f"partitions {list(answer.partitions_loading)} of __transaction_state "
                        "are loading"
                    )
                merged.transactions.extend(answer.transactions)
            return merged, None

        answers = self._calls.ask_every_live(ask, "transactions", TransactionError)
        return ta.listings_of(answers)

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """Every id is asked within one deadline; the first failed id's TransactionError names
        every failed one in its `errors`, so one unknown id hides neither the others' failures
        nor leaves them unasked."""
        deadline = self._calls.deadline()
        described: dict[str, TransactionDescription] = {}
        errors: dict[str, KafkaError] = {}
        for name in dict.fromkeys(transactional_ids):
            try:
                described[name] = self._describe_transaction(name, deadline)
            except TransactionError as error:
                errors[name] = error
        error = first_of(errors)
        if error is not None:
            raise error
        return described

    def _describe_transaction(
        self, transactional_id: str, deadline: float | None = None
    ) -> TransactionDescription:
        def describe(stub: Any, timeout_s: float) -> tuple[Any, int, str]:
            request = txn.DescribeTransactionsRequest(transactional_ids=[transactional_id])
            described = stub.DescribeTransactions(request, timeout=timeout_s).transactions[0]
            return described, described.error_code, described.error_message

        answer = self._at_transaction_coordinator(transactional_id, describe, deadline)
        return ta.description_of(answer)

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool) -> None:
        def end(stub: Any, timeout_s: float) -> tuple[Any, int, str]:
            request = txn.EndTxnRequest(
                producer=txn.TransactionalProducer(
                    transactional_id=prepared.transactional_id,
                    producer_id=prepared.producer_id,
                    producer_epoch=prepared.producer_epoch,
                ),
                committed=commit,
            )
            answer = stub.EndTxn(request, timeout=timeout_s)
            return answer, answer.error_code, answer.error_message

        answer = self._at_transaction_coordinator(prepared.transactional_id, end)
        if answer.error_code:
            raise TransactionError.of(answer.error_code, answer.error_message)

    def describe_producers(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], list[ProducerState]]:
        def ask(
            stub: broker_pb2_grpc.BrokerServiceStub, numbers: dict[str, list[int]], timeout_s: float
        ) -> Any:
            request = broker_pb2.DescribeProducersRequest(
                topics=[
                    broker_pb2.DescribeProducersRequest.TopicRequest(name=topic, partitions=parts)
                    for topic, parts in numbers.items()
                ]
            )
            return stub.DescribeProducers(request, timeout=timeout_s)

        answers = ask_leaders(
            self._calls,
            self._metadata,
            partitions,
            ask,
            TransactionError,
            "described its producers",
        )
        return {key: ta.producers_of(answer) for key, answer in answers.items()}

    def find_hanging_transactions(
        self, partitions: Iterable[tuple[str, int]], max_transaction_timeout_ms: int
    ) -> list[OpenTransaction]:
        candidates = ta.silent_open_transactions(
            self.describe_producers(partitions), max_transaction_timeout_ms
        )
        if not candidates:
            return []
        # A coordinator filters on at most admin_request_items_max producer ids per listing.
        producer_ids = sorted({candidate.producer_id for candidate in candidates})
        step = limits.admin_request_items_max
        listed = [
            listing
            for start in range(0, len(producer_ids), step)
            for listing in self.list_transactions((), producer_ids[start : start + step], 0)
        ]
        ids = {listing.producer_id: listing.transactional_id for listing in listed}
        descriptions: dict[str, TransactionDescription] = {}
        for transactional_id in sorted(set(ids.values())):
            try:
                descriptions[transactional_id] = self._describe_transaction(transactional_id)
            except TransactionError as error:
                if error.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:  # expired since listed
                    raise

        def description(candidate: OpenTransaction) -> TransactionDescription | None:
            """What the coordinator of the candidate's producer's id says, or None: no id."""
            transactional_id = ids.get(candidate.producer_id)
            return None if transactional_id is None else descriptions.get(transactional_id)

        return [c for c in candidates if ta.is_hanging(c, description(c))]

    def abort_transaction(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int
    ) -> None:
        request = txn.AbortTransactionRequest(
            topic=topic,
            partition=partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        deadline = self._calls.deadline()
        problem = "no coordinator is live"
        maybe_written = False  # an earlier attempt may have written the marker, answer lost
        while True:
            live = [x for x in self._calls.coordinators() if not x.is_fenced]
            for coordinator in live:
                stub = self._transaction_stub(coordinator.endpoint)
                try:
                    answer = stub.AbortTransaction(request, timeout=self._calls.attempt_s(deadline))
                except grpc.RpcError as error:
                    if refused := authorization_error(error):  # so would every coordinator
                        raise refused from None
                    problem = f"coordinator {coordinator.coordinator_id}: {status(error)}"
                    maybe_written = True
                    continue
                if answer.error_code == ErrorCode.NONE:
                    return
                if (
                    answer.error_code == ErrorCode.INVALID_TXN_STATE
                    and maybe_written
                    and self._aborted_at(topic, partition, producer_id, producer_epoch + 1)
                ):
                    return  # nothing open now: an earlier attempt of this call aborted it
                if not ta.abort_retriable(answer.error_code):
                    raise TransactionError.of(answer.error_code, answer.error_message)
                problem = f"coordinator {coordinator.coordinator_id}: {answer.error_message}"
                if answer.error_code in ta.LEADER_ERRORS:
                    maybe_written = True
                    break  # the leader's problem: another coordinator will not do better now
            if time.monotonic() >= deadline:
                raise TransactionError(
                    f"could not abort the transaction of producer {producer_id} on "
                    f"{topic}-{partition} within {self._calls.within}: {problem}",
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            self._calls.wait_before_retry()

    def _aborted_at(self, topic: str, partition: int, producer_id: int, epoch: int) -> bool:
        """Whether the partition's leader shows `producer_id` at `epoch` (the ABORT marker's,
        one above the aborted transaction's) with no transaction open."""
        try:
            states = self.describe_producers([(topic, partition)])[(topic, partition)]
        except TransactionError:
            return False
        return any(
            s.producer_id == producer_id
            and s.producer_epoch == epoch
            and s.current_txn_start_offset < 0
            for s in states
        )

    # --- reaching coordinators and leaders -------------------------------------------------------

    def _transaction_stub(self, endpoint: str) -> txn_grpc.TransactionCoordinatorServiceStub:
        return txn_grpc.TransactionCoordinatorServiceStub(self._calls.channels.get(endpoint))

    def _at_transaction_coordinator(
        self, transactional_id: str, send: Send, deadline: float | None = None
    ) -> Any:
        """`send(stub, timeout_s)` to the id's coordinator, finding it again and retrying while
        the answer is a coordinator error, until `deadline` (request.timeout.ms from now unless
        given); the first other answer."""
        deadline = self._calls.deadline() if deadline is None else deadline
        problem = "no coordinator was found"
        while True:
            find = g.FindCoordinatorRequest(
                key_type=g.COORDINATOR_KEY_TYPE_TRANSACTION, keys=[transactional_id]
            )
            answer, lookup_problem = self._calls.lookup(find, deadline)
            location = answer.coordinators[0] if answer is not None else None
            if location is not None and location.error_code == ErrorCode.NONE:
                stub = self._transaction_stub(location.endpoint)
                try:
                    got, code, message = send(stub, self._calls.attempt_s(deadline))
                except grpc.RpcError as error:
                    if refused := authorization_error(error):  # so would every coordinator
                        raise refused from None
                    problem = f"the coordinator at {location.endpoint}: {status(error)}"
                else:
                    if (
                        not ga.coordinator_retriable(code)
                        and code != ErrorCode.CONCURRENT_TRANSACTIONS
                    ):
                        return got
                    problem = message
            elif location is not None:
                if not ga.coordinator_retriable(location.error_code):
                    raise TransactionError.of(location.error_code, location.error_message)
                problem = location.error_message
            elif lookup_problem is not None:
                problem = lookup_problem[1]
            if time.monotonic() >= deadline:
                raise TransactionError(
                    f"no coordinator answered for transactional id {transactional_id!r} within "
                    f"{self._calls.within}: {problem}",
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            self._calls.wait_before_retry()
