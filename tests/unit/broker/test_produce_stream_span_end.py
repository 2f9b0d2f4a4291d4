"""Goal: a traced ProduceStream request's `produce` span is ended, as an error, when the stream
ends before the batch is replicated (its client cancelled, say after its request timeout, or
another request failed the stream). The span was started on arrival and ended only with the
answer, so exactly the produce someone traces to learn why it timed out left no span at all.

Method: a real PartitionHost whose partition needs a follower for acks=all (ISR {1, 2}, which no
follower fetch advances here), a RecordTracer over an in-memory exporter, and the stream core
driven with one sampled request whose reader then waits; the handler's task is cancelled as grpc
cancels it when the client goes away.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from test_broker_requests import produce_request, replicated_host

from samsa.common.record.codec import build_batch
from samsa.services.broker.record_trace import RecordTracer
from samsa.services.broker.requests.produce_stream import serve_produce_stream
from samsa.v1 import broker_pb2

SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Context:
    def invocation_metadata(self) -> tuple[()]:
        return ()


def test_a_produce_span_ends_when_its_stream_ends_first(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host = replicated_host(tmp_path, isr=(1, 2))
    host.record_tracer = RecordTracer(provider.get_tracer("test"), time.time_ns, broker_id=1)
    request = produce_request(0, build_batch([b"a"]), acks=-1)

    async def run() -> None:
        forever = asyncio.Event()

        async def requests():  # type: ignore[no-untyped-def]
            yield broker_pb2.ProduceStreamRequest(
                correlation_id=1, request=request, traceparent=SAMPLED
            )
            await forever.wait()  # the client sends nothing more

        async def handler() -> None:
            async for _ in serve_produce_stream(host, requests(), Context()):  # type: ignore[arg-type]
                raise AssertionError("acks=all answered without a follower")

        task = asyncio.create_task(handler())
        deadline = time.monotonic() + 10
        while host.get("t", 0).log.log_end_offset == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # until the batch is appended and waits for the ISR
        assert host.get("t", 0).log.log_end_offset == 1
        task.cancel()  # the client went away
        await asyncio.gather(task, return_exceptions=True)
        deadline = time.monotonic() + 10
        while not _produce_spans(exporter) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # the cancelled wait unwinds on a later turn

    try:
        asyncio.run(run())
        (span,) = _produce_spans(exporter)
        assert span.status.status_code == StatusCode.ERROR
        assert "before" in (span.status.description or "")
    finally:
        host.close_all()
        provider.shutdown()


def _produce_spans(exporter: InMemorySpanExporter) -> list:  # type: ignore[type-arg]
    return [span for span in exporter.get_finished_spans() if span.name.startswith("produce")]
