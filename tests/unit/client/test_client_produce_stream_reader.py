"""Goal: when handling one answer of a ProduceStream fails (a bug in a callback), the stream is
broken at once and every request still waiting on it fails with a retriable error, instead of
waiting for its deadline (request.timeout.ms, 30 s by default) on a stream nobody reads.

Method: a ProduceStream over a fake call that answers correlation ids as a test releases them;
callbacks record what they get.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from samsa.client.produce_message import EncodedRequest
from samsa.client.produce_stream import ProduceStream, StreamBroken
from samsa.v1 import broker_pb2


class FakeCall:
    """Answers each correlation id put on `answers`; records cancel()."""

    def __init__(self, outgoing: AsyncIterator[bytes]) -> None:
        self.outgoing = outgoing
        self.answers: asyncio.Queue[int] = asyncio.Queue()
        self.cancelled = False

    def __aiter__(self) -> FakeCall:
        return self

    async def __anext__(self) -> broker_pb2.ProduceStreamResponse:
        correlation_id = await self.answers.get()
        if correlation_id < 0:  # cancelled: grpc.aio ends the iteration so
            raise asyncio.CancelledError
        return broker_pb2.ProduceStreamResponse(correlation_id=correlation_id)

    def cancel(self) -> bool:
        self.cancelled = True
        self.answers.put_nowait(-1)
        return True


def stream_over_fake_calls() -> tuple[ProduceStream, list[FakeCall]]:
    """A ProduceStream and the fake calls it opened (one, until it breaks)."""
    calls: list[FakeCall] = []

    def open_call(outgoing: AsyncIterator[bytes]) -> FakeCall:
        calls.append(FakeCall(outgoing))
        return calls[-1]

    return ProduceStream(open_call), calls  # type: ignore[arg-type]


def test_a_failing_answer_handler_breaks_the_stream_for_the_requests_still_waiting() -> None:
    async def run() -> None:
        stream, calls = stream_over_fake_calls()
        outcomes: list[tuple[object, object]] = []

        def broken_handler(response: object, error: object) -> None:
            raise RuntimeError("a bug in an answer's handling")

        request = EncodedRequest([], 0)
        assert stream.send(request, broken_handler, timeout_s=30)
        assert stream.send(request, lambda r, e: outcomes.append((r, e)), timeout_s=30)
        calls[0].answers.put_nowait(0)  # the first request's answer: its handler raises
        for _ in range(100):
            if outcomes:
                break
            await asyncio.sleep(0.001)
        assert len(outcomes) == 1, "the waiting request failed at once"
        response, error = outcomes[0]
        assert response is None and isinstance(error, StreamBroken)
        assert error.code() == grpc.StatusCode.INTERNAL, "retriable on a stream"
        assert "handling an answer failed" in error.details()
        assert stream.broken and calls[0].cancelled
        assert not stream.send(request, broken_handler, timeout_s=30), "open another"
        await stream.close()

    asyncio.run(run())


def test_a_request_past_its_delivery_deadline_fails_alone() -> None:
    """A request whose deadline is its batches' delivery deadline (not request.timeout.ms) says
    nothing about the broker: it fails alone and the stream goes on, so the other requests on
    it (other partitions' batches, answered in time) are not failed and sent again. A request
    past request.timeout.ms still breaks the stream, as Kafka drops the connection."""

    async def run() -> None:
        stream, calls = stream_over_fake_calls()
        late: list[tuple[object, object]] = []
        on_time: list[tuple[object, object]] = []
        request = EncodedRequest([], 0)
        reason = "no answer by the delivery deadline"
        assert stream.send(
            request, lambda r, e: late.append((r, e)), 0.0, deadline_reason=reason, breaks=False
        )
        assert stream.send(request, lambda r, e: on_time.append((r, e)), timeout_s=30)
        await asyncio.sleep(0.01)
        stream.expire()
        assert len(late) == 1 and late[0][0] is None
        error = late[0][1]
        assert isinstance(error, StreamBroken) and error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert reason in error.details()
        assert not stream.broken and not calls[0].cancelled and not on_time
        calls[0].answers.put_nowait(0)  # the late answer comes after all: ignored
        calls[0].answers.put_nowait(1)
        for _ in range(100):
            if on_time:
                break
            await asyncio.sleep(0.001)
        assert on_time and on_time[0][1] is None and len(late) == 1
        assert stream.send(request, lambda r, e: late.append((r, e)), 0.0)  # request.timeout.ms
        await asyncio.sleep(0.01)
        stream.expire()
        assert stream.broken and calls[0].cancelled and len(late) == 2
        await stream.close()

    asyncio.run(run())
