"""Goal: while an election runs, two controllers may each answer NOT_CONTROLLER naming the other
(each still follows the other's earlier term). A member's write (`ControllerChannel.write`:
heartbeats, AlterPartition, registration) must follow such redirects with its backoff, not call
the two in a tight loop until its deadline, which floods both controllers from every broker.

Method: a ControllerChannel over two controllers whose fake stubs redirect to each other.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samsa.common.errors import ErrorCode
from samsa.services.runtime.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.services.runtime.member_auth import MemberSigner
from samsa.v1 import controller_pb2 as c

A, B = "127.0.0.1:1", "127.0.0.1:2"


class Redirecting:
    def __init__(self, node_id: int, other: str) -> None:
        self.node_id = node_id
        self.other = other
        self.calls = 0

    async def BrokerHeartbeat(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self.calls += 1
        response = c.BrokerHeartbeatResponse()
        response.status.error_code = ErrorCode.NOT_CONTROLLER  # type: ignore[assignment]
        response.status.active_controller.node_id = 3 - self.node_id
        response.status.active_controller.endpoint = self.other
        return response


def test_controllers_naming_each_other_are_not_called_in_a_tight_loop() -> None:
    async def scenario() -> None:
        channel = ControllerChannel([A, B], MemberSigner(b"k" * 32, 1))
        first, second = Redirecting(1, B), Redirecting(2, A)
        channel._stubs = {A: first, B: second}  # type: ignore[dict-item]
        with pytest.raises(ControllerUnavailableError):
            await channel.write("BrokerHeartbeat", c.BrokerHeartbeatRequest(), 0.5)
        # With the backoff (0.1 s, growing to 0.25 s) about five calls fit in 0.5 s.
        assert first.calls + second.calls <= 12, (first.calls, second.calls)
        await channel.close()

    asyncio.run(scenario())
