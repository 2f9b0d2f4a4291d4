"""Goal: whatever bytes arrive and whatever our handlers raise, a call ends with a status a
client can act on, within its deadline, and a flood costs a bounded number of log lines:
undecodable requests answer INVALID_ARGUMENT (never grpc's UNKNOWN "Unexpected DecodeError"),
a handler's unexpected exception answers INTERNAL (logged, not masked), aborts pass through, and
ProduceStream ends with INVALID_ARGUMENT on garbage mid-stream instead of hanging.

Method: a real grpc.aio server on a loopback port, in this process, built by
`samsa.services.runtime.server.GrpcServer` (so the guard is installed as in production), serving
small test handlers and the real BrokerServicer (whose ProduceStream fails before it reaches the
partition host). Clients send raw bytes with identity serializers. Log lines are counted with
pytest's caplog; the guard's clock is a fake one, so windows pass without sleeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest
from wire_fields import length_delimited

from samsa.common import limits
from samsa.services.broker.servicer import BrokerServicer, add_broker_service
from samsa.services.runtime import request_shape
from samsa.services.runtime import server as server_module
from samsa.services.runtime.server import GrpcServer, RpcGuard
from samsa.v1 import broker_pb2

GARBAGE = b"\xff\xff\xff"  # a field header with no end: never valid protobuf
SERVICE = "test.Guarded"


async def _echo(request: broker_pb2.ProduceRequest, context: grpc.aio.ServicerContext):
    return request


async def _explode(request: broker_pb2.ProduceRequest, context: grpc.aio.ServicerContext):
    raise ZeroDivisionError("secret internals")


async def _abort(request: broker_pb2.ProduceRequest, context: grpc.aio.ServicerContext):
    await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")


async def _stream_then_explode(request, context) -> AsyncIterator[broker_pb2.ProduceRequest]:
    yield request
    raise KeyError("boom")


async def _count(requests: AsyncIterator[broker_pb2.ProduceRequest], context):
    count = 0
    async for _ in requests:
        count += 1
    return broker_pb2.ProduceRequest(timeout_ms=count)


def _handlers() -> grpc.GenericRpcHandler:
    parse = broker_pb2.ProduceRequest.FromString
    write = broker_pb2.ProduceRequest.SerializeToString
    options = {"request_deserializer": parse, "response_serializer": write}
    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Echo": grpc.unary_unary_rpc_method_handler(_echo, **options),
            "Explode": grpc.unary_unary_rpc_method_handler(_explode, **options),
            "Abort": grpc.unary_unary_rpc_method_handler(_abort, **options),
            "StreamExplode": grpc.unary_stream_rpc_method_handler(_stream_then_explode, **options),
            "Count": grpc.stream_unary_rpc_method_handler(_count, **options),
        },
    )


def serve(scenario: Callable[[grpc.aio.Channel], Awaitable[None]], *, guard: bool = True) -> None:
    """Run `scenario` against a fresh server (the production GrpcServer, or a bare one)."""

    async def main() -> None:
        if guard:
            server = GrpcServer("127.0.0.1:0", [SERVICE], tracing=False)
        else:
            server = GrpcServer.__new__(GrpcServer)
            server.server = grpc.aio.server()
            server.listen = "127.0.0.1:0"
        server.server.add_generic_rpc_handlers((_handlers(),))
        add_broker_service(
            BrokerServicer(None, member_key=b"k" * 32, producer_ids=None),  # type: ignore[arg-type]
            server.server,
        )
        if guard:
            await server.start()
        else:
            server.port = server.server.add_insecure_port(server.listen)
            await server.server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                await scenario(channel)
        finally:
            await server.server.stop(0)

    asyncio.run(main())


async def unary_status(channel: grpc.aio.Channel, method: str, payload: bytes):
    try:
        await channel.unary_unary(method)(payload, timeout=5)
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details()
    return grpc.StatusCode.OK, ""


def test_undecodable_request_answers_invalid_argument_naming_the_type() -> None:
    async def scenario(channel: grpc.aio.Channel) -> None:
        code, details = await unary_status(channel, "/samsa.v1.BrokerService/Produce", GARBAGE)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert details.startswith("the request is not a valid samsa.v1.ProduceRequest: ")
        code, details = await unary_status(channel, f"/{SERVICE}/Echo", GARBAGE)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        valid = broker_pb2.ProduceRequest(timeout_ms=7).SerializeToString()
        assert await unary_status(channel, f"/{SERVICE}/Echo", valid) == (grpc.StatusCode.OK, "")

    serve(scenario)


def test_unexpected_exception_answers_internal_and_is_logged(caplog) -> None:
    async def scenario(channel: grpc.aio.Channel) -> None:
        code, details = await unary_status(channel, f"/{SERVICE}/Explode", b"")
        assert code == grpc.StatusCode.INTERNAL, details
        assert "ZeroDivisionError" in details and "secret internals" not in details
        stream = channel.unary_stream(f"/{SERVICE}/StreamExplode")(b"", timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            async for _ in stream:
                pass
        assert failed.value.code() == grpc.StatusCode.INTERNAL

    with caplog.at_level(logging.WARNING):
        serve(scenario)
    errors = [r for r in caplog.records if r.name == server_module.__name__]
    assert [r.levelno for r in errors] == [logging.ERROR, logging.ERROR]
    assert errors[0].exc_info is not None, "a programmer error keeps its traceback"


def test_aborts_and_request_streams_pass_through() -> None:
    async def scenario(channel: grpc.aio.Channel) -> None:
        code, details = await unary_status(channel, f"/{SERVICE}/Abort", b"")
        assert (code, details) == (grpc.StatusCode.NOT_FOUND, "no such thing")
        count = channel.stream_unary(f"/{SERVICE}/Count")
        answer = await count(iter([b"", b"", b""]), timeout=5)
        assert broker_pb2.ProduceRequest.FromString(answer).timeout_ms == 3
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await count(iter([b"", GARBAGE, b""]), timeout=5)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    serve(scenario)


async def produce_stream_status(
    channel: grpc.aio.Channel, bad: bytes = GARBAGE
) -> tuple[grpc.StatusCode, float]:
    """`bad` after one good (empty) request; the client keeps its side open."""

    async def requests() -> AsyncIterator[bytes]:
        yield broker_pb2.ProduceStreamRequest(correlation_id=1).SerializeToString()
        yield bad
        await asyncio.sleep(30)

    loop = asyncio.get_running_loop()
    started = loop.time()
    call = channel.stream_stream("/samsa.v1.BrokerService/ProduceStream")(requests(), timeout=5)
    try:
        async for _ in call:
            pass
    except grpc.aio.AioRpcError as error:
        return error.code(), loop.time() - started
    return grpc.StatusCode.OK, loop.time() - started


def test_produce_stream_ends_with_invalid_argument_on_garbage_mid_stream() -> None:
    async def scenario(channel: grpc.aio.Channel) -> None:
        codes = await asyncio.gather(*(produce_stream_status(channel) for _ in range(20)))
        assert {code for code, _ in codes} == {grpc.StatusCode.INVALID_ARGUMENT}
        assert max(seconds for _, seconds in codes) < 2

    serve(scenario)


def test_produce_stream_ends_with_the_status_one_request_aborted_with() -> None:
    """_produce aborts (too many partitions) inside an answer task; the stream's task sends it."""
    too_many = broker_pb2.ProduceStreamRequest(
        correlation_id=2,
        request=broker_pb2.ProduceRequest(
            topics=[
                broker_pb2.ProduceRequest.TopicData(
                    name="t",
                    partitions=[
                        broker_pb2.ProduceRequest.PartitionData(partition=n)
                        for n in range(limits.request_partitions_max + 1)
                    ],
                )
            ]
        ),
    ).SerializeToString()

    async def scenario(channel: grpc.aio.Channel) -> None:
        codes = await asyncio.gather(*(produce_stream_status(channel, too_many) for _ in range(10)))
        assert {code for code, _ in codes} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert max(seconds for _, seconds in codes) < 3

    serve(scenario)


