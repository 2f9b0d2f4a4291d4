"""Goal: consumers' fetch answers hold their bytes of the broker's answer budget from their read
until whoever wrote them releases them; none reads past the budget, KIP-74's whole first batch
included; a fetch with no room waits in line and is served once bytes are released, or answers
empty at its max_wait; nothing stays held or in line after an error or a cancel; followers'
fetches are exempt; a FetchStream releases an answer once written, or when it ends unwritten.

Method: real logs in a temp dir (broker_host), `fetch_answer` and `serve_fetch_stream` with an
AnswerGate of a few KiB, batches of ~1 KiB. No server, no timed assertions: waits end by events
or by the fetch's own max_wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image, two_broker_image

from samsa.common.record.codec import build_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.answer_gate import AnswerGate
from samsa.services.broker.requests.fetch import fetch_answer
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.broker.requests.fetch_stream import serve_fetch_stream
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2

TOPIC_ID = b"\x0c" * 16
BATCH = build_batch([b"x" * 1000])


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    # Partitions 0 and 1, led by broker 1, three batches each.
    with hosting(tmp_path, single_broker_image({"t": (TOPIC_ID, led_partitions(2))})) as hosted:
        for partition in (0, 1):
            for _ in range(3):
                append(hosted, partition, BATCH)
        yield hosted


def append(host: PartitionHost, partition: int, batch: bytes) -> None:
    data = broker_pb2.ProduceRequest.PartitionData(partition=partition, records=batch)
    topic = broker_pb2.ProduceRequest.TopicData(name="t", partitions=[data])
    answer, _ = produce(host, broker_pb2.ProduceRequest(acks=1, topics=[topic]), 5)
    assert answer.topics[0].partitions[0].error_code == 0


def request(
    *partitions: int, max_wait_ms: int = 0, session: bool = False, **fields: object
) -> broker_pb2.FetchRequest:
    wanted = [
        broker_pb2.FetchRequest.PartitionData(partition=p, fetch_offset=0) for p in partitions
    ]
    fetch = broker_pb2.FetchRequest(max_wait_ms=max_wait_ms, **fields)  # type: ignore[arg-type]
    fetch.topics.add(name="t", topic_id=TOPIC_ID).partitions.extend(wanted)
    if session:
        fetch.session_id, fetch.session_epoch = 0, 0
    return fetch


def record_bytes(answer: object) -> int:
    return sum(map(len, answer.records.values()))  # type: ignore[attr-defined]


@pytest.mark.parametrize("session", [False, True], ids=["sessionless", "in-session"])
def test_an_answer_holds_its_bytes_until_released(host: PartitionHost, session: bool) -> None:
    gate = AnswerGate(200_000)  # 100,000 answer bytes
    sessions = FetchSessionCache() if session else None
    answer = asyncio.run(fetch_answer(host, request(0, 1, session=session), sessions, gate))
    assert record_bytes(answer) == 6 * len(BATCH)
    assert answer.held_bytes == gate.held_bytes == record_bytes(answer)
    gate.release(answer.held_bytes)
    assert gate.held_bytes == 0


@pytest.mark.parametrize("session", [False, True], ids=["sessionless", "in-session"])
def test_an_answer_is_cut_to_the_room_left(host: PartitionHost, session: bool) -> None:
    gate = AnswerGate(200_000)  # 100,000 answer bytes
    gate.hold(gate.room_bytes(None) - int(2.5 * len(BATCH)), None)
    sessions = FetchSessionCache() if session else None
    answer = asyncio.run(fetch_answer(host, request(0, 1, session=session), sessions, gate))
    assert record_bytes(answer) == 2 * len(BATCH), "two batches fit the room; the rest waits"
    assert gate.held_bytes <= 100_000


def test_a_first_batch_larger_than_the_room_is_not_read_and_the_fetch_answers_empty(
    host: PartitionHost,
) -> None:
    # KIP-74 returns a first batch whole even past max_bytes; past the budget it must not.
    gate = AnswerGate(200_000)  # 100,000 answer bytes
    others = gate.hold(gate.room_bytes(None) - len(BATCH) // 2, None)
    answer = asyncio.run(fetch_answer(host, request(0, max_wait_ms=20), None, gate))
    assert answer.records == {} and answer.held_bytes == 0
    result = answer.response.topics[0].partitions[0]
    assert (result.error_code, result.next_fetch_offset) == (0, 0), "the client asks again"
    assert gate.held_bytes == others and not gate.budget.waiting, "it left the line"


def test_a_waiting_fetch_is_served_once_bytes_are_released(host: PartitionHost) -> None:
    gate = AnswerGate(200_000)  # 100,000 answer bytes

    async def scenario() -> int:
        others = gate.hold(gate.room_bytes(None), None)
        waiting = asyncio.ensure_future(
            fetch_answer(host, request(0, max_wait_ms=60_000), None, gate)
        )
        while not gate.budget.waiting:  # it read nothing, and took its place in line
            await asyncio.sleep(0)
        assert gate.room_bytes(None) == 0, "a newcomer goes behind it"
        gate.release(others)
        answer = await waiting
        assert not gate.budget.waiting
        return record_bytes(answer)

    assert asyncio.run(scenario()) == 3 * len(BATCH)


def test_a_cancelled_fetch_leaves_the_line_and_holds_nothing(host: PartitionHost) -> None:
    gate = AnswerGate(200_000)  # 100,000 answer bytes

    async def scenario() -> None:
        others = gate.hold(gate.room_bytes(None), None)
        waiting = asyncio.ensure_future(
            fetch_answer(host, request(0, max_wait_ms=60_000), None, gate)
        )
        while not gate.budget.waiting:
            await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not gate.budget.waiting
        gate.release(others)
        assert gate.held_bytes == 0 and gate.room_bytes(None) == 100_000

    asyncio.run(scenario())


def test_followers_fetches_are_exempt(tmp_path: Path) -> None:
    gate = AnswerGate(200_000)  # 100,000 answer bytes
    gate.hold(gate.room_bytes(None), None)
    with hosting(tmp_path, two_broker_image(TOPIC_ID, 1)) as leader:  # broker 2 follows
        for _ in range(3):
            append(leader, 0, BATCH)
        answer = asyncio.run(fetch_answer(leader, request(0, replica_id=2), None, gate))
    assert record_bytes(answer) == 3 * len(BATCH), "strangers' answers never stall replication"
    assert answer.held_bytes == 0


def test_a_decoded_first_batch_larger_than_the_room_is_not_returned(host: PartitionHost) -> None:
    # With decode_records the records count as they decode: the room bounds those bytes.
    gate = AnswerGate(200_000)  # 100,000 answer bytes
    others = gate.hold(gate.room_bytes(None) - len(BATCH) // 2, None)
    typed = request(0, max_wait_ms=20, decode_records=True)
    answer = asyncio.run(fetch_answer(host, typed, None, gate))
    assert not answer.response.topics[0].partitions[0].decoded_records
    assert answer.held_bytes == 0 and not gate.budget.waiting
    gate.release(others)
    answer = asyncio.run(fetch_answer(host, typed, None, gate))
    assert len(answer.response.topics[0].partitions[0].decoded_records) == 3
    assert 3 * 1000 < answer.held_bytes == gate.held_bytes


class Context:
    async def abort(self, code: object, details: str) -> None:
        raise AssertionError(details)


async def requests_of(*fetches: broker_pb2.FetchRequest) -> AsyncIterator[object]:
    for fetch in fetches:
        yield broker_pb2.FetchStreamRequest(request=fetch)


def test_a_stream_releases_an_answer_once_written_and_when_it_ends_unwritten(
    host: PartitionHost,
) -> None:
    gate = AnswerGate(200_000)  # 100,000 answer bytes

    async def scenario() -> None:
        stream = serve_fetch_stream(
            host,
            FetchSessionCache(),
            requests_of(request(0), request(1)),  # type: ignore[arg-type]
            Context(),  # type: ignore[arg-type]
            gate,
        )
        await anext(stream)  # the first answer, being written
        assert gate.held_bytes == 3 * len(BATCH), "held while gRPC writes it"
        await anext(stream)  # written; the second one is being written
        assert gate.held_bytes == 3 * len(BATCH), "the first was released"
        await stream.aclose()  # the client went away with the second unwritten
        assert gate.held_bytes == 0

    asyncio.run(scenario())
