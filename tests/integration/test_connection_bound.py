"""Goal: a service serves at most `max.connections` client connections at once; one more is
closed as it is accepted (the client sees UNAVAILABLE), the connections already served go on,
and a slot freed by a client that leaves is served again. Unbounded, a stranger opening
connections in a loop ran a process out of file descriptors.

Method: a real controller (1 controller, no broker) started with SAMSA_MAX_CONNECTIONS=8 in its
environment; gRPC channels each on a connection of its own (a local subchannel pool), each
proven served by a DescribeCluster. The cluster helpers may hold a connection or two of their
own, so the test counts how many it got before the first refusal, not exactly 8.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster

from samsa.v1 import controller_pb2, controller_pb2_grpc

pytestmark = pytest.mark.timeout(120)

BOUND = 8
TRIES = BOUND + 6
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


async def served(channel: grpc.aio.Channel) -> bool:
    stub = controller_pb2_grpc.ControllerServiceStub(channel)
    try:
        await stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=5)
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        return False
    return True


async def fill_and_free(endpoint: str) -> tuple[int, bool, bool]:
    """(connections served before the first refusal, whether the served ones still answer,
    whether a new one is served once one left)."""
    channels: list[grpc.aio.Channel] = []
    try:
        accepted = 0
        for _ in range(TRIES):
            channel = grpc.aio.insecure_channel(endpoint, options=OWN_CONNECTION)
            channels.append(channel)
            if not await served(channel):
                break
            accepted += 1
        still = all([await served(channel) for channel in channels[:accepted]])
        await channels[0].close()
        deadline = time.monotonic() + 30
        again = False
        while not again and time.monotonic() < deadline:
            newcomer = grpc.aio.insecure_channel(endpoint, options=OWN_CONNECTION)
            channels.append(newcomer)
            again = await served(newcomer)
            if not again:
                await asyncio.sleep(0.2)
        return accepted, still, again
    finally:
        for channel in channels:
            await channel.close()


def test_connections_beyond_the_bound_are_refused_and_freed_slots_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMSA_MAX_CONNECTIONS", str(BOUND))
    with local_cluster(tmp_path, controllers=1, brokers=0) as cluster:
        endpoint = cluster.spec.controllers[0].endpoint
        accepted, still, again = asyncio.run(fill_and_free(endpoint))
    assert BOUND - 3 <= accepted <= BOUND, f"{accepted} connections served before a refusal"
    assert still, "a connection served before the bound was reached stopped answering"
    assert again, "a slot a client left was never served again"
