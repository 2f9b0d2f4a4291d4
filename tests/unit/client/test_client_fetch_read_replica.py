"""Goal: OFFSET_OUT_OF_RANGE from a preferred read replica (KIP-392) does not reset the partition.
A follower may lag (its log ends below our offset) or have a higher log start; Kafka's consumer
then asks the leader at the same offset, and only the leader's OFFSET_OUT_OF_RANGE resets per
auto.offset.reset (or is raised with `none`).

Method: drive the pure FetchState with hand-made FetchResponses: the leader (node 1) names
replica 3, replica 3 answers out of range, and we read the next fetch, the lookups and errors.
"""

from __future__ import annotations

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import EARLIEST, LATEST, FetchState
from samsa.common.errors import ErrorCode, OffsetOutOfRangeError
from samsa.v1 import broker_pb2

T0 = ("t", 0)
LEADERS = {T0: 1}
NOW = 1_000
REPLICA = 3
OUT_OF_RANGE = {"error_code": ErrorCode.OFFSET_OUT_OF_RANGE}


def make(policy: str) -> FetchState:
    config = {"bootstrap.servers": "localhost:9092", "auto.offset.reset": policy}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign([T0])
    state.seek(T0, 50)
    return state


def send(state: FetchState) -> dict[int, dict[tuple[str, int], int]]:
    plan = state.fetches_to_send(LEADERS, NOW)
    return {
        node: {(t.name, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}
        for node, request in plan.requests
    }


def answer(**fields: object) -> broker_pb2.FetchResponse:
    result = broker_pb2.FetchResponse.PartitionResponse(partition=0, **fields)
    return broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[result])]
    )


def at_replica(policy: str) -> FetchState:
    """A consumer the leader pointed at REPLICA, with a fetch from REPLICA in flight at 50."""
    state = make(policy)
    assert send(state) == {1: {T0: 50}}
    state.on_fetch_answer(1, answer(preferred_read_replica=REPLICA))
    assert send(state) == {REPLICA: {T0: 50}}
    return state


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
def test_out_of_range_at_a_replica_goes_back_to_the_leader_at_the_same_offset(policy: str) -> None:
    state = at_replica(policy)
    effects = state.on_fetch_answer(REPLICA, answer(**OUT_OF_RANGE))
    assert not effects.metadata_stale and not effects.records_ready
    assert state.read_replicas() == {}
    assert state.position(T0) == 50, "no reset: the replica may only lag"
    assert state.offsets_to_look_up() == {}, "no reset lookup queued"
    assert state.pop_error() is None, "nothing raised, even with auto.offset.reset=none"
    assert send(state) == {1: {T0: 50}}, "the leader is asked at the same offset"


@pytest.mark.parametrize(("policy", "spec"), [("earliest", EARLIEST), ("latest", LATEST)])
def test_out_of_range_at_the_leader_after_the_replica_still_resets(policy: str, spec: int) -> None:
    state = at_replica(policy)
    state.on_fetch_answer(REPLICA, answer(**OUT_OF_RANGE))
    assert send(state) == {1: {T0: 50}}
    state.on_fetch_answer(1, answer(**OUT_OF_RANGE))
    assert state.position(T0) is None
    assert {tp: s for tp, (s, _) in state.offsets_to_look_up().items()} == {T0: spec}


def test_out_of_range_at_the_leader_after_the_replica_is_raised_with_reset_none() -> None:
    state = at_replica("none")
    state.on_fetch_answer(REPLICA, answer(**OUT_OF_RANGE))
    assert send(state) == {1: {T0: 50}}
    state.on_fetch_answer(1, answer(**OUT_OF_RANGE))
    error = state.pop_error()
    assert isinstance(error, OffsetOutOfRangeError) and "50" in str(error)
    assert state.offsets_to_look_up() == {}