def test_produce_stream_ends_even_without_the_guard() -> None:
    """The servicer's own fix: a reader that dies ends the stream (grpc's UNKNOWN, no hang)."""

    async def scenario(channel: grpc.aio.Channel) -> None:
        code, seconds = await produce_stream_status(channel)
        assert code == grpc.StatusCode.UNKNOWN and seconds < 2

    serve(scenario, guard=False)


def test_a_flood_of_bad_requests_logs_a_bounded_number_of_lines(caplog, monkeypatch) -> None:
    now_ms = [0]
    monkeypatch.setattr(server_module, "RpcGuard", lambda: RpcGuard(clock_ms=lambda: now_ms[0]))

    async def scenario(channel: grpc.aio.Channel) -> None:
        for _ in range(200):
            code, _ = await unary_status(channel, f"/{SERVICE}/Echo", GARBAGE)
            assert code == grpc.StatusCode.INVALID_ARGUMENT
        now_ms[0] += limits.rpc_failure_log_window_ms
        await unary_status(channel, f"/{SERVICE}/Echo", GARBAGE)

    with caplog.at_level(logging.WARNING):
        serve(scenario)
    lines = [r for r in caplog.records if r.name == server_module.__name__]
    refused = [r for r in lines if r.getMessage().startswith("refused an undecodable request")]
    summaries = [r for r in lines if r.getMessage().startswith("suppressed")]
    assert len(refused) == limits.rpc_failure_log_lines_max + 1
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in refused)
    assert [r.suppressed for r in summaries] == [200 - limits.rpc_failure_log_lines_max]
    assert not [r for r in caplog.records if r.name.startswith("grpc")], "grpc logged too"


