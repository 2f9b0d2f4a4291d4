"""Goal: a listing over the coordinators (groups, transactions: Admin's list calls) is complete or
an error, never silently partial. `CoordinatorCalls.ask_every_live` returns answers only from a
round in which every live coordinator answered; a coordinator that is loading, unreachable or
refuses for now is asked again the next round; a cluster with coordinators but none live is an
error after request.timeout.ms that names each problem; a cluster without coordinators lists
nothing; an answer no retry can change raises at once.

Method: CoordinatorCalls over a fake controller (the DescribeCluster coordinator list) and fake
`ask` functions; no gRPC, no cluster; a 300 ms request timeout and a 10 ms retry backoff.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import pytest
from fake_rpc_error import FakeRpcError

from samsa.client import coordinator_calls
from samsa.client.coordinator_calls import CoordinatorCalls
from samsa.client.group_admin import GroupError
from samsa.common.errors import ErrorCode


@dataclass
class Coordinator:
    coordinator_id: int
    endpoint: str
    is_fenced: bool = False


@dataclass
class Cluster:
    coordinators: list[Coordinator]


class FakeController:
    def __init__(self, coordinators: list[Coordinator]) -> None:
        self.cluster = Cluster(coordinators)

    def describe_cluster(self) -> Cluster:
        return self.cluster


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator_calls, "RETRY_BACKOFF_S", 0.01)


def calls(*coordinators: Coordinator) -> CoordinatorCalls:
    return CoordinatorCalls(None, ["b:1"], FakeController(list(coordinators)), 300)  # type: ignore[arg-type]


def test_a_coordinator_that_is_not_ready_is_asked_again_until_all_answer_in_one_round():
    rounds: dict[int, int] = {1: 0, 2: 0}

    def ask(coordinator, timeout_s):  # type: ignore[no-untyped-def]
        rounds[coordinator.coordinator_id] += 1
        if coordinator.coordinator_id == 2 and rounds[2] < 3:
            return None, "partitions [0] are loading"
        return f"answer of {coordinator.coordinator_id}", None

    answers = calls(Coordinator(1, "a"), Coordinator(2, "b")).ask_every_live(ask, "x", GroupError)
    assert answers == ["answer of 1", "answer of 2"]
    assert rounds == {1: 3, 2: 3}, "every coordinator is asked again in each round"


def test_an_unreachable_coordinator_past_the_timeout_is_an_error_naming_it():
    def ask(coordinator, timeout_s):  # type: ignore[no-untyped-def]
        if coordinator.coordinator_id == 2:
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused")
        return "fine", None

    with pytest.raises(GroupError) as raised:
        calls(Coordinator(1, "a"), Coordinator(2, "b")).ask_every_live(ask, "groups", GroupError)
    assert raised.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "could not list every coordinator's groups within request.timeout.ms (300)" in str(
        raised.value
    )
    assert "coordinator 2: UNAVAILABLE: connection refused" in str(raised.value)


def test_fenced_coordinators_only_is_an_error_and_no_coordinators_lists_nothing():
    def ask(coordinator, timeout_s):  # type: ignore[no-untyped-def]
        raise AssertionError("a fenced coordinator is never asked")

    with pytest.raises(GroupError, match="no coordinator is live"):
        calls(Coordinator(1, "a", is_fenced=True)).ask_every_live(ask, "groups", GroupError)
    assert calls().ask_every_live(ask, "groups", GroupError) == []


def test_an_answer_no_retry_can_change_raises_at_once():
    asked = []

    def ask(coordinator, timeout_s):  # type: ignore[no-untyped-def]
        asked.append(coordinator.coordinator_id)
        raise GroupError("not allowed", ErrorCode.INVALID_GROUP_ID)

    with pytest.raises(GroupError, match="not allowed"):
        calls(Coordinator(1, "a"), Coordinator(2, "b")).ask_every_live(ask, "groups", GroupError)
    assert asked == [1]


@pytest.mark.parametrize(
    "code", [grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT]
)
def test_a_listing_refused_for_what_it_asks_raises_at_once(code: grpc.StatusCode) -> None:
    """A filter over the coordinators' limits (more than admin_request_items_max producer ids)
    or invalid is refused by every coordinator alike: it is not asked again until
    request.timeout.ms and then reported as COORDINATOR_NOT_AVAILABLE."""
    asked = []

    def ask(coordinator, timeout_s):  # type: ignore[no-untyped-def]
        asked.append(coordinator.coordinator_id)
        raise FakeRpcError(code, "1001 producer id filters in one request; send at most 1000")

    with pytest.raises(GroupError, match="send at most 1000") as raised:
        calls(Coordinator(1, "a"), Coordinator(2, "b")).ask_every_live(ask, "groups", GroupError)
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    assert asked == [1]
