"""A record's trace context, carried in its headers from the send to the poll (DESIGN §9).

The producer adds a W3C `traceparent` header holding the context of the span that is current at
`send()` (the application's: the SDK starts no span per record), when that span's trace is
sampled; the consumer, at `poll()`, starts and ends a CONSUMER span for the records of each sampled
context (per partition: the records one application span sent share one span), whose parent is
that context and which also links to it (OpenTelemetry's messaging
conventions ask for the link; the parent makes produce → consume one trace tree for `samsa
trace`). Attributes follow the current semconv names: messaging.system=samsa,
messaging.destination.name, messaging.destination.partition.id, messaging.kafka.offset,
messaging.operation.name=poll, messaging.operation.type=receive, and
messaging.consumer.group.name with a group.

Only sampled sends carry the header. W3C propagation would carry unsampled contexts too, so that
a later hop keeps the same decision, but in Python that costs every record of the 99 % not kept at
1 % sampling ~55 bytes, their encoding and decoding, and a parse at the poll: 1 % tracing cost
~2/3 of produce and ~4/5 of consume throughput that way (`python -m bench observability`). A
record of an unsampled trace therefore arrives with no context, and a span the consumer's
application starts for it begins a trace of its own.

Cost: nothing per record unless the application set a tracer provider before it built the
producer or consumer (`channels.tracing_configured()`, read once); then one context lookup per
send (the header of the last span is kept), a header scan per polled record that has headers,
and the scan of a request's batches for a sampled record's `traceparent`
(`sampled_traceparent`), which the broker's spans then join.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Tracer

from samsa.common.traceparent import TRACEPARENT, format_traceparent, parse_traceparent

TRACER_NAME = "samsa.client"
MESSAGING_SYSTEM = "samsa"

Headers = Sequence[tuple[str, bytes | None]]


# (context, its span's traceparent header or None) of the last send: an application sends many
# records inside one span, and looking the span up and formatting the same value again was most of
# what tracing cost a send (~1.3 µs of ~9). One tuple, replaced whole, so threads sending at once at
# worst look it up again; it holds the context, so no other context can take its identity.
_last_header: tuple[object, tuple[str, bytes] | None] = (None, None)


def _sampled_header() -> tuple[str, bytes] | None:
    """The `traceparent` header of the current span if it is sampled; None otherwise."""
    global _last_header
    current = otel_context.get_current()
    cached_context, cached_header = _last_header
    if cached_context is current:
        return cached_header
    span_context = trace.get_current_span(current).get_span_context()
    header = None
    if span_context.is_valid and span_context.trace_flags.sampled:
        header = (TRACEPARENT, format_traceparent(span_context).encode())
    _last_header = (current, header)
    return header


def headers_with_traceparent(headers: Headers | None) -> Headers | None:
    """`headers` plus the current span's `traceparent`; unchanged when no span is current, when
    its trace is not sampled, or when the application set its own `traceparent`."""
    header = _sampled_header()
    if header is None:
        return headers
    if headers is None:
        return [header]
    if any(key == TRACEPARENT for key, _ in headers):
        return headers
    return [*headers, header]


def _traceparent_value(headers: Iterable[tuple[str, bytes | None]]) -> bytes | None:
    for key, value in headers:
        if key == TRACEPARENT:
            return value
    return None


def headers_column_with_traceparent(
    headers: Sequence[Headers | None] | None, count: int
) -> Sequence[Headers | None] | None:
    """send_many's headers column, each record's with the current span's `traceparent`."""
    if _sampled_header() is None:
        return headers
    if headers is None:
        return [headers_with_traceparent(None) for _ in range(count)]
    return [headers_with_traceparent(record_headers) for record_headers in headers]


# The last hex digit of a version-00 traceparent's flags; odd means sampled.
_SAMPLED_LAST_DIGITS = frozenset(b"13579bdf")
_VERSION_00_LENGTH = 55


def _maybe_sampled(value: bytes | None) -> bool:
    """False for a value that is certainly not a sampled traceparent, without parsing it."""
    if value is None:
        return False
    if len(value) == _VERSION_00_LENGTH:
        return value[-1] in _SAMPLED_LAST_DIGITS
    return len(value) > _VERSION_00_LENGTH  # a later version: parse to know


def sampled_traceparent(header_columns: Iterable[Sequence[Headers] | None]) -> str:
    """The `traceparent` of the first sampled record in these batches' header columns (None: a
    batch without headers), for the ProduceStream request that carries them, so that the broker's
    spans join that record's trace; "" when no record is sampled. Scans headers only while the
    application traces (the driver calls it only then) and stops at the first sampled record."""
    for column in header_columns:
        if column is None:
            continue
        for record_headers in column:
            for key, value in record_headers:
                if key == TRACEPARENT and _maybe_sampled(value):
                    context = parse_traceparent(value)
                    if context is not None and context.trace_flags.sampled:
                        # Written anew, not decoded: a later version's extra fields may hold
                        # bytes that are not ASCII, and the broker needs only the context.
                        return format_traceparent(context)
    return ""


class RecordProtocol(Protocol):
    """What `record_spans` reads of a ConsumerRecord."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...


def poll_tracer() -> Tracer | None:
    """The tracer for poll spans, or None when the application set no tracer provider."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    return trace.get_tracer(TRACER_NAME)


class _PolledRun:
    """The polled records of one partition that one sampled send context produced."""

    __slots__ = ("count", "first_offset", "last_offset", "producer_context")

    def __init__(self, producer_context: SpanContext, offset: int) -> None:
        self.producer_context = producer_context
        self.first_offset = self.last_offset = offset
        self.count = 1


def record_spans(tracer: Tracer, records: Iterable[RecordProtocol], group_id: str | None) -> int:
    """The poll's CONSUMER spans: one per partition and sampled send context among `records` (the
    records a span sent, polled together, share one span: its offset is the first's, with
    messaging.batch.message_count and samsa.last_offset when there are several); how many
    started."""
    groups: dict[tuple[bytes, str, int], _PolledRun] = {}
    for record in records:
        if not record.headers:
            continue
        value = _traceparent_value(record.headers)
        if value is None or not _maybe_sampled(value):
            continue  # another client's unsampled send: its trace is kept nowhere
        key = (value, record.topic, record.partition)
        run = groups.get(key)
        if run is not None:
            run.count += 1
            run.last_offset = record.offset
            continue
        producer_context = parse_traceparent(value)
        if producer_context is not None and producer_context.trace_flags.sampled:
            groups[key] = _PolledRun(producer_context, record.offset)
    for (_, topic, partition), run in groups.items():
        attributes: dict[str, str | int] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.name": "poll",
            "messaging.operation.type": "receive",
            "messaging.destination.name": topic,
            "messaging.destination.partition.id": str(partition),
            "messaging.kafka.offset": run.first_offset,
        }
        if run.count > 1:
            attributes["messaging.batch.message_count"] = run.count
            attributes["samsa.last_offset"] = run.last_offset
        if group_id is not None:
            attributes["messaging.consumer.group.name"] = group_id
        tracer.start_span(
            f"poll {topic}",
            context=trace.set_span_in_context(NonRecordingSpan(run.producer_context)),
            kind=SpanKind.CONSUMER,
            links=[Link(run.producer_context)],
            attributes=attributes,
        ).end()
    return len(groups)
