"""Goal: Admin.describe_metadata_quorum asks the active controller (following a NOT_CONTROLLER
answer to the controller it names, as writes do) and reads the answer into Kafka's QuorumInfo
shape: leader, epoch, high watermark, the voters (leader first) and observers as ReplicaState,
with -1 times read as None, and the tool's MaxFollowerLag / MaxFollowerLagTimeMs figures.

Method: the real Admin with its controller stubs replaced by stand-ins per endpoint: the
bootstrap one is not active and names the other, which answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from samsa.client.admin import Admin, QuorumInfo, ReplicaState
from samsa.client.metadata_quorum import quorum_info_of
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

ACTIVE = "127.0.0.1:2"


def answer() -> c.DescribeQuorumResponse:
    response = c.DescribeQuorumResponse(
        cluster_id="c1", leader_id=1, leader_epoch=3, high_watermark=40, metadata_offset=90
    )
    voter = c.QUORUM_REPLICA_KIND_CONTROLLER
    response.voters.add(
        node_id=1,
        kind=voter,
        log_end_offset=41,
        last_fetch_timestamp_ms=5000,
        last_caught_up_timestamp_ms=5000,
        connected=True,
    )
    response.voters.add(
        node_id=2,
        kind=voter,
        log_end_offset=41,
        last_fetch_timestamp_ms=4990,
        last_caught_up_timestamp_ms=4950,
        connected=True,
    )
    response.voters.add(
        node_id=3,
        kind=voter,
        log_end_offset=30,
        lag=11,
        last_fetch_timestamp_ms=-1,
        last_caught_up_timestamp_ms=2000,
    )
    response.observers.add(
        node_id=7,
        kind=c.QUORUM_REPLICA_KIND_BROKER,
        log_end_offset=88,
        lag=2,
        last_fetch_timestamp_ms=4800,
        last_caught_up_timestamp_ms=4000,
    )
    return response


class StandIn:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.asked: list[Any] = []

    def DescribeQuorum(self, request: Any, timeout: float) -> Any:
        self.asked.append(request)
        if self.endpoint != ACTIVE:
            response = c.DescribeQuorumResponse()
            response.status.error_code = ErrorCode.NOT_CONTROLLER
            response.status.active_controller.node_id = 1
            response.status.active_controller.endpoint = ACTIVE
            return response
        return answer()


@pytest.fixture
def stand_ins() -> dict[str, StandIn]:
    return {}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch, stand_ins: dict[str, StandIn]) -> Admin:
    admin = Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 2000})
    stub = lambda endpoint: stand_ins.setdefault(endpoint, StandIn(endpoint))  # noqa: E731
    monkeypatch.setattr(admin._controller._metadata, "stub", stub)
    return admin


def test_the_active_controller_answers_in_kafkas_shape(
    admin: Admin, stand_ins: dict[str, StandIn]
) -> None:
    info = admin.describe_metadata_quorum()
    assert len(stand_ins["127.0.0.1:1"].asked) == 1 and len(stand_ins[ACTIVE].asked) == 1
    assert isinstance(info, QuorumInfo)
    assert (info.cluster_id, info.leader_id, info.leader_epoch) == ("c1", 1, 3)
    assert (info.high_watermark, info.metadata_offset) == (40, 90)
    assert [v.replica_id for v in info.voters] == [1, 2, 3]
    assert info.voters[2] == ReplicaState(3, "controller", 30, 11, None, 2000, False)
    assert info.observers == (ReplicaState(7, "broker", 88, 2, 4800, 4000, False),)
    assert info.max_follower_lag == 11
    assert info.max_follower_lag_time_ms == 3000, "the leader's 5000 - the laggard's 2000"


def test_lag_time_is_0_without_lag_and_unknown_when_the_laggard_never_caught_up() -> None:
    response = answer()
    del response.voters[2]
    assert quorum_info_of(response).max_follower_lag_time_ms == 0
    response = answer()
    response.voters[2].last_caught_up_timestamp_ms = -1
    assert quorum_info_of(response).max_follower_lag_time_ms == -1
