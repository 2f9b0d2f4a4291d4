"""Goal: a preferred read replica (KIP-392) is not kept for ever. Kafka's consumer forgets it
when the partition's leader changes (the new leader decides whom to read from, and a replica the
old one named may have left the ISR) and when it is metadata.max.age.ms old (the leader picks
again: a replica that fell out of the ISR, stuck with a high watermark that no longer moves,
answered empty fetches for ever, with no error to send the consumer back).

Method: drive the pure FetchState: leader 1 names replica 3, replica 3 answers empty fetches,
and we read where the next fetch goes as the leaders we pass and the time move.
"""

from __future__ import annotations

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import READ_REPLICA_MAX_AGE_MS, FetchState, TopicPartition
from samsa.v1 import broker_pb2

T0 = ("t", 0)
NOW = 1_000
REPLICA = 3


def send(
    state: FetchState, leaders: dict[TopicPartition, int], now_ms: int
) -> dict[int, dict[TopicPartition, int]]:
    plan = state.fetches_to_send(leaders, now_ms)
    return {
        node: {(t.name, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}
        for node, request in plan.requests
    }


def answer(**fields: object) -> broker_pb2.FetchResponse:
    result = broker_pb2.FetchResponse.PartitionResponse(partition=0, **fields)
    return broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[result])]
    )


def reading_from_replica() -> FetchState:
    """A consumer at offset 50 that leader 1 pointed at REPLICA, read from it once at NOW."""
    config = {"bootstrap.servers": "x:1", "client.rack": "r1"}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign([T0])
    state.seek(T0, 50)
    assert send(state, {T0: 1}, NOW) == {1: {T0: 50}}
    state.on_fetch_answer(1, answer(preferred_read_replica=REPLICA))
    assert send(state, {T0: 1}, NOW) == {REPLICA: {T0: 50}}
    state.on_fetch_answer(REPLICA, answer(next_fetch_offset=50))
    return state


def test_a_read_replica_is_forgotten_when_the_leader_changes() -> None:
    state = reading_from_replica()
    assert send(state, {T0: 2}, NOW + 1) == {2: {T0: 50}}, "the new leader is asked"
    assert state.read_replicas() == {}


def test_a_read_replica_is_asked_until_it_is_metadata_max_age_old_then_the_leader() -> None:
    state = reading_from_replica()
    last = NOW + READ_REPLICA_MAX_AGE_MS - 1
    assert send(state, {T0: 1}, last) == {REPLICA: {T0: 50}}
    state.on_fetch_answer(REPLICA, answer(next_fetch_offset=50))
    assert send(state, {T0: 1}, last + 1) == {1: {T0: 50}}, "the leader picks again"
    assert state.read_replicas() == {}
    state.on_fetch_answer(1, answer(preferred_read_replica=REPLICA))
    assert send(state, {T0: 1}, last + 2) == {REPLICA: {T0: 50}}, "named again: a new age"
    state.on_fetch_answer(REPLICA, answer(next_fetch_offset=50))
    assert send(state, {T0: 1}, last + 1 + READ_REPLICA_MAX_AGE_MS) == {REPLICA: {T0: 50}}
