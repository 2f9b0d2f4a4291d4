"""Goal: a partition whose new fetch offset the request limit left out of a fetch is not read
from the answer to that fetch. The broker's session (KIP-227) still holds the partition at its
old offset and, the partition having changed since, answers it from there: records from an
offset the consumer left, or an empty answer whose next_fetch_offset is that old offset. Taken
as the answer at the new offset, a seek back (or a reset to earliest, a truncation, a partition
given back and assigned again) jumped over everything between: t-2 sought back to 10 was handed
out 40.. (the broker's offset), or its position jumped to 40 with nothing handed out. The answer
is ignored; the partition is named at its new offset in a later fetch, and read from there.

Method: the pure FetchState with the request limit lowered to 2 and three partitions on one
broker, answers carrying a session id (so fetches are incremental), and the offsets named.
"""

from __future__ import annotations

import pytest

from samsa.client import group_driver
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.common import limits
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)
LEADERS = {T0: 1, T1: 1, T2: 1}


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "request_partitions_max", 2)
    monkeypatch.setattr(group_driver, "REQUEST_PARTITIONS_MAX", 2)


def send(state: FetchState) -> dict[tuple[str, int], int]:
    """The partitions the fetch to broker 1 names, with their fetch offsets."""
    ((node, request),) = state.fetches_to_send(LEADERS, 1_000).requests
    assert node == 1
    return {(t.name, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}


def answer(**by_partition: dict) -> broker_pb2.FetchResponse:
    partitions = [
        broker_pb2.FetchResponse.PartitionResponse(partition=int(key[1:]), **fields)
        for key, fields in by_partition.items()
    ]
    return broker_pb2.FetchResponse(
        session_id=7,
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=partitions)],
    )


def records(base: int, count: int) -> dict:
    values = [b"v%d" % (base + i) for i in range(count)]
    return {"records": build_batch(values, base_offset=base), "next_fetch_offset": base + count}


def sought_back() -> FetchState:
    """t-2 read to 40 in the broker's session, then every partition sought at once: the fetch
    names two of them, and t-2, sought back to 10, is left for the next one."""
    state = FetchState(
        ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "auto.offset.reset": "earliest"})
    )
    state.assign([T0, T1, T2])
    for tp in (T0, T1, T2):
        state.seek(tp, 0)
    for _ in range(3):  # the session takes all three, two a fetch
        send(state)
        state.on_fetch_answer(1, answer())
    send(state)
    state.on_fetch_answer(1, answer(p2=records(0, 40)))
    assert len(state.take(100)) == 40
    assert send(state) == {T2: 40}
    state.on_fetch_answer(1, answer())  # the broker's session holds t-2 at 40
    state.seek(T0, 5)
    state.seek(T1, 5)
    state.seek(T2, 10)
    assert send(state) == {T0: 5, T1: 5}
    return state


@pytest.mark.parametrize(
    "held",
    [
        pytest.param(records(40, 5), id="records from the held offset"),
        pytest.param({"next_fetch_offset": 40, "high_watermark": 50}, id="empty, moved watermark"),
    ],
)
def test_an_answer_at_the_offset_the_broker_holds_is_not_taken_for_the_new_one(held: dict) -> None:
    state = sought_back()
    state.on_fetch_answer(1, answer(p2=held))
    assert state.take(100) == []
    assert state.position(T2) == 10
    assert send(state) == {T2: 10}, "named at its new offset now"
    state.on_fetch_answer(1, answer(p2=records(10, 3)))
    assert [r.offset for r in state.take(100)] == [10, 11, 12]


def test_a_partition_the_broker_holds_at_the_offset_asked_is_still_read_unnamed() -> None:
    state = sought_back()
    # t-0 and t-1 are named at 5; had t-2 not moved, the broker's answer for it would count
    state.on_fetch_answer(1, answer(p0=records(5, 2), p1=records(5, 1)))
    assert sorted((r.partition, r.offset) for r in state.take(100)) == [(0, 5), (0, 6), (1, 5)]
    assert send(state) == {T2: 10, T0: 7}
    state.on_fetch_answer(1, answer())
    assert send(state) == {T1: 6}
    state.on_fetch_answer(1, answer(p2=records(10, 1)))  # unnamed, held at 10: an answer
    assert [r.offset for r in state.take(100)] == [10]
