"""Goal: a served request stream ends as its service drains, without waiting out the server's
grace period: every request it read is answered, none is read after, and the client learns why
(UNAVAILABLE, DRAINED's message) while the server still runs.

Method: a real grpc.aio server and client over loopback in one event loop; the handler is built on
StreamAnswers as the broker's and the coordinator's streams are, with raw bytes for messages. One
stream's reader runs each request as a task (`answer_each`, the coordinator's streams); the
other is busy with each request inline (as the produce stream is, while it verifies a
transactional batch).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest

from samsa.services.runtime.stream_answers import DRAINED, Draining, StreamAnswers

METHOD = "/test.Drain/Answer"


class Service:
    """Answers each request `b"x"` with `b"answer:x"`; a reader `busy` with each request until
    `release` is set (else each request is answered as a task of its own)."""

    def __init__(self, *, busy: bool) -> None:
        self.busy = busy
        self.draining = Draining()
        self.release = asyncio.Event()
        self.read: list[bytes] = []

    async def handle(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        stream: StreamAnswers[bytes] = StreamAnswers(self.draining)

        async def answer(item: bytes) -> None:
            self.read.append(item)
            await stream.put(b"answer:" + item)

        async def busy_reader() -> None:
            async for item in stream.requests(requests):
                self.read.append(item)
                await self.release.wait()
                await stream.put(b"answer:" + item)
            await stream.end()

        reader = busy_reader() if self.busy else stream.answer_each(requests, _none, answer)
        async for response in stream.serve(reader, context):
            yield response


def _none(item: bytes) -> None:
    return None


@contextlib.asynccontextmanager
async def serving(service: Service) -> AsyncIterator[grpc.aio.Channel]:
    """A server for `service` on a free loopback port, and a channel to it; both closed after."""
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(service.handle)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Drain", {"Answer": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel
    finally:
        await channel.close()
        await server.stop(None)


async def ending(call: grpc.aio.StreamStreamCall) -> tuple[grpc.StatusCode, str]:
    """The status the stream ends with, once every answer left is read (there must be none)."""
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        async with asyncio.timeout(10):  # a stream that never ends fails here, not at 300 s
            assert await call.read() is grpc.aio.EOF, "an answer nobody expected"
    return ended.value.code(), ended.value.details()


async def until(what: str, probe, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def test_a_stream_waiting_for_its_next_request_ends_when_the_service_drains() -> None:
    async def scenario() -> None:
        service = Service(busy=False)
        async with serving(service) as channel:
            call = channel.stream_stream(METHOD)()
            await call.write(b"a")
            assert await call.read() == b"answer:a"
            assert service.draining.streams_open == 1, "a stopping broker waits only for these"
            service.draining.set()
            assert await ending(call) == DRAINED
            # A stream opened while the service drains takes no request at all.
            late = channel.stream_stream(METHOD)()
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                await late.write(b"b")
            assert await ending(late) == DRAINED
            assert service.read == [b"a"]
            await until("both streams counted out", lambda: service.draining.streams_open == 0)

    asyncio.run(scenario())


def test_a_stream_busy_with_a_request_answers_it_and_reads_no_more() -> None:
    async def scenario() -> None:
        service = Service(busy=True)
        async with serving(service) as channel:
            call = channel.stream_stream(METHOD)()
            await call.write(b"first")
            await until("the first request read", lambda: service.read == [b"first"])
            service.draining.set()
            await call.write(b"second")  # sent while draining: never read
            service.release.set()
            assert await call.read() == b"answer:first"
            assert await ending(call) == DRAINED
            assert service.read == [b"first"]

    asyncio.run(scenario())


def test_without_draining_a_stream_ends_when_its_client_is_done() -> None:
    async def scenario() -> None:
        service = Service(busy=False)
        async with serving(service) as channel:
            call = channel.stream_stream(METHOD)()
            await call.write(b"a")
            await call.done_writing()
            assert await call.read() == b"answer:a"
            assert await call.read() is grpc.aio.EOF
            assert await call.code() == grpc.StatusCode.OK

    asyncio.run(scenario())
