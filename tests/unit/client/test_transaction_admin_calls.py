"""Goal: find_hanging_transactions works for any number of open transactions: coordinators refuse
a ListTransactions filtering on more than admin_request_items_max producer ids
(RESOURCE_EXHAUSTED), so the producer ids of the candidates are asked in several listings.

Method: TransactionAdminCalls with its two I/O methods (describe_producers, list_transactions)
replaced by fakes; the fake listing refuses more ids than a coordinator takes, as one does.
"""

from __future__ import annotations

from samsa.client import transaction_admin_calls as tac
from samsa.client.transaction_admin import ProducerState, TransactionError
from samsa.common import limits
from samsa.common.errors import ErrorCode

NOW_MS = 10_000_000
MAX_TIMEOUT_MS = 900_000


def test_more_open_transactions_than_one_listing_may_filter_on_are_all_judged(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    many = limits.admin_request_items_max + 5
    producers = {
        ("t", partition): [ProducerState(1000 + partition, 0, 3, 0, 42)]
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
    hanging = calls.find_hanging_transactions(list(producers), MAX_TIMEOUT_MS, NOW_MS)
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
