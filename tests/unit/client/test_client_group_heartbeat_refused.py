"""Goal: a heartbeat the coordinator refuses for its size (RESOURCE_EXHAUSTED: over
group_heartbeat_request_bytes_max, e.g. a subscription naming thousands of long topics) fails
the member for good with the coordinator's message, as OffsetCommit's refusal does
(group_coordinator_calls.REFUSED_AS_SENT): the same heartbeat is refused every time, so taking it
for a network failure retries it (and FindCoordinator) for ever while poll() returns nothing and
never raises.

Method: GroupDriver with the coordinator's stub replaced by a fake that refuses every heartbeat
as the servicer does; one join heartbeat sent through the driver; no network. A heartbeat that
found the coordinator unavailable is still retried.
"""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_driver import GroupDriver, now_ms
from samsa.client.group_member import MemberState, Subscription
from samsa.client.rebalance import member_error
from samsa.v1 import coordinator_pb2 as c

CONFIG = ConsumerConfig.from_dict({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
MESSAGE = "the heartbeat is 300000 bytes, over 262144: subscribe by regex"


class RefusingCoordinator:
    """Refuses every heartbeat with `status`, as the servicer refuses one over its byte limit."""

    def __init__(self, status: grpc.StatusCode = grpc.StatusCode.RESOURCE_EXHAUSTED) -> None:
        self.heartbeats = 0
        self.status = status

    async def ConsumerGroupHeartbeat(
        self, request: c.ConsumerGroupHeartbeatRequest, timeout: float
    ) -> c.ConsumerGroupHeartbeatResponse:
        self.heartbeats += 1
        raise grpc.aio.AioRpcError(self.status, grpc.aio.Metadata(), grpc.aio.Metadata(), MESSAGE)


def one_heartbeat_to(coordinator: RefusingCoordinator) -> GroupDriver:
    """A driver whose member sent its join heartbeat to `coordinator`."""
    driver = GroupDriver(
        CONFIG, threading.Lock(), FetchState(CONFIG), ["127.0.0.1:1"], AioChannels(), lambda: None
    )
    driver._coordinator._endpoint = "coordinator"
    driver._coordinator.stub = lambda endpoint: coordinator  # type: ignore[method-assign,assignment,return-value]
    driver.join(Subscription(topics=frozenset({"t"})))

    async def one_heartbeat() -> None:
        driver._wake = asyncio.Event()
        request = driver.member.heartbeat_request(now_ms())
        assert request is not None
        await driver._heartbeat("coordinator", request)

    asyncio.run(one_heartbeat())
    assert coordinator.heartbeats == 1
    return driver


@pytest.mark.parametrize(
    "status", [grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT]
)
def test_a_heartbeat_refused_as_sent_fails_the_member(status: grpc.StatusCode) -> None:
    driver = one_heartbeat_to(RefusingCoordinator(status))
    # The member must fail for good (poll() then raises the coordinator's message), not wait
    # to send the same refused heartbeat again.
    assert driver.member.state is MemberState.FATAL, driver.member.state
    assert driver.member.error is not None and MESSAGE in driver.member.error[1]
    error = member_error(driver.member)
    assert error is not None and MESSAGE in str(error)


def test_a_heartbeat_to_an_unavailable_coordinator_is_retried() -> None:
    driver = one_heartbeat_to(RefusingCoordinator(grpc.StatusCode.UNAVAILABLE))
    assert driver.member.state is MemberState.JOINING
    assert driver.member.heartbeat_due_ms() is not None, "the join heartbeat is due again"
