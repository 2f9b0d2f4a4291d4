"""Goal: the consumer's pure fetch-state core keeps positions, resets, buffers and fetches in flight
the way the consumer always did: lazy resets resolved by ListOffsets, one fetch per broker, no
fetch for a partition with buffered records, seeks that drop buffered records and stale answers,
out-of-range handling per auto.offset.reset, leader changes, pause/resume, truncation, corrupt
batches, and at most max.poll.records per take.

Method: drive FetchState with hand-made FetchResponses carrying real encoded batches (the codec's
build_batch) and numbers for time, and read its outputs: the FetchRequests it asks for, the
lookups, the records taken, positions and errors.
"""

from __future__ import annotations

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_records import decode_records
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import (
    EARLIEST,
    FETCH_RETRY_BACKOFF_MS,
    LATEST,
    FetchState,
)
from samsa.common.errors import CorruptRecordError, ErrorCode, OffsetOutOfRangeError
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

T0 = ("t", 0)
T1 = ("t", 1)
LEADERS = {T0: 1, T1: 2}
NOW = 1_000


def make(**settings: object) -> FetchState:
    given = {"bootstrap.servers": "localhost:9092", "auto.offset.reset": "earliest"}
    given.update({key.replace("_", "."): value for key, value in settings.items()})
    return FetchState(ConsumerConfig.from_dict(given))


def at(state: FetchState, offsets: dict[tuple[str, int], int]) -> FetchState:
    """Assign `offsets`' partitions and seek each to its offset."""
    state.assign(list(offsets))
    for tp, offset in offsets.items():
        state.seek(tp, offset)
    return state


def batch(base: int, count: int, leader_epoch: int = 0) -> bytes:
    values = [b"v%d" % (base + i) for i in range(count)]
    return build_batch(values, base_offset=base, partition_leader_epoch=leader_epoch)


def fetched(request: broker_pb2.FetchRequest) -> dict[tuple[str, int], int]:
    return {
        (topic.name, p.partition): p.fetch_offset
        for topic in request.topics
        for p in topic.partitions
    }


def send(state: FetchState, leaders: dict | None = None, now: int = NOW) -> dict[int, dict]:
    plan = state.fetches_to_send(LEADERS if leaders is None else leaders, now)
    return {node: fetched(request) for node, request in plan.requests}


def answer(session_id: int = 0, **by_partition: dict) -> broker_pb2.FetchResponse:
    """by_partition: 'p0'/'p1' -> PartitionResponse fields of topic t."""
    partitions = [
        broker_pb2.FetchResponse.PartitionResponse(partition=int(key[1:]), **fields)
        for key, fields in by_partition.items()
    ]
    return broker_pb2.FetchResponse(
        session_id=session_id,
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=partitions)],
    )


def offsets(records: list) -> list[int]:
    return [r.offset for r in records]


# --- positions and resets --------------------------------------------------------------------


def test_a_new_partition_is_looked_up_only_once_poll_or_position_asks() -> None:
    state = make()
    state.assign([T0])
    assert state.position(T0) is None
    assert state.offsets_to_look_up() == {}, "resets are lazy (Kafka evaluates them at poll)"
    assert send(state) == {}, "no fetch without a position"
    assert state.request_resets() is True
    ((tp, (spec, token)),) = state.offsets_to_look_up().items()
    assert (tp, spec) == (T0, EARLIEST)
    assert state.offsets_to_look_up() == {}, "one lookup in flight per reset"
    state.on_offsets_found({T0: (token, 42)})
    assert state.position(T0) == 42
    assert state.positions() == {T0: 42}
    assert send(state) == {1: {T0: 42}}


def test_seek_to_end_asks_for_latest_and_a_seek_cancels_a_reset() -> None:
    state = at(make(), {T0: 5, T1: 5})
    state.seek_to([T0], LATEST)
    state.request_resets()
    assert {tp: spec for tp, (spec, _) in state.offsets_to_look_up().items()} == {T0: LATEST}
    state.seek_to(None, EARLIEST)
    state.seek(T1, 9)
    state.request_resets()
    assert {tp: spec for tp, (spec, _) in state.offsets_to_look_up().items()} == {T0: EARLIEST}
    assert state.position(T1) == 9


def test_auto_offset_reset_none_refuses_a_partition_without_a_position() -> None:
    state = make(auto_offset_reset="none")
    state.assign([T0])
    with pytest.raises(OffsetOutOfRangeError, match="seek"):
        state.request_resets()
    state.seek(T0, 3)
    assert state.request_resets() is False
    assert send(state) == {1: {T0: 3}}


