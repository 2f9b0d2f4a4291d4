"""Goal: the DescribeQuorum adapter answers only on the active controller: elsewhere, or before
the leader's first replication sample arrived, NOT_CONTROLLER naming the active controller when
known (as a write), so that clients and brokers follow it; on the active one, the pure core's
answer with the observers' heartbeat reports (broker and coordinator kept apart, a negative
offset read as unknown) and the status filled.

Method: the real ControllerServicer over a stand-in driver (no Raft, no gRPC server); its
coroutine awaited directly.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller.control_plane import ClusterDefaults
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.quorum_status import RaftStatus, VoterProgress
from samsa.services.controller.servicer import ControllerServicer
from samsa.v1 import controller_pb2 as c

RAFT = RaftStatus(
    term=5,
    commit_index=12,
    last_index=12,
    followers=(VoterProgress("h:2", 12, True, 900, 1000),),
    sampled_ms=1000,
)


def servicer(*, active: bool, raft: RaftStatus | None) -> ControllerServicer:
    brokers: dict[int, Any] = {3: None}
    coordinators: dict[int, Any] = {3: None}
    image = replace(MetadataImage.empty(), end_offset=30, brokers=brokers)
    image = replace(image, coordinators=coordinators)
    driver = SimpleNamespace(
        node_id=1,
        active=active,
        active_node_id=1 if active else 2,
        raft_status=raft,
        image=image,
        raft_address_to_node={"h:1": 1, "h:2": 2},
    )
    return ControllerServicer(
        driver=driver,  # type: ignore[arg-type]
        liveness=BrokerLiveness(),
        controller_endpoints={1: "a:1", 2: "b:2"},
        defaults=ClusterDefaults(),
        cluster_id="c1",
        member_key=b"k" * 32,
    )


def ask(target: ControllerServicer) -> c.DescribeQuorumResponse:
    return asyncio.run(target.DescribeQuorum(c.DescribeQuorumRequest(), None))  # type: ignore[no-any-return]


def test_a_controller_that_is_not_active_names_the_active_one() -> None:
    answer = ask(servicer(active=False, raft=None))
    assert answer.status.error_code == ErrorCode.NOT_CONTROLLER
    assert answer.status.active_controller.endpoint == "b:2"
    assert not answer.voters and not answer.observers


def test_the_active_one_without_a_sample_yet_asks_for_a_retry() -> None:
    answer = ask(servicer(active=True, raft=None))
    assert answer.status.error_code == ErrorCode.NOT_CONTROLLER


def test_the_active_one_answers_with_its_observers_reports() -> None:
    target = servicer(active=True, raft=RAFT)
    target.broker_observed(c.BrokerHeartbeatRequest(broker_id=3, metadata_offset=30))
    target.coordinator_observed(c.CoordinatorHeartbeatRequest(coordinator_id=3, metadata_offset=-5))
    answer = ask(target)
    assert answer.status.error_code == ErrorCode.NONE and answer.status.metadata_offset == 30
    assert (answer.leader_id, answer.leader_epoch, answer.high_watermark) == (1, 5, 12)
    assert [(v.node_id, v.lag) for v in answer.voters] == [(1, 0), (2, 0)]
    broker, coordinator = answer.observers
    assert (broker.kind, broker.log_end_offset, broker.lag) == (c.QUORUM_REPLICA_KIND_BROKER, 30, 0)
    assert broker.last_caught_up_timestamp_ms == broker.last_fetch_timestamp_ms > 0
    assert coordinator.kind == c.QUORUM_REPLICA_KIND_COORDINATOR
    assert (coordinator.log_end_offset, coordinator.lag) == (-1, -1)
