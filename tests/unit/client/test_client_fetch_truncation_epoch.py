"""Goal: after a truncation (KIP-320) the consumer's position keeps the leader epoch the leader
named with it, as Kafka's consumer does, so the next fetch is checked too. Sent without one, a
second unclean election before the consumer took a record went unseen: the next leader's log,
shorter still, was read on from the first one's end offset, skipping what replaced the rest.

Method: drive the pure FetchState: records of epoch 3 are taken, a leader answers a diverging
epoch, and we read the epoch the next FetchRequest carries and what a second divergence does.
"""

from __future__ import annotations

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

T0 = ("t", 0)
NOW = 1_000


def answer(**fields: object) -> broker_pb2.FetchResponse:
    result = broker_pb2.FetchResponse.PartitionResponse(partition=0, **fields)
    return broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[result])]
    )


def next_fetch(state: FetchState, leader: int) -> broker_pb2.FetchRequest.PartitionData:
    ((node, request),) = state.fetches_to_send({T0: leader}, NOW).requests
    assert node == leader
    return request.topics[0].partitions[0]


def diverging(leader_epoch: int, end_offset: int) -> broker_pb2.FetchResponse:
    epoch_end = broker_pb2.FetchResponse.EpochEndOffset(
        leader_epoch=leader_epoch, end_offset=end_offset
    )
    return answer(diverging_epoch=epoch_end)


def test_the_position_a_truncation_goes_back_to_keeps_the_epoch_the_leader_named() -> None:
    config = {"bootstrap.servers": "x:1", "auto.offset.reset": "earliest"}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign([T0])
    state.seek(T0, 90)
    next_fetch(state, 1)
    batch = build_batch([b"v"] * 10, base_offset=90, partition_leader_epoch=3)
    state.on_fetch_answer(1, answer(records=batch, next_fetch_offset=100))
    assert len(state.take(500)) == 10
    assert next_fetch(state, 2).last_fetched_epoch == 3
    state.on_fetch_answer(2, diverging(leader_epoch=2, end_offset=95))
    fetch = next_fetch(state, 3)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (95, 2), "checked again"
    state.on_fetch_answer(3, diverging(leader_epoch=2, end_offset=93))
    assert state.position(T0) == 93
    assert state.consumed() == {T0: (93, 2)}
