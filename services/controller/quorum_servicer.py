"""The controller's DescribeQuorum RPC, as a mixin of ControllerServicer (servicer.py), and the
observers' reports it reads, which the servicer's heartbeat handlers feed.

Only the active controller answers: it alone is the Raft leader with a sample of its followers'
progress (`ControllerDriver.raft_status`, posted by quorum.py once a tick period) and it alone
receives the brokers' and coordinators' heartbeats. Another controller answers NOT_CONTROLLER
naming the active one, as for a write, so that clients follow it there (brokers forward the
call). The answer itself is quorum_status.describe_quorum's, a pure function.
"""

from __future__ import annotations

import time
from typing import Any

from samsa.common.errors import ErrorCode
from samsa.services.controller.quorum_status import (
    BROKER,
    COORDINATOR,
    ObserverReports,
    describe_quorum,
)
from samsa.v1 import controller_pb2


class QuorumRpcs:
    """DescribeQuorum for ControllerServicer, and the observers' heartbeat reports."""

    driver: Any
    cluster_id: str
    _status: Any
    _observers: ObserverReports | None = None

    @property
    def observers(self) -> ObserverReports:
        """The brokers' and coordinators' last heartbeat reports to this controller."""
        if self._observers is None:
            self._observers = ObserverReports()
        return self._observers

    def broker_observed(self, request: controller_pb2.BrokerHeartbeatRequest) -> None:
        """An accepted broker heartbeat: its applied metadata offset, now."""
        self._report(BROKER, request.broker_id, request.metadata_offset)

    def coordinator_observed(self, request: controller_pb2.CoordinatorHeartbeatRequest) -> None:
        """An accepted coordinator heartbeat: its applied metadata offset, now."""
        self._report(COORDINATOR, request.coordinator_id, request.metadata_offset)

    def _report(self, kind: int, node_id: int, metadata_offset: int) -> None:
        now_ms = int(time.time() * 1000)
        leader_offset = self.driver.image.end_offset
        self.observers.report(kind, node_id, max(-1, metadata_offset), now_ms, leader_offset)

    async def DescribeQuorum(self, request, context):  # type: ignore[no-untyped-def]
        raft = self.driver.raft_status
        if not self.driver.active or raft is None:
            response = controller_pb2.DescribeQuorumResponse()
            message = (
                f"controller {self.driver.node_id} is not the active controller, which alone "
                "knows the quorum's replication state; ask the active one"
            )
            response.status.CopyFrom(self._status(ErrorCode.NOT_CONTROLLER, message))
            return response
        response = describe_quorum(
            raft,
            leader_id=self.driver.node_id,
            node_of=self.driver.raft_address_to_node,
            image=self.driver.image,
            observers=self.observers,
            cluster_id=self.cluster_id,
        )
        response.status.CopyFrom(self._status())
        return response
