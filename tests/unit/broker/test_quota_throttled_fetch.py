"""Goal: a consumer's fetch held back by its quota keeps its bytes of the answer budget while it
waits, releases them if the call ends meanwhile (the client went away: nothing is left held),
and otherwise answers with throttle_time_ms set; on unary Fetch and on FetchStream alike.

Method: real logs in a temp dir (broker_host) whose image carries a default consumer quota,
the real BrokerServicer.Fetch and serve_fetch_stream with an AnswerGate and a stand-in call
context carrying the client.id metadata. The waits end by cancellation or by the throttle
itself (well under a second): no timed assertion.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.record.codec import build_batch
from samsa.metadata.client_quotas import CLIENT_ID_METADATA_KEY, CONSUMER_BYTE_RATE, DEFAULT_CLIENT
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.answer_gate import AnswerGate
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.broker.requests.fetch_stream import serve_fetch_stream
from samsa.services.broker.requests.produce import produce
from samsa.services.broker.requests.quota_throttle import QuotaThrottle
from samsa.services.broker.servicer import BrokerServicer
from samsa.v1 import broker_pb2

TOPIC_ID = b"\x0d" * 16
BATCH = build_batch([b"x" * 1000])


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    with hosting(tmp_path, single_broker_image({"t": (TOPIC_ID, led_partitions(1))})) as hosted:
        for _ in range(3):
            data = broker_pb2.ProduceRequest.PartitionData(partition=0, records=BATCH)
            topic = broker_pb2.ProduceRequest.TopicData(name="t", partitions=[data])
            produce(hosted, broker_pb2.ProduceRequest(acks=1, topics=[topic]), 5)
        yield hosted


def with_quota(host: PartitionHost, bytes_per_s: float) -> None:
    quotas = {DEFAULT_CLIENT: {CONSUMER_BYTE_RATE: bytes_per_s}}
    host.image = dataclasses.replace(host.image, client_quotas=quotas)


class Context:
    def auth_context(self) -> dict[str, list[bytes]]:
        return {}  # plaintext: the user is ANONYMOUS

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((CLIENT_ID_METADATA_KEY, "reader"),)

    async def abort(self, code: object, details: str) -> None:
        raise AssertionError(details)


def fetch() -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(max_wait_ms=0)
    request.topics.add(name="t", topic_id=TOPIC_ID).partitions.add(partition=0, fetch_offset=0)
    return request


async def requests_of(*fetches: broker_pb2.FetchRequest) -> AsyncIterator[object]:
    for request in fetches:
        yield broker_pb2.FetchStreamRequest(request=request)


async def cancelled_while_throttled(call: asyncio.Task[object], gate: AnswerGate) -> None:
    while gate.held_bytes == 0:  # read, now waiting out its throttle
        if call.done():  # it failed, or answered unthrottled: say how, rather than wait forever
            raise AssertionError(f"the fetch ended before it was throttled: {call.result()}")
        await asyncio.sleep(0.001)
    assert not call.done()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


def test_a_unary_fetch_cancelled_while_throttled_holds_nothing(host: PartitionHost) -> None:
    with_quota(host, 1.0)  # 3 KB at 1 B/s: throttled for the whole window
    gate = AnswerGate(200_000)
    servicer = BrokerServicer(host, member_key=b"k" * 32, producer_ids=None, answer_gate=gate)  # type: ignore[arg-type]

    async def scenario() -> None:
        call = asyncio.ensure_future(servicer.Fetch(fetch(), Context()))
        await cancelled_while_throttled(call, gate)
        assert gate.held_bytes == 0

    asyncio.run(scenario())


def test_a_stream_fetch_cancelled_while_throttled_holds_nothing(host: PartitionHost) -> None:
    with_quota(host, 1.0)
    gate = AnswerGate(200_000)

    async def scenario() -> None:
        stream = serve_fetch_stream(
            host,
            FetchSessionCache(),
            requests_of(fetch()),
            Context(),
            gate,
            QuotaThrottle(host),  # type: ignore[arg-type]
        )
        call = asyncio.ensure_future(anext(stream))
        await cancelled_while_throttled(call, gate)  # type: ignore[arg-type]
        await stream.aclose()
        assert gate.held_bytes == 0

    asyncio.run(scenario())


def test_a_throttled_stream_answer_says_how_long_it_was_held(host: PartitionHost) -> None:
    with_quota(host, 2_500.0)  # ~3 KB in the first second: a fraction of a second over
    gate = AnswerGate(200_000)

    async def scenario() -> broker_pb2.FetchStreamResponse:
        stream = serve_fetch_stream(
            host,
            FetchSessionCache(),
            requests_of(fetch()),
            Context(),
            gate,
            QuotaThrottle(host),  # type: ignore[arg-type]
        )
        message = await anext(stream)
        await stream.aclose()
        return broker_pb2.FetchStreamResponse.FromString(message)

    answer = asyncio.run(scenario())
    assert answer.response.topics[0].partitions[0].records
    assert 0 < answer.response.throttle_time_ms < 1000
    assert gate.held_bytes == 0
