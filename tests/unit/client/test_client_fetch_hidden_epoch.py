"""Goal: a fetch answer whose batches were all hidden (transaction markers, aborted records)
moves the leader epoch sent as last_fetched_epoch along with the fetch offset (KIP-320), so the
leader does not see a divergence that is not there.

Method: FetchState driven with real encoded batches: records of epoch 1, then an answer holding
only a marker of epoch 2; the next FetchRequest's last_fetched_epoch is read back.
"""

from __future__ import annotations

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.common.record.codec import CONTROL_TYPE_COMMIT, build_batch, build_control_batch
from samsa.v1 import broker_pb2

T0 = ("t", 0)


def answer(records: bytes, next_fetch_offset: int) -> broker_pb2.FetchResponse:
    result = broker_pb2.FetchResponse.PartitionResponse(
        partition=0, records=records, next_fetch_offset=next_fetch_offset
    )
    return broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[result])]
    )


def test_a_hidden_only_answer_moves_the_last_fetched_epoch_with_the_offset() -> None:
    state = FetchState(
        ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "auto.offset.reset": "none"})
    )
    state.assign([T0])
    state.seek(T0, 0)
    state.fetches_to_send({T0: 1}, 1_000)
    data = build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=1)
    state.on_fetch_answer(1, answer(data, 2))
    assert len(state.take(10)) == 2
    state.fetches_to_send({T0: 1}, 1_000)
    marker = build_control_batch(
        CONTROL_TYPE_COMMIT,
        producer_id=7,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=0,
        base_offset=2,
        partition_leader_epoch=2,
    )
    state.on_fetch_answer(1, answer(marker, 3))
    assert state.position(T0) == 3
    ((_, request),) = state.fetches_to_send({T0: 1}, 1_000).requests
    (wanted,) = request.topics[0].partitions
    assert wanted.fetch_offset == 3
    assert wanted.last_fetched_epoch == 2, "epoch 1 ends at 2: the leader would say diverged"
