"""Goal: one failed item of an Admin call does not hide the others' outcomes (Kafka's admin
answers a future per topic, group, partition or transactional id): the error raised is the
first item's, and its `errors` names every item that failed, each with its own error; every
item is asked, so one refused early does not leave the later ones unasked.

Method: the pure raise_first on answers built by hand; Admin's group and transaction calls with
their coordinator lookups and stubs replaced by fakes; delete_records with its leaders faked.
"""

from __future__ import annotations

from typing import Any

import pytest

from samsa.client import coordinator_calls
from samsa.client.admin import Admin
from samsa.client.cluster_admin import raise_first
from samsa.client.errors import TopicError
from samsa.client.group_admin import GroupError
from samsa.client.transaction_admin import TransactionError
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2
from samsa.v1 import controller_pb2 as c
from samsa.v1 import coordinator_pb2 as g
from samsa.v1 import transactions_pb2 as txn


def failed(name: str, code: ErrorCode) -> c.CreateTopicsResponse.Result:
    return c.CreateTopicsResponse.Result(name=name, error_code=code, error_message=f"{name} no")  # type: ignore[arg-type]


def test_raise_first_names_every_failed_topic() -> None:
    results = [
        c.CreateTopicsResponse.Result(name="a"),
        failed("b", ErrorCode.TOPIC_ALREADY_EXISTS),
        failed("c", ErrorCode.INVALID_CONFIG),
    ]
    with pytest.raises(TopicError) as raised:
        raise_first(results)
    assert raised.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert {k: e.code for k, e in raised.value.errors.items()} == {
        "b": ErrorCode.TOPIC_ALREADY_EXISTS,
        "c": ErrorCode.INVALID_CONFIG,
    }


GROUP_CODES = {
    "busy": ErrorCode.NON_EMPTY_GROUP,
    "ok": ErrorCode.NONE,
    "gone": ErrorCode.GROUP_ID_NOT_FOUND,
}


class GroupStub:
    def DescribeGroups(self, request: Any, timeout: float) -> Any:
        return g.DescribeGroupsResponse(
            groups=[
                g.DescribedGroup(group_id=x, error_code=GROUP_CODES[x], error_message=x)  # type: ignore[arg-type]
                for x in request.group_ids
            ]
        )

    def DeleteGroups(self, request: Any, timeout: float) -> Any:
        return g.DeleteGroupsResponse(
            groups=[
                g.DeletedGroup(group_id=x, error_code=GROUP_CODES[x], error_message=x)  # type: ignore[arg-type]
                for x in request.group_ids
            ]
        )


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> Admin:
    monkeypatch.setattr(coordinator_calls, "RETRY_BACKOFF_S", 0.0)
    admin = Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 2000})

    def lookup(request: Any, deadline: float) -> Any:
        answer = g.FindCoordinatorResponse()
        for key in request.keys:
            answer.coordinators.add(key=key, endpoint="c:1", coordinator_id=1)
        return answer, None

    monkeypatch.setattr(admin._groups._calls, "lookup", lookup)
    monkeypatch.setattr(admin._groups, "_group_stub", lambda endpoint: GroupStub())
    return admin


@pytest.mark.parametrize("method", ["describe_consumer_groups", "delete_consumer_groups"])
def test_every_failed_group_is_named(admin: Admin, method: str) -> None:
    with pytest.raises(GroupError) as raised:
        getattr(admin, method)(["busy", "ok", "gone"])
    assert raised.value.code == ErrorCode.NON_EMPTY_GROUP
    assert {k: e.code for k, e in raised.value.errors.items()} == {
        "busy": ErrorCode.NON_EMPTY_GROUP,
        "gone": ErrorCode.GROUP_ID_NOT_FOUND,
    }


