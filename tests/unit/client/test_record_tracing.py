"""A record's trace context in its headers (record_tracing.py): the producer's side injects the
current span's W3C `traceparent`, the consumer's side parses it and starts a CONSUMER span per
record, child of and linked to it, with the messaging attributes. Method: a local tracer provider
(the global one is left alone) with an in-memory exporter."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from samsa.client.fetch_state import ConsumerRecord
from samsa.client.record_tracing import (
    format_traceparent,
    headers_column_with_traceparent,
    headers_with_traceparent,
    parse_traceparent,
    record_spans,
)

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def memory_provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_a_traceparent_round_trips():
    context = parse_traceparent(TRACEPARENT)
    assert context is not None
    assert context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert context.span_id == 0x00F067AA0BA902B7
    assert context.is_remote and context.trace_flags.sampled
    assert format_traceparent(context).encode() == TRACEPARENT


def test_malformed_traceparents_are_ignored():
    for value in (
        None,
        b"",
        b"garbage",
        b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  # v00 has four fields
        b"\xff\xfe",
    ):
        assert parse_traceparent(value) is None, value


def test_no_current_span_leaves_headers_alone():
    headers = [("k", b"v")]
    assert headers_with_traceparent(headers) is headers
    assert headers_with_traceparent(None) is None
    assert headers_column_with_traceparent(None, 3) is None


def test_the_current_span_goes_into_the_headers():
    provider, _ = memory_provider()
    with provider.get_tracer("test").start_as_current_span("app") as span:
        expected = format_traceparent(span.get_span_context()).encode()
        assert headers_with_traceparent(None) == [("traceparent", expected)]
        assert headers_with_traceparent([("k", b"v")]) == [("k", b"v"), ("traceparent", expected)]
        own = [("traceparent", TRACEPARENT)]
        assert headers_with_traceparent(own) is own  # the application's own wins
        assert headers_column_with_traceparent([None, [("k", None)]], 2) == [
            [("traceparent", expected)],
            [("k", None), ("traceparent", expected)],
        ]


def test_a_polled_record_with_a_context_gets_a_linked_consumer_span():
    provider, exporter = memory_provider()
    records = [
        ConsumerRecord("orders", 2, 41, 0, None, b"untraced", ()),
        ConsumerRecord("orders", 2, 42, 0, None, b"traced", (("traceparent", TRACEPARENT),)),
    ]
    assert record_spans(provider.get_tracer("test"), records, "billing") == 1
    (span,) = exporter.get_finished_spans()
    assert span.name == "poll orders"
    assert span.kind is SpanKind.CONSUMER
    assert span.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert span.parent.span_id == 0x00F067AA0BA902B7
    assert [link.context.span_id for link in span.links] == [0x00F067AA0BA902B7]
    assert dict(span.attributes) == {
        "messaging.system": "samsa",
        "messaging.operation.name": "poll",
        "messaging.operation.type": "receive",
        "messaging.destination.name": "orders",
        "messaging.destination.partition.id": "2",
        "messaging.kafka.offset": 42,
        "messaging.consumer.group.name": "billing",
    }
