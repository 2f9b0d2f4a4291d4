"""The application side of test_record_trace.py, in a process of its own (a tracer provider is
process-global, and the test's pytest process must stay untraced): set a tracer provider writing
to a span file, create the topic (replicated to every broker) inside an application span, send
one record inside another, consume it, and print the two trace ids, the send's first.

Usage: python record_trace_proc.py BOOTSTRAP TOPIC REPLICATION_FACTOR SPAN_FILE"""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.common.span_file import SpanFileExporter


def main(bootstrap: str, topic: str, replication_factor: str, span_file: str) -> int:
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "test-app"}))
    provider.add_span_processor(SimpleSpanProcessor(SpanFileExporter(span_file)))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("test-app")
    with (
        Admin({"bootstrap.servers": bootstrap}) as admin,
        tracer.start_as_current_span("setup") as setup,
    ):
        admin.create_topics([NewTopic(topic, 1, int(replication_factor))])
    with (
        Producer({"bootstrap.servers": bootstrap}) as producer,
        tracer.start_as_current_span("checkout") as span,
    ):
        producer.send(topic, b"order-1").result(timeout=30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    with consumer:
        consumer.assign([(topic, 0)])
        records = []
        for _ in range(10):
            records = consumer.poll(timeout=3)
            if records:
                break
        assert [record.value for record in records] == [b"order-1"], records
    provider.shutdown()
    print(f"{span.get_span_context().trace_id:032x}")
    print(f"{setup.get_span_context().trace_id:032x}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
