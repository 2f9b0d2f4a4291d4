"""Goal: within a fetch session (KIP-227) a partition is named in the next fetch whenever what the
broker last answered of it was not taken, even at the position the broker's session holds. The
broker reads, in an incremental fetch, only the partitions named and those that changed since it
looked: one left unnamed waits for the next append (for ever on a partition no longer written
to). So: after a seek drops the answer in flight, after an error poll() raised, and after a read
replica (KIP-392) sends the partition back to its leader. A partition that stays on its broker and
whose answers were taken is still left out while unchanged.

Method: the pure FetchState, answers carrying a session id (so that the next fetch is
incremental), and the partitions each FetchRequest names.
"""

from __future__ import annotations

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

T0 = ("t", 0)
T1 = ("t", 1)
NOW = 1_000
SESSION = 9


def make(offset: int, policy: str = "earliest", partitions: tuple = (T0,)) -> FetchState:
    config = {"bootstrap.servers": "localhost:9092", "auto.offset.reset": policy}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign(list(partitions))
    for tp in partitions:
        state.seek(tp, offset)
    return state


def send(state: FetchState, leaders: dict | None = None) -> dict[int, dict]:
    """node -> the partitions its fetch names, with their fetch offsets."""
    plan = state.fetches_to_send({T0: 1, T1: 1} if leaders is None else leaders, NOW)
    return {
        node: {(t.name, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}
        for node, request in plan.requests
    }


def answer(session_id: int = SESSION, **by_partition: dict) -> broker_pb2.FetchResponse:
    partitions = [
        broker_pb2.FetchResponse.PartitionResponse(partition=int(key[1:]), **fields)
        for key, fields in by_partition.items()
    ]
    return broker_pb2.FetchResponse(
        session_id=session_id,
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=partitions)],
    )


def records(base: int, count: int) -> dict:
    """A partition's answer: `count` records from `base` (no leader epoch, as an old log's)."""
    values = [b"v%d" % (base + i) for i in range(count)]
    return {"records": build_batch(values, base_offset=base), "next_fetch_offset": base + count}


def test_a_seek_to_the_offset_in_flight_names_the_partition_again() -> None:
    state = make(0)
    assert send(state) == {1: {T0: 0}}
    state.on_fetch_answer(1, answer(p0=records(0, 3)))
    state.take(500)
    assert send(state) == {1: {T0: 3}}
    state.seek(T0, 3)  # drops the answer in flight, whose records the broker takes as read
    state.on_fetch_answer(1, answer(p0=records(3, 2)))
    assert state.take(500) == []
    assert send(state) == {1: {T0: 3}}, "named: the broker would not read 3.. again"


def test_a_partition_whose_error_poll_raised_is_named_when_fetched_again() -> None:
    state = make(99, policy="none")
    send(state)
    state.on_fetch_answer(1, answer(p0={"error_code": ErrorCode.OFFSET_OUT_OF_RANGE}))
    assert state.pop_error() is not None
    assert send(state) == {1: {T0: 99}}, "named: so the broker says it again"


def test_a_partition_back_at_its_leader_from_a_read_replica_is_named() -> None:
    state = make(50)
    send(state)
    state.on_fetch_answer(1, answer(p0={"preferred_read_replica": 3}))
    assert send(state) == {3: {T0: 50}}
    state.on_fetch_answer(3, answer(session_id=4, p0={"error_code": ErrorCode.OFFSET_OUT_OF_RANGE}))
    assert send(state) == {1: {T0: 50}}, "named: the leader's session holds it, examined"
    state.on_fetch_answer(1, answer(p0=records(50, 1)))
    state.take(500)
    assert send(state) == {1: {T0: 51}}


def test_an_unchanged_partition_that_stays_on_its_broker_is_left_out() -> None:
    state = make(0, partitions=(T0, T1))
    assert send(state) == {1: {T0: 0, T1: 0}}
    state.on_fetch_answer(1, answer(p0=records(0, 2)))  # T1: nothing new
    state.take(500)
    assert send(state) == {1: {T0: 2}}
    state.on_fetch_answer(1, answer(p0=records(2, 1)))
    state.take(500)
    assert send(state) == {1: {T0: 3}}, "T1 is still read by the broker's session"
