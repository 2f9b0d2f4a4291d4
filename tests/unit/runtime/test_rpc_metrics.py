"""Goal: `rpc_server_duration_milliseconds{rpc_grpc_status}` names the status the client got: an
abort's code, a code a handler set and returned with, DEADLINE_EXCEEDED when the client's
deadline passed and CANCELLED when the client gave up; never UNKNOWN for those (a dashboard's
failures-per-status panel then reads a client's timeout as a server bug) nor OK for a refusal.

Method: an in-process grpc.aio server on loopback with `RpcMetrics` as its interceptor, whose
meter is a private MeterProvider's with an in-memory reader; a few handlers that end each way,
called by a real channel; the recorded points' attributes are compared.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import grpc
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from samsa.services.runtime import metrics


def identity(data: bytes) -> bytes:
    return data


async def aborts(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
    return b""


async def sets_a_code(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    context.set_code(grpc.StatusCode.FAILED_PRECONDITION)
    context.set_details("not now")
    return b""


async def answers(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return b"ok"


async def waits(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    await asyncio.sleep(30)
    return b""


HANDLERS = {
    "Aborts": aborts,
    "SetsACode": sets_a_code,
    "Answers": answers,
    "TimesOut": waits,
    "IsCancelled": waits,
}


def statuses(reader: InMemoryMetricReader) -> dict[str, str]:
    found: dict[str, str] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "rpc.server.duration":
                    continue
                for point in metric.data.data_points:
                    attributes: Any = point.attributes
                    found[attributes["rpc.method"]] = attributes["rpc.grpc.status"]
    return found


def test_the_status_label_is_the_status_the_client_got(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(metrics, "meter", lambda: provider.get_meter("test"))

    async def run() -> None:
        server = grpc.aio.server(interceptors=[metrics.RpcMetrics()])
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(
                behaviour, request_deserializer=identity, response_serializer=identity
            )
            for name, behaviour in HANDLERS.items()
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.S", handlers)])
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                for name in ("Aborts", "SetsACode", "Answers"):
                    with contextlib.suppress(grpc.RpcError):
                        await channel.unary_unary(f"/t.S/{name}")(b"")
                with pytest.raises(grpc.RpcError) as timed_out:
                    await channel.unary_unary("/t.S/TimesOut")(b"", timeout=0.2)
                assert timed_out.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.unary_unary("/t.S/IsCancelled")(b"")
                await asyncio.sleep(0.2)  # the handler is waiting
                call.cancel()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10  # the cancelled handler records as it unwinds
            while len(statuses(reader)) < len(HANDLERS) and loop.time() < deadline:
                await asyncio.sleep(0.01)
        finally:
            await server.stop(0)

    asyncio.run(run())
    found = statuses(reader)
    provider.shutdown()
    assert found["Aborts"] == "NOT_FOUND"
    assert found["SetsACode"] == "FAILED_PRECONDITION"
    assert found["Answers"] == "OK"
    assert found["TimesOut"] == "DEADLINE_EXCEEDED"
    assert found["IsCancelled"] == "CANCELLED"