def test_an_answer_for_a_replaced_reset_is_ignored() -> None:
    state = make()
    state.assign([T0])
    state.request_resets()
    ((_, (_, token)),) = state.offsets_to_look_up().items()
    state.seek(T0, 7)
    state.on_offsets_found({T0: (token, 100)})
    assert state.position(T0) == 7


def test_a_failed_lookup_is_raised_once_and_looked_up_again_at_the_next_poll() -> None:
    state = make()
    state.assign([T0])
    state.request_resets()
    ((_, (_, token)),) = state.offsets_to_look_up().items()
    state.on_lookup_failed({T0: token}, KafkaError("nobody", ErrorCode.LEADER_NOT_AVAILABLE))
    assert isinstance(state.pop_error(), KafkaError)
    assert state.pop_error() is None
    assert state.offsets_to_look_up() == {}, "due again only when poll asks"
    assert state.request_resets() is True
    assert list(state.offsets_to_look_up()) == [T0]


def test_assign_keeps_the_state_of_partitions_still_assigned_and_forgets_the_others() -> None:
    state = at(make(), {T0: 5, T1: 6})
    state.assign([T1, ("u", 0)])
    assert state.assignment() == [T1, ("u", 0)]
    assert state.positions() == {T1: 6}
    with pytest.raises(KafkaError, match="not assigned"):
        state.seek(T0, 1)
    with pytest.raises(ValueError, match=">= 0"):
        state.seek(T1, -1)


# --- fetching and handing out ----------------------------------------------------------------


def test_one_fetch_per_broker_and_none_for_a_partition_with_buffered_records() -> None:
    state = at(make(), {T0: 0, T1: 0})
    assert send(state) == {1: {T0: 0}, 2: {T1: 0}}
    assert send(state) == {}, "one fetch in flight per broker"
    effects = state.on_fetch_answer(1, answer(p0={"records": batch(0, 3)}))
    assert effects.records_ready and not effects.metadata_stale
    assert send(state) == {}, "T0 has buffered records, T1 is in flight"
    assert offsets(state.take(500)) == [0, 1, 2]
    assert state.position(T0) == 3
    assert send(state) == {1: {T0: 3}}


def test_an_empty_answer_is_not_records_ready_and_the_partition_is_fetched_again() -> None:
    state = at(make(), {T0: 4})
    send(state)
    effects = state.on_fetch_answer(1, answer(p0={"next_fetch_offset": 4}))
    assert not effects.records_ready
    assert send(state) == {1: {T0: 4}}


def test_take_hands_out_at_most_the_limit_in_assignment_order() -> None:
    state = at(make(), {T0: 0, T1: 0})
    send(state)
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 4) + batch(4, 3)}))
    state.on_fetch_answer(2, answer(p1={"records": batch(0, 2)}))
    first = state.take(5)
    assert [(r.partition, r.offset) for r in first] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]
    assert state.position(T0) == 5 and state.position(T1) == 0
    second = state.take(5)
    assert [(r.partition, r.offset) for r in second] == [(0, 5), (0, 6), (1, 0), (1, 1)]
    assert state.positions() == {T0: 7, T1: 2}
    assert state.take(5) == []
    assert first[0].value == b"v0" and first[0].key is None and first[0].headers == ()


def test_records_before_the_fetch_offset_in_a_batch_are_skipped() -> None:
    state = at(make(), {T0: 5})
    send(state)
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 10)}))
    assert offsets(state.take(500)) == [5, 6, 7, 8, 9]


def test_the_leader_epoch_of_the_last_batch_taken_goes_with_the_next_fetch() -> None:
    state = at(make(), {T0: 0})
    send(state)
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 2, leader_epoch=7)}))
    state.take(500)
    plan = state.fetches_to_send(LEADERS, NOW)
    ((_, request),) = plan.requests
    assert request.topics[0].partitions[0].last_fetched_epoch == 7


def test_fetches_continue_in_the_broker_session() -> None:
    state = at(make(), {T0: 0, T1: 0})
    leaders = {T0: 1, T1: 1}
    assert send(state, leaders) == {1: {T0: 0, T1: 0}}
    state.on_fetch_answer(1, answer(session_id=9, p0={"records": batch(0, 2)}))
    state.take(500)
    plan = state.fetches_to_send(leaders, NOW)
    ((_, request),) = plan.requests
    assert request.session_id == 9 and request.session_epoch == 1
    assert fetched(request) == {T0: 2}, "an incremental fetch names only what moved"


