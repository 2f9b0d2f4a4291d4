"""Goal: the controller's UnregisterBroker adapter forgets the broker's session once the
unregistration is committed — so no later fencing decision or liveness check looks at it — and
keeps it when the request is refused.

Method: the real ControllerServicer over a stand-in driver that runs the pure decision on an
image built with the real control plane and replays its records, as the real driver would after
the commit; sessions in a real BrokerLiveness.
"""

from __future__ import annotations

import asyncio
from typing import Any

from test_control_plane import cluster, commit

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.services.controller import servicer
from samsa.services.controller.driver import Written
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c


class CommittingDriver:
    """Runs `generate` on its image and commits the records at once (no quorum)."""

    node_id, active, active_node_id = 1, True, 1

    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    async def write(self, generate: Any) -> Written[Any]:
        decision = generate(self.image)
        self.image = commit(self.image, decision)
        return Written(decision.response, self.image.end_offset)


def unregister(
    image: MetadataImage, sessions: BrokerLiveness, broker_id: int
) -> c.UnregisterBrokerResponse:
    service = object.__new__(servicer.ControllerServicer)
    service.driver = CommittingDriver(image)  # type: ignore[assignment]
    service.liveness = sessions
    service.defaults = cp.ClusterDefaults(broker_session_timeout_ms=1000)
    service.controller_endpoints, service.controller_internal_endpoints = {1: "h:1"}, {}
    request = c.UnregisterBrokerRequest(broker_id=broker_id)
    return asyncio.run(service.UnregisterBroker(request, None))


def test_a_committed_unregistration_forgets_the_session() -> None:
    image = commit(cluster(2), cp.fence_brokers(cluster(2), [2]))
    sessions = BrokerLiveness()
    sessions.heartbeat(2, image.brokers[2].broker_epoch, now_ms=0)  # long ago
    answer = unregister(image, sessions, 2)
    assert answer.status.error_code == ErrorCode.NONE, answer.status.error_message
    assert answer.status.metadata_offset == image.end_offset + 1
    assert sessions.expired(now_ms=10**13, timeout_ms=1000) == []


def test_a_refused_unregistration_keeps_the_session() -> None:
    image = cluster(2)  # broker 2 unfenced: running
    sessions = BrokerLiveness()
    sessions.heartbeat(2, image.brokers[2].broker_epoch, now_ms=0)
    answer = unregister(image, sessions, 2)
    assert answer.status.error_code == ErrorCode.INVALID_REQUEST
    assert sessions.expired(now_ms=10**13, timeout_ms=1000) == [2]
