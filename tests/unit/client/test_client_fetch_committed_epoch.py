"""Goal: a group member that starts a partition at its committed offset fetches with the leader
epoch committed beside it (KIP-320), as Kafka's consumer does, so that a leader whose log was
truncated below that offset (an unclean election since the commit) answers with the diverging
epoch and the consumer goes back to where the logs agree. Before, the committed epoch was
dropped: the fetch carried none, the leader answered OFFSET_OUT_OF_RANGE, and the position was
reset per auto.offset.reset (`latest` skipping every record written after the truncation).

Method: drive the pure FetchState of a consumer with a group.id: its COMMITTED reset is resolved
with an offset and epoch (what the group driver hands it from OffsetFetch), and we read the epoch
the next FetchRequest carries and what a diverging answer does. A lookup without an epoch
(ListOffsets) leaves the position unchecked. Then the real GroupDriver's resolve_committed, its
OffsetFetch answered by a stand-in, hands the committed epoch on.
"""

from __future__ import annotations

import asyncio
import threading

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import COMMITTED, LATEST, FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver
from samsa.v1 import broker_pb2

T0 = ("t", 0)
NOW = 1_000


CONFIG = ConsumerConfig.from_dict(
    {"bootstrap.servers": "x:1", "group.id": "g", "auto.offset.reset": "latest"}
)


def committed_reset(state: FetchState) -> int:
    """Assign T0 to `state`, whose reset is then COMMITTED: its token."""
    state.assign([T0])
    state.request_resets()
    ((tp, (spec, token)),) = state.offsets_to_look_up().items()
    assert (tp, spec) == (T0, COMMITTED)
    return token


def started_at(offset: int, epochs: dict[tuple[str, int], int] | None) -> FetchState:
    state = FetchState(CONFIG)
    state.on_offsets_found({T0: (committed_reset(state), offset)}, epochs)
    return state


def next_fetch(state: FetchState) -> broker_pb2.FetchRequest.PartitionData:
    ((_, request),) = state.fetches_to_send({T0: 1}, NOW).requests
    return request.topics[0].partitions[0]


def test_the_first_fetch_carries_the_committed_epoch_and_a_divergence_goes_back() -> None:
    state = started_at(120, {T0: 4})
    fetch = next_fetch(state)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (120, 4)
    epoch_end = broker_pb2.FetchResponse.EpochEndOffset(leader_epoch=4, end_offset=100)
    partition = broker_pb2.FetchResponse.PartitionResponse(partition=0, diverging_epoch=epoch_end)
    state.on_fetch_answer(
        1,
        broker_pb2.FetchResponse(
            topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[partition])]
        ),
    )
    assert state.position(T0) == 100, "back to where the logs agree, not reset to latest"
    assert state.offsets_to_look_up() == {}
    assert next_fetch(state).fetch_offset == 100


def test_an_offset_found_without_an_epoch_is_fetched_unchecked() -> None:
    state = started_at(120, None)
    assert not next_fetch(state).HasField("last_fetched_epoch")
    # A later reset (ListOffsets, no epoch) clears an epoch the position had.
    state = started_at(120, {T0: 4})
    state.seek_to([T0], LATEST)
    state.request_resets()
    ((_, (_, token)),) = state.offsets_to_look_up().items()
    state.on_offsets_found({T0: (token, 300)})
    fetch = next_fetch(state)
    assert fetch.fetch_offset == 300 and not fetch.HasField("last_fetched_epoch")


def test_the_group_driver_hands_on_the_committed_epoch() -> None:
    state = FetchState(CONFIG)
    token = committed_reset(state)
    group = GroupDriver(CONFIG, threading.Lock(), state, ["x:1"], AioChannels(), lambda: None)

    async def fetch_committed(partitions: list) -> dict:
        assert partitions == [T0]
        return {T0: OffsetAndMetadata(120, leader_epoch=4)}

    group.fetch_committed = fetch_committed  # type: ignore[method-assign]
    asyncio.run(group.resolve_committed({T0: token}))
    fetch = next_fetch(state)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (120, 4)
