"""Goal: what AnswerWriteDeadline (services/broker/requests/answer_write_deadline.py) relies on in
grpc.aio still holds: cancelling a handler's task and the task that awaits its call's close makes
gRPC's core cancel the call, so that an answer the client never read is dropped, the client's
next read raises CANCELLED, and the connection keeps serving the client's other calls. A gRPC
upgrade that changes this fails here rather than in production.

Method: a grpc.aio server in this process (asyncio's loop and uvloop), with the deadline
installed at 1 s, answers a bidi stream and a unary method with 8 MiB each, arming the deadline
as the brokers' FetchStream and Fetch do (through an AnswerGate). A raw client sends STREAMS
stream requests and UNARY unary ones (over the unary method's path, as a stream, so that it
never reads the answer), after a first small call (see below), and reads nothing. Once every
deadline has fired and the gate's bytes are back, one small call on the same channel must
succeed (it also makes gRPC's accept loop let go of the last call it accepted), then every
unread call's read must raise CANCELLED.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import grpc
import pytest

from samsa.common import event_loops
from samsa.services.broker.requests.answer_gate import AnswerGate
from samsa.services.broker.requests.answer_write_deadline import AnswerWriteDeadline
from samsa.services.runtime.request_iterators import close_requests

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024
ANSWER_BYTES = 8 * MIB
STREAMS = 4
UNARY = 2
SERVICE = "deadline.test.Answers"
# No BDP probing: the client's flow-control window stays small, so no answer is written whole.
OPTIONS = [
    ("grpc.http2.bdp_probe", 0),
    ("grpc.max_receive_message_length", 2 * ANSWER_BYTES),
    ("grpc.max_send_message_length", 2 * ANSWER_BYTES),
]


def answers_server(gate: AnswerGate) -> grpc.aio.Server:
    async def stream(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        deadline = gate.write_deadline
        assert deadline is not None
        try:
            async for _ in requests:
                held_bytes = gate.hold(ANSWER_BYTES, None)
                timer = deadline.arm("Stream", held_bytes, context)
                assert timer is not None, "the deadline did not find gRPC's tasks"
                try:
                    yield bytes(ANSWER_BYTES)
                finally:
                    timer.cancel()
                    gate.release(held_bytes)
        finally:
            await close_requests(requests)

    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        gate.release_when_written(gate.hold(ANSWER_BYTES, None), context)
        return bytes(ANSWER_BYTES)

    async def small(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"small"

    server = grpc.aio.server(options=OPTIONS)
    handlers = {
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Small": grpc.unary_unary_rpc_method_handler(small),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    return server


async def wait_for(what: str, condition: Callable[[], bool]) -> None:
    for _ in range(600):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def unread_calls_end_with_cancelled() -> None:
    deadline = AnswerWriteDeadline(timeout_ms=1000)
    deadline.install(asyncio.get_running_loop())
    gate = AnswerGate(4 * (STREAMS + UNARY) * ANSWER_BYTES, deadline)
    server = answers_server(gate)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS)
    try:
        # gRPC's accept loop keeps the first call a server accepts for its whole life (a local
        # of `_server_main_loop`, see answer_write_deadline.py): not a stranger's here.
        small = channel.unary_unary(f"/{SERVICE}/Small")
        assert await small(b"", timeout=10) == b"small"
        calls = []
        for path, count in ((f"/{SERVICE}/Stream", STREAMS), (f"/{SERVICE}/Unary", UNARY)):
            for _ in range(count):
                call = channel.stream_stream(path)()
                await call.write(b"fetch")
                calls.append(call)
        await wait_for("every answer to be held", lambda: gate.held_bytes > 0)
        await wait_for("the deadline to end every call", lambda: deadline.ended_count == len(calls))
        await wait_for("the gate's bytes to be back", lambda: gate.held_bytes == 0)
        assert await small(b"", timeout=10) == b"small", "the connection serves other calls"
        for number, call in enumerate(calls):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await asyncio.wait_for(call.read(), 10)
            assert raised.value.code() == grpc.StatusCode.CANCELLED, (number, raised.value)
    finally:
        await channel.close()
        await server.stop(None)


@pytest.mark.parametrize("loop_kind", event_loops.CHOICES)
def test_unread_answers_are_dropped_at_the_deadline(
    loop_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(event_loops.ENVIRONMENT_VARIABLE, loop_kind)
    loop = event_loops.new_event_loop()
    try:
        loop.run_until_complete(unread_calls_end_with_cancelled())
    finally:
        loop.close()
