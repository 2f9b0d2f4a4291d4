"""Goal: the coordinator's stream of internal writes (internal_produce_stream.py, and the markers'
stream, internal_markers_stream.py, on the same common/request_stream.py) gives each
write its own answer even when the broker answers out of order, opens with the membership proof
in its metadata, carries a sampled caller's trace context, and never leaves a write waiting: a
write with no answer in time breaks the stream and fails every write on it (their outcome is
unknown; the writer resends with the same sequence), as does a stream the broker ends.

Method: a fake stub whose ProduceStream is an async iterator the test feeds by hand, on one
event loop (no gRPC, no broker).
"""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from samsa.common.request_stream import StreamBrokenError
from samsa.services.coordinator.internal_markers_stream import InternalMarkersStream
from samsa.services.coordinator.internal_produce_stream import InternalProduceStream
from samsa.v1 import broker_pb2

PROOF = (("samsa-member-auth", "v1.1.0.nonce.mac"),)


class FakeCall:
    """A ProduceStream call: reads the requests, yields what the test answers."""

    def __init__(self, requests) -> None:  # type: ignore[no-untyped-def]
        self.sent: list[broker_pb2.ProduceStreamRequest] = []
        self.answers: asyncio.Queue[broker_pb2.ProduceStreamResponse | None] = asyncio.Queue()
        self.cancelled = False
        self._pump = asyncio.get_running_loop().create_task(self._read(requests))

    async def _read(self, requests) -> None:  # type: ignore[no-untyped-def]
        async for request in requests:
            self.sent.append(request)

    def answer(self, correlation_id: int, base_offset: int) -> None:
        response = broker_pb2.ProduceResponse(
            topics=[
                broker_pb2.ProduceResponse.TopicResponse(
                    name="t",
                    partitions=[
                        broker_pb2.ProduceResponse.PartitionResponse(
                            partition=0, base_offset=base_offset
                        )
                    ],
                )
            ]
        )
        self.answers.put_nowait(
            broker_pb2.ProduceStreamResponse(correlation_id=correlation_id, response=response)
        )

    def end(self) -> None:
        self.answers.put_nowait(None)

    def cancel(self) -> None:
        self.cancelled = True
        self.answers.put_nowait(None)

    def __aiter__(self):  # type: ignore[no-untyped-def]
        return self

    async def __anext__(self) -> broker_pb2.ProduceStreamResponse:
        item = await self.answers.get()
        if item is None:
            raise StopAsyncIteration
        return item


class FakeStub:
    def __init__(self) -> None:
        self.calls: list[tuple[FakeCall, object]] = []

    def ProduceStream(self, requests, metadata=None):  # type: ignore[no-untyped-def]
        call = FakeCall(requests)
        self.calls.append((call, metadata))
        return call

    WriteTxnMarkersStream = ProduceStream  # the fake answers whatever the test puts in


def request() -> broker_pb2.ProduceRequest:
    return broker_pb2.ProduceRequest(acks=-1)


async def until(condition) -> None:  # type: ignore[no-untyped-def]
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def offset_of(response: broker_pb2.ProduceResponse) -> int:
    return response.topics[0].partitions[0].base_offset


def test_answers_out_of_order_reach_their_own_writes_and_the_proof_opens_the_stream():
    async def run() -> None:
        stub = FakeStub()
        stream = InternalProduceStream(stub, PROOF)  # type: ignore[arg-type]
        call, metadata = stub.calls[0]
        assert metadata == PROOF
        first = asyncio.ensure_future(stream.produce(request(), 5))
        second = asyncio.ensure_future(stream.produce(request(), 5))
        await until(lambda: len(call.sent) == 2)
        ids = [item.correlation_id for item in call.sent]
        assert len(set(ids)) == 2
        call.answer(ids[1], 20)
        call.answer(ids[0], 10)
        assert (offset_of(await first), offset_of(await second)) == (10, 20)
        await stream.close()

    asyncio.run(run())


def test_a_write_with_no_answer_in_time_breaks_the_stream_and_every_write_on_it():
    async def run() -> None:
        stub = FakeStub()
        stream = InternalProduceStream(stub, PROOF)  # type: ignore[arg-type]
        call, _ = stub.calls[0]
        patient = asyncio.ensure_future(stream.produce(request(), 30))
        with pytest.raises(StreamBrokenError, match=r"no answer within 0\.05 s"):
            await stream.produce(request(), 0.05)
        with pytest.raises(StreamBrokenError):
            await patient
        assert stream.broken and call.cancelled
        with pytest.raises(StreamBrokenError, match="closed"):
            await stream.produce(request(), 5)
        await stream.close()

    asyncio.run(run())


def test_a_stream_the_broker_ends_fails_the_writes_waiting_on_it():
    async def run() -> None:
        stub = FakeStub()
        stream = InternalProduceStream(stub, PROOF)  # type: ignore[arg-type]
        call, _ = stub.calls[0]
        waiting = asyncio.ensure_future(stream.produce(request(), 30))
        await until(lambda: len(call.sent) == 1)
        call.end()
        with pytest.raises(StreamBrokenError, match="the server ended the stream"):
            await waiting
        assert stream.broken
        await stream.close()

    asyncio.run(run())


def test_a_write_inside_a_sampled_span_carries_its_trace_context():
    async def run(tracer: trace.Tracer) -> None:
        stub = FakeStub()
        stream = InternalProduceStream(stub, PROOF)  # type: ignore[arg-type]
        call, _ = stub.calls[0]
        untraced = asyncio.ensure_future(stream.produce(request(), 5))
        with tracer.start_as_current_span("commit") as span:
            traced = asyncio.ensure_future(stream.produce(request(), 5))
            trace_id = format(span.get_span_context().trace_id, "032x")
        await until(lambda: len(call.sent) == 2)
        assert call.sent[0].traceparent == ""
        assert call.sent[1].traceparent.startswith(f"00-{trace_id}-")
        for item in call.sent:
            call.answer(item.correlation_id, 0)
        await asyncio.gather(untraced, traced)
        await stream.close()

    asyncio.run(run(TracerProvider().get_tracer("test")))


def test_markers_go_on_their_own_stream_opened_with_the_proof_and_answered_by_id():
    async def run() -> None:
        stub = FakeStub()
        stream = InternalMarkersStream(stub, PROOF)  # type: ignore[arg-type]
        call, metadata = stub.calls[0]
        assert metadata == PROOF
        marker = broker_pb2.WriteTxnMarkersRequest(timeout_ms=5_000)
        marker.markers.add(producer_id=42, producer_epoch=3, committed=True)
        first = asyncio.ensure_future(stream.send(marker, 5))
        second = asyncio.ensure_future(stream.send(marker, 5))
        await until(lambda: len(call.sent) == 2)
        assert all(isinstance(i, broker_pb2.WriteTxnMarkersStreamRequest) for i in call.sent)
        assert call.sent[0].request == marker
        for item, producer_id in zip(reversed(call.sent), (2, 1), strict=True):
            answer = broker_pb2.WriteTxnMarkersResponse()
            answer.markers.add(producer_id=producer_id)
            call.answers.put_nowait(
                broker_pb2.WriteTxnMarkersStreamResponse(
                    correlation_id=item.correlation_id, response=answer
                )
            )
        answers = [await first, await second]
        assert [answer.markers[0].producer_id for answer in answers] == [1, 2]
        await stream.close()

    asyncio.run(run())
