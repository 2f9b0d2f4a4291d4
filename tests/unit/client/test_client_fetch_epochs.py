"""Goal: the leader epoch a consumer sends with its fetch offset (last_fetched_epoch) and commits
beside its position is that of the record just before it (KIP-320), so that the leader reports a
truncated log only when the log was truncated. Each check below failed before:

- a poll() that stops inside a fetched answer spanning two epochs named the later epoch (the
  answer's last batch): after an unclean election that lost only that epoch, a member starting
  at the commit was told its intact position was truncated (an error under
  auto.offset.reset=none);
- a diverging answer whose end offset is at or past the position (the leader's log reaches it
  under another epoch) was taken as a truncation: Kafka's consumer only adopts the epoch;
- an answer that skipped ahead without a batch kept the epoch of the last batch read, although
  an epoch may have begun in the gap.

Method: the pure FetchState, fed hand-built FetchResponses; each record also carries its batch's
epoch (ConsumerRecord.leader_epoch, Kafka's leaderEpoch()).
"""

from __future__ import annotations

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

T0 = ("t", 0)
NOW = 1_000
TWO_EPOCHS = build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=3) + build_batch(
    [b"c", b"d"], base_offset=2, partition_leader_epoch=5
)


def answer(partition: broker_pb2.FetchResponse.PartitionResponse) -> broker_pb2.FetchResponse:
    return broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[partition])]
    )


def records(data: bytes, next_fetch_offset: int) -> broker_pb2.FetchResponse:
    return answer(
        broker_pb2.FetchResponse.PartitionResponse(
            partition=0, records=data, next_fetch_offset=next_fetch_offset
        )
    )


def diverging(epoch: int, end_offset: int) -> broker_pb2.FetchResponse:
    epoch_end = broker_pb2.FetchResponse.EpochEndOffset(leader_epoch=epoch, end_offset=end_offset)
    return answer(
        broker_pb2.FetchResponse.PartitionResponse(partition=0, diverging_epoch=epoch_end)
    )


def fetching_from(offset: int, reset: str = "none") -> FetchState:
    state = FetchState(
        ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "auto.offset.reset": reset})
    )
    state.assign([T0])
    state.seek(T0, offset)
    next_fetch(state)
    return state


def next_fetch(state: FetchState) -> broker_pb2.FetchRequest.PartitionData:
    ((_, request),) = state.fetches_to_send({T0: 1}, NOW).requests
    return request.topics[0].partitions[0]


def test_a_partial_take_names_the_epoch_of_the_last_record_taken() -> None:
    state = fetching_from(0)
    state.on_fetch_answer(1, records(TWO_EPOCHS, 4))
    first = state.take(2)
    assert [(r.offset, r.leader_epoch) for r in first] == [(0, 3), (1, 3)]
    assert state.consumed()[T0] == (2, 3), "what commit() and auto-commit send"
    rest = state.take(2)
    assert [(r.offset, r.leader_epoch) for r in rest] == [(2, 5), (3, 5)]
    assert state.consumed()[T0] == (4, 5)
    fetch = next_fetch(state)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (4, 5)


def test_a_leader_that_agrees_up_to_the_position_is_no_truncation() -> None:
    """The member fetches (4, epoch 5); the leader never had epoch 5 but its epoch 3 runs to
    offset 6, past the position. Kafka's consumer takes that as no truncation (it cannot tell
    whether what it read at 2-3 is what the leader holds there) and names epoch 3 from then on."""
    for reset in ("none", "earliest"):
        state = fetching_from(0, reset)
        state.on_fetch_answer(1, records(TWO_EPOCHS, 4))
        state.take(10)
        next_fetch(state)
        state.on_fetch_answer(1, diverging(3, 6))
        assert state.pop_error() is None, reset
        assert state.position(T0) == 4, reset
        fetch = next_fetch(state)
        assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (4, 3), reset


def test_a_leader_whose_log_ends_below_the_position_is_a_truncation() -> None:
    state = fetching_from(0, "earliest")
    state.on_fetch_answer(1, records(TWO_EPOCHS, 4))
    state.take(10)
    next_fetch(state)
    state.on_fetch_answer(1, diverging(3, 2))
    assert state.position(T0) == 2
    assert next_fetch(state).last_fetched_epoch == 3
    refused = fetching_from(0, "none")
    refused.on_fetch_answer(1, records(TWO_EPOCHS, 4))
    refused.take(10)
    next_fetch(refused)
    refused.on_fetch_answer(1, diverging(3, 2))
    assert "truncation" in str(refused.pop_error())


def test_an_answer_that_skips_ahead_without_a_batch_forgets_the_epoch() -> None:
    state = fetching_from(0)
    state.on_fetch_answer(1, records(build_batch([b"a", b"b"], partition_leader_epoch=1), 2))
    state.take(10)
    assert next_fetch(state).last_fetched_epoch == 1
    state.on_fetch_answer(1, records(b"", 10))  # nothing at or after 2 below the log end
    assert state.position(T0) == 10
    assert not next_fetch(state).HasField("last_fetched_epoch"), "fetched unchecked"
