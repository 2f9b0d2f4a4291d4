"""Goal: what a fetch answer cuts short never hands a record out twice nor one below the offset
asked: a batch cut at the end of the answer (even inside its header, so that it names no offset)
is fetched again from where it starts, after the records before it; a compressed batch that
straddles the fetch offset shows only the records at or after it; a batch split across polls by
max.poll.records, then paused or sought, resumes where it should.

Method: the pure FetchState and decode_records fed real encoded batches (build_batch, zstd
where said), cut by hand; the next fetch's offset and the records taken are read back.
"""

from __future__ import annotations

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_records import decode_records
from samsa.client.fetch_state import FetchState
from samsa.common.record import header
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

T0 = ("t", 0)
LEADERS = {T0: 1}
NOW = 1_000


def make(offset: int) -> FetchState:
    config = {"bootstrap.servers": "localhost:9092", "auto.offset.reset": "earliest"}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign([T0])
    state.seek(T0, offset)
    return state


def batch(base: int, count: int, **options: object) -> bytes:
    return build_batch([b"v%d" % (base + i) for i in range(count)], base_offset=base, **options)


def send(state: FetchState) -> dict[tuple[str, int], int]:
    """The next fetch's offsets (of broker 1); {} when none is sent."""
    plan = state.fetches_to_send(LEADERS, NOW)
    return {
        (t.name, p.partition): p.fetch_offset
        for _, request in plan.requests
        for t in request.topics
        for p in t.partitions
    }


def answer(records: bytes, next_fetch_offset: int) -> broker_pb2.FetchResponse:
    result = broker_pb2.FetchResponse.PartitionResponse(
        partition=0, records=records, next_fetch_offset=next_fetch_offset
    )
    return broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[result])]
    )


def offsets(records: list) -> list[int]:
    return [r.offset for r in records]


@pytest.mark.parametrize("kept", [8, 20, header.HEADER_BYTES - 1, header.HEADER_BYTES + 5])
def test_a_batch_cut_at_the_end_of_an_answer_is_fetched_again_from_its_start(kept: int) -> None:
    """Cut inside its header (fewer than 61 bytes kept), the last batch says nothing of its
    offsets: the fetch still resumes past the batches decoded, not at the offset asked (which
    handed records 0..2 out again, for ever)."""
    state = make(0)
    assert send(state) == {T0: 0}
    cut = batch(3, 3)[:kept]
    state.on_fetch_answer(1, answer(batch(0, 3) + cut, next_fetch_offset=6))
    assert offsets(state.take(500)) == [0, 1, 2]
    assert state.position(T0) == 3
    assert send(state) == {T0: 3}
    state.on_fetch_answer(1, answer(batch(3, 3), next_fetch_offset=6))
    assert offsets(state.take(500)) == [3, 4, 5], "each record once"


def test_decode_records_says_where_a_cut_off_last_batch_starts() -> None:
    data = batch(10, 2) + batch(12, 3)[:30]
    records, _, corrupt_at = decode_records(T0, data, 10)
    assert offsets(records) == [10, 11]
    assert corrupt_at == 12


@pytest.mark.parametrize("compacted", [False, True])
def test_a_compressed_batch_straddling_the_fetch_offset_shows_only_records_from_it(
    compacted: bool,
) -> None:
    deltas = [0, 2, 5, 6, 9] if compacted else None
    count = 5 if compacted else 10
    data = batch(0, count, offset_deltas=deltas, compression=header.COMPRESSION_ZSTD)
    state = make(5)
    send(state)
    state.on_fetch_answer(1, answer(data, next_fetch_offset=10))
    assert offsets(state.take(500)) == ([5, 6, 9] if compacted else [5, 6, 7, 8, 9])
    assert state.position(T0) == 10
    assert send(state) == {T0: 10}


def test_a_batch_split_by_max_poll_records_then_paused_resumes_where_it_stopped() -> None:
    state = make(0)
    send(state)
    state.on_fetch_answer(1, answer(batch(0, 6), next_fetch_offset=6))
    assert offsets(state.take(4)) == [0, 1, 2, 3]
    state.pause([T0])
    assert state.take(4) == [], "a paused partition's buffered records are not returned"
    assert state.position(T0) == 4 and send(state) == {}
    state.resume([T0])
    assert offsets(state.take(4)) == [4, 5]
    assert send(state) == {T0: 6}


def test_a_seek_back_into_a_split_batch_fetches_from_the_offset_sought() -> None:
    state = make(0)
    send(state)
    state.on_fetch_answer(1, answer(batch(0, 6), next_fetch_offset=6))
    assert offsets(state.take(4)) == [0, 1, 2, 3]
    state.seek(T0, 1)
    assert state.take(4) == [], "the buffer is dropped"
    assert send(state) == {T0: 1}
    state.on_fetch_answer(1, answer(batch(0, 6), next_fetch_offset=6))
    assert offsets(state.take(500)) == [1, 2, 3, 4, 5]
