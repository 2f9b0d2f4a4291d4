"""Goal: Admin.elect_leaders sends ElectLeaders with the election type and partitions asked
(each once, split by admin_request_items_max, none named for None), answers each partition's
outcome as Kafka's ElectLeadersResult does (None: elected; ELECTION_NOT_NEEDED: an outcome, not
a failure), raises ElectionError for any other refusal while keeping every outcome, and refuses
an election type or a partition that cannot be right before anything is sent.

Method: the real Admin with its controller stub replaced by a fake that records each request
and answers by rule: partition 0 is elected, 1 needs no election, 2 is refused (preferred
replica not available), 3 is left out of the answer, any other is elected.
"""

from __future__ import annotations

from typing import Any

import pytest

from samsa.client.admin import Admin, ElectionError
from samsa.client.errors import TopicError
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

CODES = {
    0: ErrorCode.NONE,
    1: ErrorCode.ELECTION_NOT_NEEDED,
    2: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
}


class FakeController:
    def __init__(self) -> None:
        self.asked: list[c.ElectLeadersRequest] = []

    def ElectLeaders(self, request: Any, timeout: float) -> Any:
        self.asked.append(request)
        answer = c.ElectLeadersResponse()
        for item in request.partitions:
            if item.partition != 3:
                code = CODES.get(item.partition, ErrorCode.NONE)
                message = "" if code == ErrorCode.NONE else f"{item.topic}-{item.partition}: no"
                answer.partitions.add(
                    topic=item.topic,
                    partition=item.partition,
                    error_code=code,
                    error_message=message,
                )
        return answer


@pytest.fixture
def controller() -> FakeController:
    return FakeController()


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch, controller: FakeController) -> Admin:
    admin = Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 2000})
    monkeypatch.setattr(admin._controller._metadata, "stub", lambda endpoint: controller)
    return admin


def test_elected_and_not_needed_are_outcomes(admin: Admin, controller: FakeController) -> None:
    results = admin.elect_leaders("preferred", [("t", 0), ("t", 1), ("t", 0)])
    assert results[("t", 0)] is None
    not_needed = results[("t", 1)]
    assert not_needed is not None and not_needed.code == ErrorCode.ELECTION_NOT_NEEDED
    Partition = c.ElectLeadersRequest.Partition
    assert controller.asked == [
        c.ElectLeadersRequest(
            election_type=c.ELECTION_TYPE_PREFERRED,
            partitions=[Partition(topic="t", partition=0), Partition(topic="t", partition=1)],
        )
    ], "each partition asked once"


def test_a_refusal_raises_with_every_outcome(admin: Admin) -> None:
    with pytest.raises(ElectionError) as refused:
        admin.elect_leaders("unclean", [("t", 0), ("t", 1), ("t", 2), ("t", 3)])
    error = refused.value
    assert isinstance(error, TopicError)
    assert error.code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE and "t-2" in str(error)
    assert sorted(error.errors) == [("t", 2), ("t", 3)]
    assert error.errors[("t", 3)].code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "partition t-3" in str(error.errors[("t", 3)]), "a left-out partition is named"
    assert list(error.results) == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    assert error.results[("t", 0)] is None


def test_none_asks_for_every_partition_and_nothing_asks_nothing(
    admin: Admin, controller: FakeController
) -> None:
    assert admin.elect_leaders("unclean") == {}
    assert controller.asked == [c.ElectLeadersRequest(election_type=c.ELECTION_TYPE_UNCLEAN)]
    assert admin.elect_leaders("unclean", []) == {}
    assert len(controller.asked) == 1, "an empty list sends nothing (on the wire it means all)"


def test_many_partitions_are_split(admin: Admin, controller: FakeController) -> None:
    count = limits.admin_request_items_max + 1
    results = admin.elect_leaders("preferred", [("t", 0)] + [("u", p) for p in range(4, count + 3)])
    assert [len(r.partitions) for r in controller.asked] == [limits.admin_request_items_max, 1]
    assert len(results) == count and all(outcome is None for outcome in results.values())


@pytest.mark.parametrize(
    ("election_type", "partitions", "words"),
    [
        ("PREFERRED ", None, "election type"),
        ("clean", None, "election type"),
        (None, None, "election type"),
        ("preferred", [("t", -1)], "is not a partition"),
        ("preferred", [("t", True)], "is not a partition"),
        ("unclean", ["t-0"], "is not a partition"),
    ],
)
def test_bad_arguments_are_refused_before_sending(
    admin: Admin, controller: FakeController, election_type: Any, partitions: Any, words: str
) -> None:
    with pytest.raises(TopicError) as refused:
        admin.elect_leaders(election_type, partitions)
    assert refused.value.code == ErrorCode.INVALID_REQUEST and words in str(refused.value)
    assert controller.asked == []
