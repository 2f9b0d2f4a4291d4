"""Goal: a controller that won the Raft election but is not active yet (its barrier entry is not
applied) answers a write NOT_CONTROLLER without naming an active controller. It named itself:
the answer said "I am not the controller, the controller is me", and a member or client that
follows the named controller retried the same one.

Method: the servicer's `_write` over a real driver that leads the Raft quorum but is not active
(no quorum: the write is refused before anything is proposed).
"""

from __future__ import annotations

import asyncio

from samsa.common.errors import ErrorCode
from samsa.services.controller import servicer
from samsa.services.controller.driver import ControllerDriver
from samsa.services.controller.quorum import Leadership
from samsa.v1 import controller_pb2 as c


def _service(driver: ControllerDriver) -> servicer.ControllerServicer:
    service = object.__new__(servicer.ControllerServicer)
    service.driver = driver
    service.controller_endpoints = {1: "h:1", 2: "h:2"}
    service.controller_internal_endpoints = {2: "h:12"}
    return service


def _write_answer(leadership: Leadership) -> c.RegisterBrokerResponse:
    """What a write is answered by controller 1 (of two, a and b) under `leadership`."""

    async def run() -> c.RegisterBrokerResponse:
        driver = ControllerDriver(node_id=1, raft_address_to_node={"a": 1, "b": 2})
        driver.leadership = leadership
        return await _service(driver)._write(c.RegisterBrokerResponse, lambda image: None)

    return asyncio.run(run())


def test_an_elected_but_inactive_controller_names_no_active_controller() -> None:
    response = _write_answer(Leadership(is_leader=True, leader_address="a", term=3))
    assert response.status.error_code == ErrorCode.NOT_CONTROLLER
    assert not response.status.HasField("active_controller")


def test_a_follower_names_the_leader_it_follows() -> None:
    response = _write_answer(Leadership(is_leader=False, leader_address="b", term=3))
    assert response.status.error_code == ErrorCode.NOT_CONTROLLER
    assert response.status.active_controller.node_id == 2
    assert response.status.active_controller.endpoint == "h:2"
    # and its internal listener, for members that dial the controllers there
    assert response.status.active_controller.internal_endpoint == "h:12"
