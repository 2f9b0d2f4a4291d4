"""Goal: DescribeGroups, DeleteGroups and DescribeTransactions name each id at most once, and a
request naming one twice is refused before any work (INVALID_ARGUMENT naming it). Their answers
hold one entry per id asked, so a repeated id multiplied the answer: a ~10 KB DescribeGroups
naming one group 1,000 times (admin_request_items_max; anyone may create a group with a
heartbeat), whose one member subscribed to 188 KB of topic names (within the heartbeat bound),
built a 188 MB answer on the coordinator's event loop, then too large for gRPC to send.

Method: the servicers over a stand-in coordinator that owns nothing (a request that gets past
the checks answers NOT_COORDINATOR) and a context whose abort raises, as grpc's does.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from samsa.common.errors import ErrorCode
from samsa.common.request_counts import named_twice
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.services.coordinator.transaction_servicer import TransactionCoordinatorServicer
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class Context:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class OwnsNothing:
    def partition_for(self, key: str) -> None:
        raise PartitionUnavailableError(ErrorCode.NOT_COORDINATOR, "not here")

    transaction_partition_for = partition_for


CALLS = [
    (GroupCoordinatorServicer, "DescribeGroups", c.DescribeGroupsRequest, "group_ids", "group id"),
    (GroupCoordinatorServicer, "DeleteGroups", c.DeleteGroupsRequest, "group_ids", "group id"),
    (
        TransactionCoordinatorServicer,
        "DescribeTransactions",
        x.DescribeTransactionsRequest,
        "transactional_ids",
        "transactional id",
    ),
]


@pytest.mark.parametrize(("servicer_of", "method", "request_of", "field", "what"), CALLS)
def test_an_id_named_twice_is_refused(servicer_of, method, request_of, field, what) -> None:  # type: ignore[no-untyped-def]
    servicer = servicer_of(OwnsNothing())
    call = getattr(servicer, method)
    answer = asyncio.run(call(request_of(**{field: ["a", "b"]}), Context()))
    entries = answer.groups if hasattr(answer, "groups") else answer.transactions
    assert [entry.error_code for entry in entries] == [ErrorCode.NOT_COORDINATOR] * 2
    with pytest.raises(Aborted) as refused:
        asyncio.run(call(request_of(**{field: ["a", "b", "a"]}), Context()))
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details == f"{what} 'a' is named twice: name each once"


def test_named_twice_names_the_first_repeated() -> None:
    assert named_twice(["a", "b", "c"], "group id") is None
    assert named_twice([], "group id") is None
    assert named_twice(["a", "b", "b", "a"], "group id") == (
        "group id 'b' is named twice: name each once"
    )
