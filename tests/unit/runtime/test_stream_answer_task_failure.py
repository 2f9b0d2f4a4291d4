"""Goal: a request stream whose requests each run as a task of their own (`answer_each`, the
coordinator's AddPartitionsToTxnStream and TransactionStream) ends with INTERNAL when one of those
tasks raises (a bug, a broken assertion), as the stream's reader and handler do. The task's
exception used to die with it: nothing answered its request, the stream stayed open, and the
client waited for that answer until its own deadline.

Method: a real GrpcServer (the RPC guard installed as in production) on a loopback port, serving
a stream built on StreamAnswers.answer_each whose answer raises for one request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from samsa.services.runtime.server import GrpcServer
from samsa.services.runtime.stream_answers import Draining, StreamAnswers

SERVICE = "test.AnswerTasks"


async def _answer_each(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
) -> AsyncIterator[bytes]:
    stream: StreamAnswers[bytes] = StreamAnswers(Draining())

    async def answer(item: bytes) -> None:
        if item == b"bug":
            raise AssertionError("an invariant broke")
        await stream.put(b"answer:" + item)

    reader = stream.answer_each(requests, lambda item: None, answer)
    async for response in stream.serve(reader, context):
        yield response


def test_an_answer_task_that_raises_ends_the_stream_with_internal() -> None:
    async def scenario() -> None:
        server = GrpcServer("127.0.0.1:0", [SERVICE], tracing=False)
        handler = grpc.stream_stream_rpc_method_handler(_answer_each)
        server.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"Answer": handler}),)
        )
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                call = channel.stream_stream(f"/{SERVICE}/Answer")()
                await call.write(b"a")
                assert await call.read() == b"answer:a"
                await call.write(b"bug")
                with pytest.raises(grpc.aio.AioRpcError) as ended:
                    async with asyncio.timeout(5):  # it hung here, waiting for an answer
                        await call.read()
                assert ended.value.code() == grpc.StatusCode.INTERNAL, ended.value
                assert "AssertionError" in (ended.value.details() or "")
        finally:
            await server.server.stop(0)

    asyncio.run(scenario())
