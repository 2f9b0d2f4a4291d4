"""Goal: a leader whose write did not commit (timed out, or failed without losing the Raft
leadership) becomes active again once a new barrier commits, instead of answering
NOT_CONTROLLER for ever while every other controller follows it.

Method: a real `ControllerDriver` over a fake quorum that applies batches at once on the loop,
except one write it fails (as pysyncobj reports a commit that did not happen); the Raft
leadership never changes, as when a slow quorum recovers before the leader's fallback.
"""

from __future__ import annotations

import asyncio

from pysyncobj.config import FAIL_REASON

from samsa.metadata.replay import replay
from samsa.services.controller import control_plane
from samsa.services.controller.driver import ControllerDriver, NotControllerError
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.quorum import ApplyOutcome, Leadership
from samsa.v1 import controller_pb2, metadata_pb2


class FakeQuorum:
    """Applies every payload at once; fails the next write when told to."""

    def __init__(self, driver: ControllerDriver) -> None:
        self.driver = driver
        self.fail_next_write = False

    def submit(self, payload: bytes, callback) -> None:
        loop = asyncio.get_running_loop()
        if not payload:
            loop.call_soon(callback, ApplyOutcome.BARRIER, FAIL_REASON.SUCCESS)
            return
        if self.fail_next_write:
            self.fail_next_write = False
            loop.call_soon(callback, None, FAIL_REASON.DISCARDED)
            return
        batch = metadata_pb2.MetadataRecordBatch()
        batch.ParseFromString(payload)
        image = replay(self.driver.image, batch)
        loop.call_soon(self.driver.on_batch_applied, batch, image)
        loop.call_soon(callback, ApplyOutcome.APPLIED, FAIL_REASON.SUCCESS)


def _register(broker_id: int):
    request = controller_pb2.RegisterBrokerRequest(
        broker_id=broker_id, incarnation_id=f"i{broker_id}", endpoint=f"h:{broker_id}"
    )
    return lambda image: control_plane.register_broker(
        image, request, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=1000
    )


async def _wait_active(driver: ControllerDriver) -> None:
    deadline = asyncio.get_running_loop().time() + 2.0
    while not driver.active:
        assert asyncio.get_running_loop().time() < deadline, "the leader never became active"
        await asyncio.sleep(0.01)


def test_a_leader_whose_write_failed_becomes_active_again() -> None:
    async def run() -> None:
        driver = ControllerDriver(node_id=1, raft_address_to_node={})
        quorum = FakeQuorum(driver)
        driver.quorum = quorum  # type: ignore[assignment]
        driver.on_leadership(Leadership(is_leader=True, leader_address="a", term=1))
        await _wait_active(driver)
        await driver.write(_register(1))
        quorum.fail_next_write = True
        try:
            await driver.write(_register(2))
        except NotControllerError:
            pass
        else:
            raise AssertionError("a write that did not commit was answered")
        await _wait_active(driver)  # still the Raft leader: a new barrier reactivates it
        written = await driver.write(_register(2))
        assert written.metadata_offset == driver.image.end_offset
        assert 2 in driver.image.brokers

    asyncio.run(run())


class SilentQuorum(FakeQuorum):
    """Commits barriers; writes never come back (the leader was cut off from its quorum)."""

    def submit(self, payload: bytes, callback) -> None:
        if not payload:
            super().submit(payload, callback)


def test_a_write_in_flight_when_leadership_is_lost_is_answered_not_controller_at_once() -> None:
    async def run() -> None:
        driver = ControllerDriver(node_id=1, raft_address_to_node={"b": 2})
        driver.quorum = SilentQuorum(driver)  # type: ignore[assignment]
        driver.on_leadership(Leadership(is_leader=True, leader_address="a", term=1))
        await _wait_active(driver)
        loop = asyncio.get_running_loop()
        writes = [asyncio.create_task(driver.write(_register(n))) for n in (1, 2)]
        await asyncio.sleep(0.05)
        started = loop.time()
        driver.on_leadership(Leadership(is_leader=False, leader_address="b", term=2))
        for write in writes:
            try:
                await asyncio.wait_for(write, 2.0)
            except NotControllerError as error:
                assert error.active_node_id == 2
            else:
                raise AssertionError("a write that did not commit was answered")
        # Not the 10 s commit timeout: the writers learn of the new leader at once.
        assert loop.time() - started < 1.0

    asyncio.run(run())