def _empty_fetch_topics(count: int) -> bytes:
    """A FetchRequest of `count` empty topic entries: two bytes each on the wire, ~50 parsed."""
    number = broker_pb2.FetchRequest.DESCRIPTOR.fields_by_name["topics"].number
    return bytes([(number << 3) | 2, 0]) * count


def test_a_request_that_would_parse_into_too_many_objects_is_refused_unparsed() -> None:
    """2 MB of empty entries parsed into ~50 MB (80 MiB of them into ~2 GB, and the Fetch
    answered OK): RESOURCE_EXHAUSTED naming the limit, before the parser or the handler runs;
    the same mid-stream."""
    hostile = _empty_fetch_topics(request_shape.ELEMENTS_MAX + 1)

    async def scenario(channel: grpc.aio.Channel) -> None:
        code, details = await unary_status(channel, "/samsa.v1.BrokerService/Fetch", hostile)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
        assert f"at most {request_shape.ELEMENTS_MAX}" in details
        produce = broker_pb2.ProduceStreamRequest.DESCRIPTOR.fields_by_name["request"].number
        topics = broker_pb2.ProduceRequest.DESCRIPTOR.fields_by_name["topics"].number
        inner = bytes([(topics << 3) | 2, 0]) * (request_shape.ELEMENTS_MAX + 1)
        item = length_delimited(produce, inner)
        status, seconds = await produce_stream_status(channel, item)
        assert status == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert seconds < 3

    serve(scenario)


def test_requests_beyond_the_bound_answer_unavailable_and_a_slot_freed_is_served() -> None:
    """The guard's bound on requests in progress over every connection (limits.py says why):
    calls and streams alike hold a slot until their handler ends, and the call beyond it gets
    UNAVAILABLE (which clients retry), not RESOURCE_EXHAUSTED (which says the request is too
    large)."""
    release = asyncio.Event()

    async def hold(request: broker_pb2.ProduceRequest, context: grpc.aio.ServicerContext):
        await release.wait()
        return request

    async def main() -> None:
        server = GrpcServer("127.0.0.1:0", [SERVICE], tracing=False)
        server.guard.requests_max = 3
        server.server.add_generic_rpc_handlers((_handlers(),))
        write = broker_pb2.ProduceRequest.SerializeToString
        server.server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "test.Held",
                    {
                        "Hold": grpc.unary_unary_rpc_method_handler(
                            hold,
                            request_deserializer=broker_pb2.ProduceRequest.FromString,
                            response_serializer=write,
                        )
                    },
                ),
            )
        )
        await server.start()
        valid = write(broker_pb2.ProduceRequest(timeout_ms=7))
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                held = [
                    asyncio.ensure_future(channel.unary_unary("/test.Held/Hold")(valid, timeout=10))
                    for _ in range(2)
                ]
                stream = channel.stream_unary(f"/{SERVICE}/Count")(timeout=10)  # the third slot
                await stream.write(valid)
                while server.guard.in_progress < 3:
                    await asyncio.sleep(0.01)
                code, details = await unary_status(channel, f"/{SERVICE}/Echo", valid)
                assert code == grpc.StatusCode.UNAVAILABLE
                assert "3 requests in progress" in details and "retry" in details
                release.set()
                await asyncio.gather(*held)
                assert await unary_status(channel, f"/{SERVICE}/Echo", valid) == (
                    grpc.StatusCode.OK,
                    "",
                )
                await stream.done_writing()
                assert broker_pb2.ProduceRequest.FromString(await stream).timeout_ms == 1
                assert server.guard.in_progress == 0
        finally:
            await server.server.stop(0)

    asyncio.run(main())
