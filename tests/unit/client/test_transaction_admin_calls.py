"""Goal: find_hanging_transactions works for any number of open transactions: coordinators refuse
a ListTransactions filtering on more than admin_request_items_max producer ids
(RESOURCE_EXHAUSTED), so the producer ids of the candidates are asked in several listings.

Method: TransactionAdminCalls with its two I/O methods (describe_producers, list_transactions)
replaced by fakes; the fake listing refuses more ids than a coordinator takes, as one does.
"""

from __future__ import annotations

import pytest

from samsa.client import transaction_admin_calls as tac
from samsa.client.transaction_admin import ProducerState, TransactionError
from samsa.common import limits
from samsa.common.errors import ErrorCode

MAX_TIMEOUT_MS = 900_000


def test_more_open_transactions_than_one_listing_may_filter_on_are_all_judged(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    many = limits.admin_request_items_max + 5
    producers = {
        ("t", partition): [ProducerState(1000 + partition, 0, 3, 0, 42, MAX_TIMEOUT_MS)]
        for partition in range(many)
    }
    listed_filters: list[int] = []

    def list_transactions(states, producer_ids, duration_ms):  # type: ignore[no-untyped-def]
        producer_ids = list(producer_ids)
        if len(producer_ids) > limits.admin_request_items_max:
            raise TransactionError("too many producer id filters", ErrorCode.INVALID_REQUEST)
        listed_filters.append(len(producer_ids))
        return []

    calls = tac.TransactionAdminCalls(None, None)  # type: ignore[arg-type]
    monkeypatch.setattr(calls, "describe_producers", lambda partitions: producers)
    monkeypatch.setattr(calls, "list_transactions", list_transactions)
    hanging = calls.find_hanging_transactions(list(producers), MAX_TIMEOUT_MS)
    assert len(hanging) == many, "no transactional id is known for any: every one hangs"
    assert sorted(listed_filters) == [5, limits.admin_request_items_max]


def test_list_transactions_filtering_on_more_producer_ids_than_one_request_takes() -> None:
    """Kafka's listTransactions filters on any number of producer ids; a coordinator refuses a
    request naming more than admin_request_items_max, so the SDK asks in several requests."""
    from types import SimpleNamespace

    from samsa.v1 import transactions_pb2 as txn

    many = limits.admin_request_items_max * 2 + 3
    filters: list[int] = []

    class Stub:
        def ListTransactions(self, request, timeout):  # type: ignore[no-untyped-def]
            if len(request.producer_id_filters) > limits.admin_request_items_max:
                raise TransactionError("too many producer id filters", ErrorCode.INVALID_REQUEST)
            filters.append(len(request.producer_id_filters))
            answer = txn.ListTransactionsResponse()
            for producer_id in request.producer_id_filters:
                if producer_id % 1000 == 7:
                    answer.transactions.add(
                        transactional_id=f"id-{producer_id}", producer_id=producer_id
                    )
            return answer

    class Calls:
        def ask_every_live(self, ask, what, error):  # type: ignore[no-untyped-def]
            answer, problem = ask(SimpleNamespace(endpoint="c:1", coordinator_id=1), 1.0)
            assert problem is None
            return [answer]

    calls = tac.TransactionAdminCalls(Calls(), None)  # type: ignore[arg-type]
    calls._transaction_stub = lambda endpoint: Stub()  # type: ignore[method-assign]
    listed = calls.list_transactions((), range(many), 0)
    assert sorted(filters) == [3, limits.admin_request_items_max, limits.admin_request_items_max]
    assert sorted(x.producer_id for x in listed) == [n for n in range(many) if n % 1000 == 7]


class _Lost(tac.grpc.RpcError):
    def code(self):  # type: ignore[no-untyped-def]
        return tac.grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return "Deadline Exceeded"


def _abort_calls(monkeypatch, answers, producers):  # type: ignore[no-untyped-def]
    """TransactionAdminCalls whose one coordinator answers AbortTransaction from `answers` in
    turn (an exception is raised) and whose partition leader shows `producers`."""
    from types import SimpleNamespace

    from samsa.client import coordinator_calls
    from samsa.v1 import transactions_pb2 as txn

    monkeypatch.setattr(coordinator_calls, "RETRY_BACKOFF_S", 0.0)
    coordinators = [SimpleNamespace(is_fenced=False, endpoint="c:1", coordinator_id=1)]
    calls = SimpleNamespace(
        coordinators=lambda: coordinators,
        deadline=lambda: tac.time.monotonic() + 2,
        attempt_s=lambda deadline: 1.0,
        wait_before_retry=lambda: None,
        request_timeout_ms=2000,
        within="request.timeout.ms (2000)",
    )
    asked: list[int] = []

    class Stub:
        def AbortTransaction(self, request, timeout):  # type: ignore[no-untyped-def]
            asked.append(request.producer_epoch)
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            code, message = answer
            return txn.AbortTransactionResponse(error_code=code, error_message=message)

    admin_calls = tac.TransactionAdminCalls(calls, None)  # type: ignore[arg-type]
    admin_calls._transaction_stub = lambda endpoint: Stub()  # type: ignore[method-assign]
    monkeypatch.setattr(admin_calls, "describe_producers", lambda partitions: producers)
    return admin_calls, asked


NOTHING_OPEN = "producer 7 has no open transaction on t-0 (its leader shows no open transaction)"


def test_an_abort_whose_answer_was_lost_and_is_found_done_on_retry_succeeds(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The first AbortTransaction wrote the marker (epoch 3 -> 4) but its answer was lost; the
    retry finds nothing open. The leader shows the producer at epoch 4 with nothing open: this
    call's abort, so it succeeds rather than raising 'nothing to abort'."""
    producers = {("t", 0): [ProducerState(7, 4, -1, 0, -1)]}
    answers = [_Lost(), (ErrorCode.INVALID_TXN_STATE, NOTHING_OPEN)]
    calls, asked = _abort_calls(monkeypatch, answers, producers)
    calls.abort_transaction("t", 0, 7, 3)
    assert asked == [3, 3]


def _abort_fails_as_invalid_txn_state(monkeypatch, answers, producers) -> None:  # type: ignore[no-untyped-def]
    calls, _ = _abort_calls(monkeypatch, answers, producers)
    with pytest.raises(TransactionError) as raised:
        calls.abort_transaction("t", 0, 7, 3)
    assert raised.value.code == ErrorCode.INVALID_TXN_STATE


def test_nothing_to_abort_without_an_earlier_attempt_is_still_an_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    producers = {("t", 0): [ProducerState(7, 4, -1, 0, -1)]}
    answers = [(ErrorCode.INVALID_TXN_STATE, NOTHING_OPEN)]
    _abort_fails_as_invalid_txn_state(monkeypatch, answers, producers)
    producers = {("t", 0): [ProducerState(7, 3, -1, 0, -1)]}  # not bumped: not this call's
    answers = [_Lost(), (ErrorCode.INVALID_TXN_STATE, NOTHING_OPEN)]
    _abort_fails_as_invalid_txn_state(monkeypatch, answers, producers)