def test_no_fetch_only_long_polls_idle_partitions_while_one_of_their_broker_is_buffered() -> None:
    """T1 is idle, T0 has records, both on broker 1 in a session: while T0's records wait for
    poll(), a fetch would name nothing and park on T1 for fetch.max.wait.ms, and T0, once
    taken, would wait for its answer. So none goes until poll() takes T0's records."""
    state = at(make(), {T0: 0, T1: 0})
    leaders = {T0: 1, T1: 1}
    assert send(state, leaders) == {1: {T0: 0, T1: 0}}
    state.on_fetch_answer(1, answer(session_id=9, p0={"records": batch(0, 2)}, p1={}))
    assert send(state, leaders) == {}, "T1 unchanged and T0 buffered: nothing worth a fetch"
    assert offsets(state.take(500)) == [0, 1]
    assert send(state, leaders) == {1: {T0: 2}}, "T0 taken: fetched at once (T1 stays polled)"


def test_a_paused_partitions_records_do_not_hold_its_broker_back() -> None:
    """A paused partition keeps its records for as long as it stays paused: its broker's idle
    partitions are long-polled meanwhile, as without records waiting."""
    state = at(make(), {T0: 0, T1: 0})
    leaders = {T0: 1, T1: 1}
    send(state, leaders)
    state.on_fetch_answer(1, answer(session_id=9, p0={"records": batch(0, 2)}, p1={}))
    state.pause([T0])
    assert send(state, leaders) == {1: {}}, "an incremental fetch long-polling T1"


# --- seeks and stale answers ------------------------------------------------------------------


def test_seek_drops_buffered_records_and_the_answer_in_flight_for_the_old_offset() -> None:
    state = at(make(), {T0: 0})
    send(state)
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 3)}))
    state.seek(T0, 1)
    assert state.take(500) == [], "buffered records from before the seek are gone"
    assert send(state) == {1: {T0: 1}}
    state.seek(T0, 50)
    effects = state.on_fetch_answer(1, answer(p0={"records": batch(1, 3)}))
    assert not effects.records_ready
    assert state.take(500) == [] and state.position(T0) == 50
    assert send(state) == {1: {T0: 50}}


def test_an_answer_for_a_partition_unassigned_since_is_ignored() -> None:
    state = at(make(), {T0: 0, T1: 0})
    leaders = {T0: 1, T1: 1}
    send(state, leaders)
    state.assign([T1])
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 2)}, p1={"records": batch(0, 1)}))
    assert [(r.partition, r.offset) for r in state.take(500)] == [(1, 0)]


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "spec"), [("earliest", EARLIEST), ("latest", LATEST)])
def test_out_of_range_resets_at_once_per_auto_offset_reset(policy: str, spec: int) -> None:
    state = at(make(auto_offset_reset=policy), {T0: 99})
    send(state)
    state.on_fetch_answer(1, answer(p0={"error_code": ErrorCode.OFFSET_OUT_OF_RANGE}))
    assert state.position(T0) is None
    assert {tp: s for tp, (s, _) in state.offsets_to_look_up().items()} == {T0: spec}, (
        "a reset from a fetch answer is due without waiting for poll"
    )
    assert state.pop_error() is None


def test_out_of_range_with_reset_none_is_raised_once_then_fetched_again() -> None:
    state = at(make(auto_offset_reset="none"), {T0: 99})
    send(state)
    state.on_fetch_answer(1, answer(p0={"error_code": ErrorCode.OFFSET_OUT_OF_RANGE}))
    assert send(state) == {}, "not fetched while its error waits to be raised"
    error = state.pop_error()
    assert isinstance(error, OffsetOutOfRangeError) and "99" in str(error)
    assert state.position(T0) == 99
    assert send(state) == {1: {T0: 99}}


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    ],
)
def test_a_leader_change_marks_metadata_stale_and_fetches_from_the_new_leader(
    code: ErrorCode,
) -> None:
    state = at(make(), {T0: 3})
    send(state)
    effects = state.on_fetch_answer(1, answer(p0={"error_code": code}))
    assert effects.metadata_stale
    assert state.pop_error() is None
    assert send(state, {T0: 2}) == {2: {T0: 3}}


def test_a_partition_without_a_known_leader_asks_for_metadata() -> None:
    state = at(make(), {T0: 3})
    plan = state.fetches_to_send({}, NOW)
    assert plan.requests == [] and plan.metadata_stale


