"""Goal: a member's reads and writes leave a controller that does not answer. A controller that
hangs (a frozen process, a black-holed host: the call ends DEADLINE_EXCEEDED, not UNAVAILABLE)
must not hold every later read of a broker or coordinator (`ControllerChannel.read`): the next
read goes to the next controller, so the metadata log keeps flowing from the quorum's others;
nor every later write (`ControllerChannel.write`), so heartbeats reach the active controller.

Method: a ControllerChannel over two controllers whose stubs are fakes: the first never answers
within the deadline, the second answers at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from samsa.services.runtime.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.services.runtime.member_auth import MemberSigner
from samsa.v1 import controller_pb2 as c


class HungController:
    def __init__(self) -> None:
        self.calls = 0

    async def FetchMetadata(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self.calls += 1
        await asyncio.sleep(timeout)
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata()
        )


class LiveController:
    def __init__(self) -> None:
        self.calls = 0

    async def FetchMetadata(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self.calls += 1
        return c.FetchMetadataResponse(committed_end_offset=7)


def test_a_read_after_a_controller_hung_goes_to_another_controller() -> None:
    async def scenario() -> None:
        channel = ControllerChannel(["127.0.0.1:1", "127.0.0.1:2"], MemberSigner(b"k" * 32, 1))
        hung, live = HungController(), LiveController()
        channel._stubs = {"127.0.0.1:1": hung, "127.0.0.1:2": live}  # type: ignore[dict-item]
        request = c.FetchMetadataRequest()
        with pytest.raises(grpc.aio.AioRpcError):
            await channel.read("FetchMetadata", request, 0.05)
        answers = [await channel.read("FetchMetadata", request, 0.05) for _ in range(3)]
        assert [a.committed_end_offset for a in answers] == [7, 7, 7]
        assert hung.calls == 1  # stays with the controller that answered
        await channel.close()

    asyncio.run(scenario())


class HungWrites:
    def __init__(self) -> None:
        self.calls = 0

    async def BrokerHeartbeat(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self.calls += 1
        await asyncio.sleep(timeout)
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata()
        )


class ActiveController:
    async def BrokerHeartbeat(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        response = c.BrokerHeartbeatResponse()
        response.status.metadata_offset = 3
        return response


def test_a_write_after_a_controller_hung_goes_to_another_controller() -> None:
    # Writes with no active controller known started from the first controller listed, every
    # time: a hung first controller took each heartbeat's whole deadline, the broker never
    # reached the active one, and its session expired (every leadership moved).
    async def scenario() -> None:
        channel = ControllerChannel(["127.0.0.1:1", "127.0.0.1:2"], MemberSigner(b"k" * 32, 1))
        hung = HungWrites()
        channel._stubs = {"127.0.0.1:1": hung, "127.0.0.1:2": ActiveController()}  # type: ignore[dict-item]
        request = c.BrokerHeartbeatRequest(broker_id=1)
        with pytest.raises(ControllerUnavailableError):
            await channel.write("BrokerHeartbeat", request, 0.05)
        for _ in range(3):
            answer = await channel.write("BrokerHeartbeat", request, 0.05)
            assert answer.status.metadata_offset == 3
        assert hung.calls == 1
        await channel.close()

    asyncio.run(scenario())
