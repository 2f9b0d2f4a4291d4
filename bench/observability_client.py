"""One client run of the observability benchmark (bench/observability_bench.py), in a process of
its own: OpenTelemetry lets a process install its tracer provider once, and the SDK reads at
construction whether one is installed, so each configuration needs a fresh client process (a
client that traced once would stay traced in the runs that must not be).

python -m bench.observability_client BOOTSTRAP TOPIC COUNT SIZE
    [--traces-file PATH --ratio R [--spans chunk|send]]

Without --traces-file no tracer provider is installed (the SDK then does no tracing work). With
it, a TracerProvider sampling ParentBased(TraceIdRatioBased(R)) exports through a
BatchSpanProcessor to a SpanFileExporter on PATH (the services append to the same file), and the
application makes spans of its own, which the SDK's tracing hangs on: the SDK puts the current
span's `traceparent` in each record's headers, the producer hands a sampled one to the broker
with the request, and the consumer starts one poll span per record that carries a sampled one
(record_tracing.py). --spans says which application spans:
- chunk (the default): one span per run of CHUNK_RECORDS sends, as a batch job traces a unit of
  work; R of the chunks are sampled, and every record of a chunk carries its traceparent;
- send: one span around each send(), as an application that traces each record does. Creating a
  span costs OpenTelemetry Python ~20-30 µs even when the sampler drops it, several times
  Samsa's own cost of a send, so this measures the application's spans more than Samsa's.

The run: one warm-up record acknowledged (metadata and connections made, outside the clock),
then COUNT records of SIZE random bytes to partition 0 (acks=all, idempotence on by default,
linger.ms 5, batch.size 256 KiB: the cluster bench's throughput settings) and a flush(); then a
fresh consumer assign()ed to partition 0 reads from offset 0 until it has every record (the
warm-up one too). The produce clock runs from the first send() to the flush() returning, the
consume clock from the first poll() to the last record. Spans are flushed after both clocks
stopped. One JSON line on stdout: {"produce": {records_per_s, mb_per_s}, "consume": {...}}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

BATCH_SIZE = 256 * 1024  # as the cluster bench's producers (bench/client_bench.py)
LINGER_MS = 5
TIMEOUT_S = 60.0
CHUNK_RECORDS = 1_000  # sends per application span with --spans chunk
SPANS_CHUNK, SPANS_SEND = "chunk", "send"
# The batch span processor's settings, named here because the figures depend on them. A full
# queue drops spans rather than block the caller, and at 100 % sampling the consumer makes a
# poll span per record, faster than the export thread (which shares the GIL) drains 2,048, the
# SDK's default: so a queue of 65,536, which the services get too (OTEL_BSP_MAX_QUEUE_SIZE).
# Even that can overflow at 100 %; the bench's notes compare the spans written with those made.
SPAN_QUEUE_SIZE_MAX = 1 << 16
SPAN_EXPORT_BATCH_SIZE_MAX = 512
SPAN_SCHEDULE_DELAY_MS = 5000
CLIENT_SERVICE_NAME = "bench-client"


def install_tracing(traces_file: str, ratio: float) -> Any:
    """The process's tracer provider, exporting sampled spans to `traces_file`."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from samsa.common.span_file import SpanFileExporter

    provider = TracerProvider(
        sampler=ParentBased(TraceIdRatioBased(ratio)),
        resource=Resource.create({SERVICE_NAME: CLIENT_SERVICE_NAME}),
    )
    provider.add_span_processor(
        BatchSpanProcessor(
            SpanFileExporter(traces_file),
            max_queue_size=SPAN_QUEUE_SIZE_MAX,
            schedule_delay_millis=SPAN_SCHEDULE_DELAY_MS,
            max_export_batch_size=SPAN_EXPORT_BATCH_SIZE_MAX,
        )
    )
    trace.set_tracer_provider(provider)
    return provider


def produce(
    bootstrap: str, topic: str, count: int, size: int, tracer: Any | None, spans: str
) -> dict:
    """`count` records to partition 0; when `tracer` is set, in one application span per
    CHUNK_RECORDS sends (`spans` chunk) or per send (`spans` send)."""
    from bench.client_bench import failed_for_good
    from samsa.client import Producer

    values = [os.urandom(size) for _ in range(1024)]
    mask = len(values) - 1
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_SIZE,
            "compression.type": "none",
        }
    )
    try:
        producer.send(topic, values[0], partition=0).result(timeout=TIMEOUT_S)
        send = producer.send
        started = time.perf_counter()
        if tracer is None:
            for index in range(count):
                send(topic, values[index & mask], partition=0)
        elif spans == SPANS_CHUNK:
            for start in range(0, count, CHUNK_RECORDS):
                with tracer.start_as_current_span("chunk"):
                    for index in range(start, min(start + CHUNK_RECORDS, count)):
                        send(topic, values[index & mask], partition=0)
        else:
            start_span = tracer.start_as_current_span
            for index in range(count):
                with start_span("send"):
                    send(topic, values[index & mask], partition=0)
        producer.flush(TIMEOUT_S)
        elapsed = time.perf_counter() - started
        failed_for_good(producer, count)
    finally:
        producer.close(TIMEOUT_S)
    return {"records_per_s": count / elapsed, "mb_per_s": count * size / elapsed / 1e6}


def consume(bootstrap: str, topic: str, count: int, size: int) -> dict:
    """Partition 0 from offset 0 until `count` records came."""
    from bench.client_bench import read_from_start

    return read_from_start(bootstrap, topic, count, size)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.observability_client")
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("count", type=int)
    parser.add_argument("size", type=int)
    parser.add_argument("--traces-file", help="trace, exporting spans to this file")
    parser.add_argument("--ratio", type=float, default=1.0, help="the sampling ratio")
    parser.add_argument(
        "--spans",
        choices=(SPANS_CHUNK, SPANS_SEND),
        default=SPANS_CHUNK,
        help=f"an application span per {CHUNK_RECORDS:,} sends (chunk) or per send",
    )
    args = parser.parse_args(argv)
    assert args.count > 0 and args.size > 0
    assert 0.0 <= args.ratio <= 1.0
    provider = install_tracing(args.traces_file, args.ratio) if args.traces_file else None
    tracer = provider.get_tracer("bench.observability") if provider is not None else None
    produced = produce(args.bootstrap, args.topic, args.count, args.size, tracer, args.spans)
    # The warm-up record is read back too: it is the first at offset 0.
    consumed = consume(args.bootstrap, args.topic, args.count + 1, args.size)
    if provider is not None:
        provider.shutdown()  # exports what the batch processor still holds
    print(json.dumps({"produce": produced, "consume": consumed}), flush=True)


if __name__ == "__main__":
    main()
