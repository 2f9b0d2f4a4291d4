"""Goal: SIGTERM stops a coordinator in bounded time when no controller answers, whatever
coordinator.heartbeat.interval.ms is. Each heartbeat waited max(1 s, the interval) for a
controller: its controlled shutdown (`leave`, bounded by LEAVE_TIMEOUT_S) took the whole interval
instead, and the heartbeat loop, asked to stop, finished the heartbeat it was waiting on first,
so with a 60 s interval the coordinator took two minutes to stop (past any container's grace).

Method: CoordinatorMembership over a controller channel that never answers (each write takes its
whole timeout and fails, as ControllerChannel does when no controller answers).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samsa.services.coordinator import coordinator_membership
from samsa.services.coordinator.coordinator_membership import CoordinatorMembership
from samsa.services.runtime.controller_channel import ControllerUnavailableError


class Unanswered:
    def __init__(self) -> None:
        self.asked: list[float] = []

    async def write(self, method: str, request: Any, timeout_s: float = 5.0) -> Any:
        self.asked.append(timeout_s)
        await asyncio.sleep(timeout_s)
        raise ControllerUnavailableError(method)


def membership(controllers: Unanswered) -> CoordinatorMembership:
    registered = CoordinatorMembership(
        coordinator_id=1,
        endpoint="127.0.0.1:9",
        controllers=controllers,  # type: ignore[arg-type]
        heartbeat_interval_ms=60_000,
        session_timeout_ms=120_000,
        metadata_offset=lambda: 0,
        on_epoch_change=lambda: None,
    )
    registered.coordinator_epoch = 7
    return registered


def test_leaving_waits_for_a_controller_no_longer_than_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(coordinator_membership, "LEAVE_TIMEOUT_S", 0.2)
    controllers = Unanswered()

    async def scenario() -> None:
        await asyncio.wait_for(membership(controllers).leave(), 1)

    asyncio.run(scenario())
    assert controllers.asked and max(controllers.asked) <= 0.2


def test_the_heartbeat_loop_stops_without_finishing_a_heartbeat_in_flight() -> None:
    controllers = Unanswered()

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(membership(controllers).run(stop))
        for _ in range(500):  # until a heartbeat is in flight (at most 5 s)
            if controllers.asked:
                break
            await asyncio.sleep(0.01)
        assert controllers.asked, "a heartbeat is in flight"
        stop.set()
        await asyncio.wait_for(running, 1)

    asyncio.run(scenario())
