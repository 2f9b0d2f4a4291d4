"""A record's trace context, carried in its headers from the send to the poll (DESIGN §9).

The producer adds a W3C `traceparent` header holding the context of the span that is current at
`send()` (the application's: the SDK starts no span per record); the consumer, at `poll()`, starts
and ends one CONSUMER span per record that carries such a header, whose parent is that context and
which also links to it (OpenTelemetry's messaging conventions ask for the link; the parent makes
produce → consume one trace tree for `samsa trace`). Attributes follow the current semconv names:
messaging.system=samsa, messaging.destination.name, messaging.destination.partition.id,
messaging.kafka.offset, messaging.operation.name=poll, messaging.operation.type=receive, and
messaging.consumer.group.name with a group.

Cost: nothing per record unless the application set a tracer provider before it built the
producer or consumer (`channels.tracing_configured()`, read once); then one context lookup per
send, and a header scan per polled record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags, Tracer

TRACEPARENT = "traceparent"
TRACER_NAME = "samsa.client"
MESSAGING_SYSTEM = "samsa"

Headers = Sequence[tuple[str, bytes | None]]

# version-traceid-parentid-flags; version ff is invalid, and a later version may append fields.
_TRACEPARENT_RE = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def format_traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def parse_traceparent(value: bytes | None) -> SpanContext | None:
    """The remote span context of a `traceparent` header value; None when it is not one."""
    if value is None or len(value) > 512:
        return None
    match = _TRACEPARENT_RE.match(value.decode("ascii", errors="replace"))
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    context = SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )
    return context if context.is_valid else None


def headers_with_traceparent(headers: Headers | None) -> Headers | None:
    """`headers` plus the current span's `traceparent`; unchanged when no span is current or the
    application set its own `traceparent`."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return headers
    if headers is None:
        return [(TRACEPARENT, format_traceparent(context).encode())]
    if any(key == TRACEPARENT for key, _ in headers):
        return headers
    return [*headers, (TRACEPARENT, format_traceparent(context).encode())]


def traceparent_of(headers: Iterable[tuple[str, bytes | None]]) -> SpanContext | None:
    for key, value in headers:
        if key == TRACEPARENT:
            return parse_traceparent(value)
    return None


def headers_column_with_traceparent(
    headers: Sequence[Headers | None] | None, count: int
) -> Sequence[Headers | None] | None:
    """send_many's headers column, each record's with the current span's `traceparent`."""
    if not trace.get_current_span().get_span_context().is_valid:
        return headers
    if headers is None:
        return [headers_with_traceparent(None) for _ in range(count)]
    return [headers_with_traceparent(record_headers) for record_headers in headers]


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
    """One CONSUMER span per polled record that carries a trace context; how many started."""
    started = 0
    for record in records:
        if not record.headers:
            continue
        producer_context = traceparent_of(record.headers)
        if producer_context is None:
            continue
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
