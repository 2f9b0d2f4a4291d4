"""Goal: a broker's controlled shutdown never races its own routine heartbeat. The heartbeat
loop's call (want_shutdown=False) may still be retried across controllers when `shutdown()`
begins; sent after it, the shutdown's heartbeat fenced the broker and then the routine one
landed and unfenced it again (the controller now refuses that too, KIP-841:
tests/unit/controller/test_controlled_shutdown_mark.py). `shutdown()` lets the call in flight land
before it sends want_shutdown, and every heartbeat after carries it.

Method: MetadataFollower over a fake controller channel whose first routine heartbeat is held
until the test releases it; the fake records when each heartbeat starts and lands.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.unit.broker.test_metadata_follower_failure import FakeControllers, follower_over


class HeldControllers(FakeControllers):
    """Holds the first routine heartbeat in flight until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.events: list[tuple[str, bool]] = []

    async def write(self, method: str, request: Any, timeout_s: float = 5.0) -> Any:
        if method == "BrokerHeartbeat":
            self.events.append(("sent", request.want_shutdown))
            if not request.want_shutdown and not self.held.is_set():
                self.held.set()
                await self.release.wait()
        response = await super().write(method, request, timeout_s)
        if method == "BrokerHeartbeat":
            self.events.append(("landed", request.want_shutdown))
        return response


def test_shutdown_lets_the_routine_heartbeat_in_flight_land_before_asking_to_be_fenced() -> None:
    async def scenario() -> list[tuple[str, bool]]:
        controllers = HeldControllers()
        follower = follower_over(controllers)
        stop = asyncio.Event()
        running = asyncio.create_task(follower.run(stop))
        await asyncio.wait_for(controllers.held.wait(), 1)
        shutdown = asyncio.create_task(follower.shutdown())
        for _ in range(10):
            await asyncio.sleep(0)
        assert ("sent", True) not in controllers.events, "want_shutdown sent past the routine"
        controllers.release.set()
        await asyncio.wait_for(shutdown, 1)
        stop.set()
        await asyncio.wait_for(running, 1)
        return controllers.events

    events = asyncio.run(scenario())
    assert events[:2] == [("sent", False), ("landed", False)], events
    assert all(want_shutdown for _, want_shutdown in events[2:]), events
