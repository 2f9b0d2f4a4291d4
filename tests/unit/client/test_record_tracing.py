"""A record's trace context in its headers (record_tracing.py): the producer's side injects the
current span's W3C `traceparent`, the consumer's side parses it and starts a CONSUMER span per
record, child of and linked to it, with the messaging attributes. Method: a local tracer provider
(the global one is left alone) with an in-memory exporter."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind

from samsa.client.consumer_records import ConsumerRecord
from samsa.client.record_tracing import (
    headers_column_with_traceparent,
    headers_with_traceparent,
    record_spans,
    sampled_traceparent,
)
from samsa.common.traceparent import format_traceparent

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
UNSAMPLED = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


def memory_provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


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
        ConsumerRecord("orders", 2, 43, 0, None, b"unsampled", (("traceparent", UNSAMPLED),)),
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


def test_the_request_carries_the_first_sampled_records_traceparent():
    unsampled = UNSAMPLED
    sampled_later = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    columns = [
        None,  # a batch without headers
        [(("k", b"v"),), (("traceparent", unsampled),)],
        [(("traceparent", b"00-garbage-01"),), (("traceparent", sampled_later),)],
        [(("traceparent", TRACEPARENT),)],
    ]
    assert sampled_traceparent(columns) == sampled_later.decode()
    assert sampled_traceparent([None, [(("traceparent", unsampled),)]]) == ""
    assert sampled_traceparent([]) == ""


def test_only_a_sampled_span_is_carried_and_each_span_its_own():
    provider, _ = memory_provider()
    tracer = provider.get_tracer("test")
    for _ in range(2):  # the second time the header of the span before is cached: not reused
        with tracer.start_as_current_span("chunk") as span:
            expected = format_traceparent(span.get_span_context()).encode()
            assert headers_with_traceparent(None) == [("traceparent", expected)]
            assert headers_with_traceparent(None) == [("traceparent", expected)]
    unsampled = TracerProvider(sampler=ALWAYS_OFF).get_tracer("test")
    with unsampled.start_as_current_span("not kept"):
        assert headers_with_traceparent(None) is None
        assert headers_column_with_traceparent(None, 2) is None


def test_the_records_one_span_sent_share_one_poll_span_per_partition():
    provider, exporter = memory_provider()
    other = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    records = [
        ConsumerRecord("orders", 0, 10, 0, None, b"a", (("traceparent", TRACEPARENT),)),
        ConsumerRecord("orders", 0, 11, 0, None, b"b", (("traceparent", TRACEPARENT),)),
        ConsumerRecord("orders", 1, 5, 0, None, b"c", (("traceparent", TRACEPARENT),)),
        ConsumerRecord("orders", 0, 12, 0, None, b"d", (("traceparent", other),)),
        ConsumerRecord("orders", 0, 13, 0, None, b"e", (("traceparent", TRACEPARENT),)),
        ConsumerRecord("orders", 0, 14, 0, None, b"f", (("traceparent", UNSAMPLED),)),
    ]
    assert record_spans(provider.get_tracer("test"), records, None) == 3
    spans = {
        (span.parent.span_id, span.attributes["messaging.destination.partition.id"]): span
        for span in exporter.get_finished_spans()
    }
    run = spans[(0x00F067AA0BA902B7, "0")]
    assert run.attributes["messaging.kafka.offset"] == 10
    assert run.attributes["messaging.batch.message_count"] == 3
    assert run.attributes["samsa.last_offset"] == 13
    alone = spans[(0x00F067AA0BA902B7, "1")]
    assert alone.attributes["messaging.kafka.offset"] == 5
    assert "messaging.batch.message_count" not in alone.attributes
    assert spans[(0xB7AD6B7169203331, "0")].attributes["messaging.kafka.offset"] == 12


def test_a_later_version_header_with_odd_bytes_goes_to_the_broker_as_version_00():
    """A traceparent of a later version may carry more fields; one whose tail is not ASCII (an
    application forwarding another system's headers) parsed, and then decoding it for the
    ProduceStream request raised UnicodeDecodeError in the producer's sender, which left the
    request unsent. The broker gets the context itself, written as version 00."""
    odd = b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\xff\xfe"
    assert sampled_traceparent([[(("traceparent", odd),)]]) == (
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    )
