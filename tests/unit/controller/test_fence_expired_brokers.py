"""Goal: the session-expiry loop fences only brokers still silent when its write is decided. It
chose the brokers before waiting for the write lock (behind another write's commit, up to the
10 s commit timeout), so a broker whose heartbeat arrived meanwhile was fenced anyway: its
leaderships moved away and came back at its next heartbeat, for nothing.

Method: `main._fence_expired_brokers` over a fake driver whose write lets a heartbeat arrive
before it generates the batch (as the write lock's wait does), with the real liveness and
control plane.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import control_plane as cp
from samsa.services.controller import main
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c

TIMEOUT_MS = 1000


def _live_broker() -> MetadataImage:
    image = MetadataImage.empty()
    request = c.RegisterBrokerRequest(broker_id=1, incarnation_id="a", endpoint="h:1")
    result = cp.register_broker(
        image, request, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=TIMEOUT_MS
    )
    image = replay(image, make_batch(image, result.records, 1))
    beat = c.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=image.brokers[1].broker_epoch, metadata_offset=image.end_offset
    )
    return replay(image, make_batch(image, cp.broker_heartbeat(image, beat).records, 1))


class SilentDuringTheWait:
    """A driver whose write waits (for the lock) while `meanwhile` happens, then decides over
    its image and keeps the decision; here nothing happens meanwhile."""

    def __init__(self, image: MetadataImage, liveness: BrokerLiveness) -> None:
        self.active = True
        self.image = image
        self.liveness = liveness
        self.decided: list[Any] = []

    def meanwhile(self) -> None:
        pass

    async def write(self, generate: Any) -> Any:
        self.meanwhile()
        decision = generate(self.image)
        self.decided.append(decision)
        return decision


class HeartbeatDuringTheWait(SilentDuringTheWait):
    """Broker 1's heartbeat arrives while the write waits."""

    def meanwhile(self) -> None:
        self.liveness.heartbeat(1, self.image.brokers[1].broker_epoch, main._now_ms())


def first_fence_decision(
    monkeypatch: pytest.MonkeyPatch, driver_type: type[SilentDuringTheWait]
) -> Any:
    """Runs the session-expiry loop over a `driver_type` driver and broker 1, silent for five
    session timeouts, until the loop decides its first write; returns that decision."""
    monkeypatch.setattr(main, "LIVENESS_CHECK_INTERVAL_S", 0.001)

    async def run() -> Any:
        liveness = BrokerLiveness()
        image = _live_broker()
        liveness.heartbeat(1, image.brokers[1].broker_epoch, main._now_ms() - 5 * TIMEOUT_MS)
        driver = driver_type(image, liveness)
        loop = asyncio.create_task(main._fence_expired_brokers(driver, liveness, TIMEOUT_MS))  # type: ignore[arg-type]
        deadline = asyncio.get_running_loop().time() + 2.0
        while not driver.decided:
            assert asyncio.get_running_loop().time() < deadline, "the loop never tried to fence"
            await asyncio.sleep(0.001)
        loop.cancel()
        return driver.decided[0]

    return asyncio.run(run())


def test_a_broker_that_heartbeated_while_the_fence_waited_is_not_fenced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decision = first_fence_decision(monkeypatch, HeartbeatDuringTheWait)
    assert list(decision.records) == [], "fenced a broker that had heartbeated"


def test_a_broker_still_silent_is_fenced(monkeypatch: pytest.MonkeyPatch) -> None:
    decision = first_fence_decision(monkeypatch, SilentDuringTheWait)
    fenced = [r.fence_broker.broker_id for r in decision.records if r.HasField("fence_broker")]
    assert fenced == [1]


class CoordinatorHeartbeatDuringTheWait(SilentDuringTheWait):
    """Coordinator 1's heartbeat arrives while the first write waits."""

    def meanwhile(self) -> None:
        if not self.decided:
            epoch = self.image.coordinators[1].coordinator_epoch
            self.liveness.heartbeat(1, epoch, main._now_ms())


def test_a_coordinator_that_heartbeated_while_the_fence_waited_is_not_fenced() -> None:
    async def run() -> None:
        image = MetadataImage.empty()
        request = c.RegisterCoordinatorRequest(coordinator_id=1, incarnation_id="a", endpoint="h")
        registered = cp.register_coordinator(
            image, request, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=TIMEOUT_MS
        )
        image = replay(image, make_batch(image, registered.records, 1))
        liveness = BrokerLiveness()
        epoch = image.coordinators[1].coordinator_epoch
        liveness.heartbeat(1, epoch, main._now_ms() - 5 * TIMEOUT_MS)
        driver = CoordinatorHeartbeatDuringTheWait(image, liveness)
        defaults = cp.ClusterDefaults(coordinator_session_timeout_ms=TIMEOUT_MS)
        await main._coordinator_round(driver, liveness, defaults, random.Random(1))  # type: ignore[arg-type]
        fenced = [
            record
            for decision in driver.decided
            for record in decision.records
            if record.HasField("fence_coordinator")
        ]
        assert fenced == [], "fenced a coordinator that had heartbeated"
        assert liveness.is_alive(1, epoch, main._now_ms(), TIMEOUT_MS), "its session was dropped"

    asyncio.run(run())
