"""The broker's record-trace spans (record_trace.py), pure: a traced request's produce span joins
the record's trace; each traced append gets its span, then one replicate span per follower once
that follower's fetch shows it holds the batch, one high-watermark span once the high watermark
passes it, and a fetch span per consumer fetch that returns it; what the broker remembers is
bounded. Method: a local tracer provider with an in-memory exporter and a hand-driven clock."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from samsa.common.errors import ErrorCode
from samsa.services.broker import record_trace
from samsa.services.broker.record_trace import RecordTracer, end_produce_span
from samsa.v1 import broker_pb2

SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
UNSAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


class Clock:
    def __init__(self) -> None:
        self.now_ns = 1_000

    def __call__(self) -> int:
        return self.now_ns


def setup():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock = Clock()
    return RecordTracer(provider.get_tracer("test"), clock, broker_id=7), clock, exporter


def request(topic: str = "orders", acks: int = -1) -> broker_pb2.ProduceRequest:
    return broker_pb2.ProduceRequest(
        acks=acks, topics=[broker_pb2.ProduceRequest.TopicData(name=topic)]
    )


def names(exporter) -> list[str]:
    return [span.name for span in exporter.get_finished_spans()]


def test_the_produce_span_joins_a_sampled_records_trace_only():
    tracer, clock, exporter = setup()
    assert tracer.start_produce(UNSAMPLED, request()) is None
    assert tracer.start_produce("not-a-traceparent", request()) is None
    span = tracer.start_produce(SAMPLED, request())
    assert span is not None
    clock.now_ns = 5_000
    end_produce_span(span, broker_pb2.ProduceResponse(), tracer)
    (produce,) = exporter.get_finished_spans()
    assert produce.name == "produce orders"
    assert produce.kind is SpanKind.SERVER
    assert produce.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert produce.parent.span_id == 0x00F067AA0BA902B7
    assert (produce.start_time, produce.end_time) == (1_000, 5_000)
    assert produce.attributes["samsa.broker.id"] == 7
    assert produce.attributes["samsa.acks"] == -1
    assert produce.status.status_code is StatusCode.UNSET


def test_a_refused_partition_marks_the_produce_span_an_error():
    tracer, _, exporter = setup()
    span = tracer.start_produce(SAMPLED, request())
    response = broker_pb2.ProduceResponse()
    topic = response.topics.add(name="orders")
    topic.partitions.add(partition=3, error_code=ErrorCode.NOT_ENOUGH_REPLICAS)
    end_produce_span(span, response, tracer)
    (produce,) = exporter.get_finished_spans()
    assert produce.status.status_code is StatusCode.ERROR
    assert produce.status.description == "orders-3: NOT_ENOUGH_REPLICAS"


def test_each_step_of_a_batch_gets_its_span_once_under_the_produce_span():
    tracer, clock, exporter = setup()
    produce = tracer.start_produce(SAMPLED, request())
    parent = produce.get_span_context()
    traces = tracer.partition_traces("orders", 0)
    traces.appended(parent, 10, 15, 700, started_ns=1_000, ended_ns=1_200)
    (append,) = exporter.get_finished_spans()
    assert append.name == "append orders-0"
    assert append.parent.span_id == parent.span_id
    assert (append.start_time, append.end_time) == (1_000, 1_200)
    assert append.attributes["messaging.kafka.offset"] == 10
    assert append.attributes["samsa.last_offset"] == 14
    assert append.attributes["messaging.batch.message_count"] == 5

    clock.now_ns = 2_000
    traces.served(10, 15, replica_id=2)  # sent to follower 2, not yet held there
    traces.high_watermark_moved(14)  # not past the batch yet
    assert names(exporter) == ["append orders-0"]
    clock.now_ns = 3_000
    traces.served(15, 15, replica_id=2)  # follower 2 asks from 15: it holds the batch
    traces.high_watermark_moved(15)
    traces.served(15, 15, replica_id=2)
    traces.high_watermark_moved(16)
    replicate, high_watermark = exporter.get_finished_spans()[1:]
    assert replicate.name == "replicate orders-0 to 2"
    assert (replicate.start_time, replicate.end_time) == (1_200, 3_000)
    assert replicate.attributes["samsa.follower.id"] == 2
    assert high_watermark.name == "high watermark orders-0"
    assert (high_watermark.start_time, high_watermark.end_time) == (1_200, 3_000)
    assert high_watermark.attributes["samsa.high_watermark"] == 15

    clock.now_ns = 4_000
    traces.served(0, 10, replica_id=-1)  # a consumer's answer before the batch
    traces.served(15, 20, replica_id=-1)  # and after it
    assert len(exporter.get_finished_spans()) == 3
    traces.served(12, 20, replica_id=-1)
    traces.served(0, 30, replica_id=-1)  # another consumer (or a rewind): another span
    fetches = exporter.get_finished_spans()[3:]
    assert [span.name for span in fetches] == ["fetch orders-0", "fetch orders-0"]
    assert all(span.parent.span_id == parent.span_id for span in fetches)
    assert fetches[0].attributes["samsa.fetch_offset"] == 12


def test_the_broker_remembers_a_bounded_number_of_batches_for_a_bounded_time():
    tracer, _, exporter = setup()
    parent = tracer.start_produce(SAMPLED, request()).get_span_context()
    traces = tracer.partition_traces("orders", 0)
    for offset in range(record_trace.BATCHES_REMEMBERED + 10):
        traces.appended(parent, offset, offset + 1, 70, started_ns=1_000, ended_ns=1_000)
    assert len(traces.batches) == record_trace.BATCHES_REMEMBERED
    assert traces.batches[0].first_offset == 10  # the oldest went first
    late = 1_000 + record_trace.REMEMBERED_NS + 1
    traces.appended(parent, 500, 501, 70, started_ns=late, ended_ns=late)
    assert [batch.first_offset for batch in traces.batches] == [500]
    exporter.clear()
    traces.served(0, 20, replica_id=-1)
    assert exporter.get_finished_spans() == ()


def test_a_step_past_the_remembered_time_gets_no_span_without_a_later_append():
    """A batch is remembered for REMEMBERED_NS even when no traced append follows it on its
    partition (the append is what drops old batches): a consumer fetch, a follower's catch-up
    or the high watermark's move after that time makes no span (each did)."""
    tracer, clock, exporter = setup()
    parent = tracer.start_produce(SAMPLED, request()).get_span_context()
    traces = tracer.partition_traces("orders", 0)
    traces.appended(parent, 0, 1, 70, started_ns=1_000, ended_ns=1_000)
    exporter.clear()
    clock.now_ns = 1_000 + record_trace.REMEMBERED_NS + 1
    traces.served(0, 1, replica_id=-1)
    traces.served(1, 1, replica_id=2)
    traces.high_watermark_moved(1)
    assert exporter.get_finished_spans() == ()
