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
        return broker_pb2.ProduceStreamResponse(correlation_id=correlation_id)

    def cancel(self) -> bool:
        self.cancelled = True
        return True


def test_a_failing_answer_handler_breaks_the_stream_for_the_requests_still_waiting() -> None:
    async def run() -> None:
        calls: list[FakeCall] = []

        def open_call(outgoing: AsyncIterator[bytes]) -> FakeCall:
            calls.append(FakeCall(outgoing))
            return calls[-1]

        stream = ProduceStream(open_call)  # type: ignore[arg-type]
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