def test_any_other_error_code_is_raised_by_the_next_poll() -> None:
    state = at(make(), {T0: 3})
    send(state)
    state.on_fetch_answer(
        1, answer(p0={"error_code": ErrorCode.INVALID_REQUEST, "error_message": "no"})
    )
    error = state.pop_error()
    assert isinstance(error, KafkaError) and error.code == ErrorCode.INVALID_REQUEST


def test_a_failed_fetch_backs_the_broker_off_and_starts_its_session_over() -> None:
    state = at(make(), {T0: 3})
    send(state)
    state.on_fetch_failed(1, NOW)
    plan = state.fetches_to_send(LEADERS, NOW + 1)
    assert plan.requests == [] and plan.next_due_ms == NOW + FETCH_RETRY_BACKOFF_MS
    assert send(state, now=NOW + FETCH_RETRY_BACKOFF_MS) == {1: {T0: 3}}


def test_a_refused_session_leaves_the_partitions_to_be_fetched_again() -> None:
    state = at(make(), {T0: 3})
    send(state)
    refused = broker_pb2.FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert state.on_fetch_answer(1, refused) == (False, False, ())
    assert send(state) == {1: {T0: 3}}


def test_a_corrupt_batch_comes_after_the_records_before_it() -> None:
    state = at(make(), {T0: 0})
    send(state)
    corrupt = bytearray(batch(3, 2))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 3) + bytes(corrupt)}))
    assert offsets(state.take(500)) == [0, 1, 2]
    assert send(state) == {1: {T0: 3}}, "fetched again from the corrupt batch alone"
    state.on_fetch_answer(1, answer(p0={"records": bytes(corrupt)}))
    error = state.pop_error()
    assert isinstance(error, CorruptRecordError) and "seek to 5" in str(error)
    assert state.position(T0) == 3


def test_decode_records_raises_when_the_corrupt_batch_comes_first() -> None:
    corrupt = bytearray(batch(0, 2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"offsets 0\.\.1"):
        decode_records(T0, bytes(corrupt), 0)


def test_truncation_goes_back_to_where_the_leaders_log_ends() -> None:
    state = at(make(), {T0: 0})
    send(state)
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 10, leader_epoch=1)}))
    state.take(500)
    send(state)
    diverging = broker_pb2.FetchResponse.EpochEndOffset(leader_epoch=1, end_offset=6)
    state.on_fetch_answer(1, answer(p0={"diverging_epoch": diverging}))
    assert state.position(T0) == 6
    assert send(state) == {1: {T0: 6}}


def test_truncation_with_reset_none_is_an_error() -> None:
    state = at(make(auto_offset_reset="none"), {T0: 10})
    send(state)
    diverging = broker_pb2.FetchResponse.EpochEndOffset(leader_epoch=1, end_offset=6)
    state.on_fetch_answer(1, answer(p0={"diverging_epoch": diverging}))
    error = state.pop_error()
    assert isinstance(error, OffsetOutOfRangeError) and "truncation" in str(error)
    assert state.position(T0) == 10


def test_a_preferred_read_replica_is_fetched_from_until_it_fails() -> None:
    state = at(make(), {T0: 0})
    send(state)
    state.on_fetch_answer(1, answer(p0={"preferred_read_replica": 3}))
    assert state.read_replicas() == {T0: 3}
    assert send(state) == {3: {T0: 0}}
    state.on_fetch_failed(3, NOW)
    assert state.read_replicas() == {}
    assert send(state) == {1: {T0: 0}}


# --- pause and resume -------------------------------------------------------------------------


def test_a_paused_partition_is_not_fetched_and_keeps_its_records_until_resumed() -> None:
    state = at(make(), {T0: 0, T1: 0})
    send(state)
    state.pause([T0])
    assert state.paused() == [T0]
    effects = state.on_fetch_answer(1, answer(p0={"records": batch(0, 2)}))
    assert not effects.records_ready, "nothing poll() may take"
    assert state.take(500) == []
    state.on_fetch_answer(2, answer(p1={"records": batch(0, 1)}))
    assert [(r.partition, r.offset) for r in state.take(500)] == [(1, 0)]
    state.seek(T0, 0)
    assert T0 not in send(state).get(1, {}), "paused: not fetched"
    state.resume([T0])
    assert state.paused() == []
    assert send(state) == {1: {T0: 0}}
