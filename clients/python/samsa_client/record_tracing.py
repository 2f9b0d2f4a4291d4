"""A record's trace context, carried in its headers from the send to the poll (DESIGN §9).

The producer adds a W3C `traceparent` header holding the context of the span that is current at
`send()` (the application's: the SDK starts no span per record), when that span's trace is
sampled; the consumer, at `poll()`, starts and ends one CONSUMER span per record that carries a
sampled one, whose parent is that context and which also links to it (OpenTelemetry's messaging
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

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Tracer

from samsa.common.traceparent import TRACEPARENT, format_traceparent, parse_traceparent

TRACER_NAME = "samsa.client"
MESSAGING_SYSTEM = "samsa"

Headers = Sequence[tuple[str, bytes | None]]


# (span, its traceparent header or None) of the last send: an application sends many records
# inside one span, and formatting the same value again is most of what tracing costs a send. One
# tuple, replaced whole, so threads sending at once at worst format it again; it holds the span,
# so no other span can take its identity.
_last_header: tuple[object, tuple[str, bytes] | None] = (None, None)


def _sampled_header() -> tuple[str, bytes] | None:
    """The `traceparent` header of the current span if it is sampled; None otherwise."""
    global _last_header
    span = trace.get_current_span()
    cached_span, cached_header = _last_header
    if cached_span is span:
        return cached_header
    context = span.get_span_context()
    header = None
    if context.is_valid and context.trace_flags.sampled:
        header = (TRACEPARENT, format_traceparent(context).encode())
    _last_header = (span, header)
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


def traceparent_of(headers: Iterable[tuple[str, bytes | None]]) -> SpanContext | None:
    for key, value in headers:
        if key == TRACEPARENT:
            return parse_traceparent(value)
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
                        return value.decode("ascii")  # type: ignore[union-attr]
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


def record_spans(tracer: Tracer, records: Iterable[RecordProtocol], group_id: str | None) -> int:
    """One CONSUMER span per polled record that carries a sampled trace context; how many
    started."""
    started = 0
    for record in records:
        if not record.headers:
            continue
        producer_context = traceparent_of(record.headers)
        if producer_context is None or not producer_context.trace_flags.sampled:
            continue  # another client's unsampled send: its trace is kept nowhere
        attributes: dict[str, str | int] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.name": "poll",
            "messaging.operation.type": "receive",
            "messaging.destination.name": record.topic,
            "messaging.destination.partition.id": str(record.partition),
            "messaging.kafka.offset": record.offset,
        }
        if group_id is not None:
            attributes["messaging.consumer.group.name"] = group_id
        span = tracer.start_span(
            f"poll {record.topic}",
            context=trace.set_span_in_context(NonRecordingSpan(producer_context)),
            kind=SpanKind.CONSUMER,
            links=[Link(producer_context)],
            attributes=attributes,
        )
        span.end()
        started += 1
    return started