def test_every_transactional_id_is_described_and_each_failure_named(admin: Admin) -> None:
    asked: list[str] = []

    class Stub:
        def DescribeTransactions(self, request: Any, timeout: float) -> Any:
            (name,) = request.transactional_ids
            asked.append(name)
            code = ErrorCode.NONE if name == "ok" else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            return txn.DescribeTransactionsResponse(
                transactions=[
                    txn.DescribedTransaction(
                        transactional_id=name,
                        error_code=code,  # type: ignore[arg-type]
                        error_message=f"{name} unknown",
                    )
                ]
            )

    admin._transactions._transaction_stub = lambda endpoint: Stub()  # type: ignore[method-assign]
    with pytest.raises(TransactionError) as raised:
        admin.describe_transactions(["x", "ok", "y"])
    assert asked == ["x", "ok", "y"], "every id asked, not only those before the first failure"
    assert list(raised.value.errors) == ["x", "y"]
    assert raised.value.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_delete_records_asks_every_leader_and_names_each_refusal(
    admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, metadata = admin._partitions._calls, admin._partitions._metadata
    monkeypatch.setattr(metadata, "refresh", lambda topics, timeout_s=0: None)
    metadata.partition_counts = {"t": 3}
    metadata.leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 2}
    metadata.endpoints = {1: "b1:1", 2: "b2:1"}
    deleted: list[tuple[str, int]] = []

    class Stub:
        def __init__(self, endpoint: str) -> None:
            self.endpoint = endpoint

        def DeleteRecords(self, request: Any, timeout: float) -> Any:
            answer = broker_pb2.DeleteRecordsResponse()
            for topic in request.topics:
                out = answer.topics.add(name=topic.name)
                for p in topic.partitions:
                    if p.partition == 1:
                        out.partitions.add(
                            partition=1,
                            error_code=ErrorCode.OFFSET_OUT_OF_RANGE,  # type: ignore[arg-type]
                            error_message="above the high watermark",
                        )
                    else:
                        deleted.append((topic.name, p.partition))
                        out.partitions.add(partition=p.partition, low_watermark=p.offset)
            return answer

    from samsa.client import leader_calls

    monkeypatch.setattr(leader_calls.broker_pb2_grpc, "BrokerServiceStub", Stub)
    monkeypatch.setattr(calls.channels, "get", lambda endpoint: endpoint)
    with pytest.raises(TopicError) as raised:
        admin.delete_records({("t", 1): 5, ("t", 0): 5, ("t", 2): 5, ("t", 7): 1})
    assert sorted(deleted) == [("t", 0), ("t", 2)], "every partition's leader was asked"
    assert raised.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert {k: e.code for k, e in raised.value.errors.items()} == {
        ("t", 1): ErrorCode.OFFSET_OUT_OF_RANGE,
        ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_a_group_id_refused_by_find_coordinator_does_not_stop_the_others(
    admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def lookup(request: Any, deadline: float) -> Any:
        answer = g.FindCoordinatorResponse()
        for key in request.keys:
            if key == "":
                answer.coordinators.add(
                    key=key,
                    error_code=ErrorCode.INVALID_GROUP_ID,  # type: ignore[arg-type]
                    error_message="group ids are 1 to 255 characters",
                )
            else:
                answer.coordinators.add(key=key, endpoint="c:1", coordinator_id=1)
        return answer, None

    class Stub(GroupStub):
        def DeleteGroups(self, request: Any, timeout: float) -> Any:
            asked.extend(request.group_ids)
            return super().DeleteGroups(request, timeout)

    monkeypatch.setattr(admin._groups._calls, "lookup", lookup)
    monkeypatch.setattr(admin._groups, "_group_stub", lambda endpoint: Stub())
    with pytest.raises(GroupError) as raised:
        admin.delete_consumer_groups(["", "ok"])
    assert asked == ["ok"], "the valid group was deleted"
    assert raised.value.code == ErrorCode.INVALID_GROUP_ID
    assert list(raised.value.errors) == [""]
    with pytest.raises(GroupError) as raised:
        admin.describe_consumer_groups(["ok", "", "gone"])
    assert list(raised.value.errors) == ["", "gone"]
    with pytest.raises(GroupError, match="1 to 255"):
        admin.describe_consumer_group_lag("")


def test_every_partition_an_admin_commit_refused_is_named() -> None:
    from samsa.client.group_admin import commit_error_of

    answer = g.OffsetCommitResponse()
    topic = answer.topics.add(name="t")
    topic.partitions.add(partition=0)
    topic.partitions.add(
        partition=1,
        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # type: ignore[arg-type]
        error_message="t-1 does not exist",
    )
    topic.partitions.add(
        partition=2,
        error_code=ErrorCode.INVALID_REQUEST,  # type: ignore[arg-type]
        error_message="metadata too long",
    )
    error = commit_error_of("g", answer)
    assert error is not None and error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert {k: e.code for k, e in error.errors.items()} == {
        ("t", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 2): ErrorCode.INVALID_REQUEST,
    }


def test_delete_records_leaves_the_broker_time_to_answer_before_the_call_times_out(
    admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader waits timeout_ms for its followers and then answers REQUEST_TIMED_OUT saying
    where they are; given the call's whole timeout it answered when the client had already given
    up (DEADLINE_EXCEEDED, 'the broker did not answer'), so that message never arrived."""
    calls, metadata = admin._partitions._calls, admin._partitions._metadata
    monkeypatch.setattr(metadata, "refresh", lambda topics, timeout_s=0: None)
    metadata.partition_counts = {"t": 1}
    metadata.leaders = {("t", 0): 1}
    metadata.endpoints = {1: "b1:1"}
    seen: list[tuple[int, float]] = []

    class Stub:
        def __init__(self, endpoint: str) -> None:
            pass

        def DeleteRecords(self, request: Any, timeout: float) -> Any:
            seen.append((request.timeout_ms, timeout))
            answer = broker_pb2.DeleteRecordsResponse()
            answer.topics.add(name="t").partitions.add(partition=0, low_watermark=5)
            return answer

    from samsa.client import leader_calls

    monkeypatch.setattr(leader_calls.broker_pb2_grpc, "BrokerServiceStub", Stub)
    monkeypatch.setattr(calls.channels, "get", lambda endpoint: endpoint)
    assert admin.delete_records({("t", 0): 5}) == {("t", 0): 5}
    ((timeout_ms, timeout_s),) = seen
    assert timeout_ms / 1000 <= timeout_s - 0.2, seen


def test_followers_that_do_not_catch_up_end_delete_records_with_request_timed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As documented: REQUEST_TIMED_OUT with the leader's message saying where the followers
    are, not LEADER_NOT_AVAILABLE blaming a leader that answered every time."""
    monkeypatch.setattr(coordinator_calls, "RETRY_BACKOFF_S", 0.05)
    admin = Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 300})
    calls, metadata = admin._partitions._calls, admin._partitions._metadata
    monkeypatch.setattr(metadata, "refresh", lambda topics, timeout_s=0: None)
    metadata.partition_counts = {"t": 1}
    metadata.leaders = {("t", 0): 1}
    metadata.endpoints = {1: "b1:1"}

    class Stub:
        def __init__(self, endpoint: str) -> None:
            pass

        def DeleteRecords(self, request: Any, timeout: float) -> Any:
            answer = broker_pb2.DeleteRecordsResponse()
            answer.topics.add(name="t").partitions.add(
                partition=0,
                error_code=ErrorCode.REQUEST_TIMED_OUT,  # type: ignore[arg-type]
                error_message="the ISR's replicas start at 0, not yet 5",
            )
            return answer

    from samsa.client import leader_calls

    monkeypatch.setattr(leader_calls.broker_pb2_grpc, "BrokerServiceStub", Stub)
    monkeypatch.setattr(calls.channels, "get", lambda endpoint: endpoint)
    with admin, pytest.raises(TopicError, match="not yet 5") as raised:
        admin.delete_records({("t", 0): 5})
    assert raised.value.code == ErrorCode.REQUEST_TIMED_OUT
