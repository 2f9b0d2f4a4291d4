"""A record's trace context, carried in its headers from the send to the poll (DESIGN §9).

The producer adds a W3C `traceparent` header holding the context of the span that is current at
`send()` (the application's: the SDK starts no span per record); the consumer, at `poll()`, starts
and ends one CONSUMER span per record that carries such a header with the sampled flag (an
unsampled trace is kept nowhere, and a span costs ~17 µs even when dropped), whose parent is
that context and which also links to it (OpenTelemetry's messaging conventions ask for the
link; the parent makes produce → consume one trace tree for `samsa trace`). Attributes follow
the current semconv names: messaging.system=samsa, messaging.destination.name,
messaging.destination.partition.id, messaging.kafka.offset, messaging.operation.name=poll,
messaging.operation.type=receive, and messaging.consumer.group.name with a group.

Cost: nothing per record unless the application set a tracer provider before it built the
producer or consumer (`channels.tracing_configured()`, read once); then one context lookup per
send, a header scan per polled record, and the scan of a request's batches for a sampled
record's `traceparent` (`sampled_traceparent`), which the broker's spans then join.
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


# The last hex digit of a version-00 traceparent's flags; odd means sampled.
_SAMPLED_LAST_DIGITS = frozenset(b"13579bdf")
_VERSION_00_LENGTH = 55


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
                if (
                    key == TRACEPARENT
                    and value is not None
                    and len(value) == _VERSION_00_LENGTH
                    and value[-1] in _SAMPLED_LAST_DIGITS
                    and parse_traceparent(value) is not None
                ):
                    return value.decode("ascii")
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
            continue  # an unsampled send's trace is not kept: a span here would be dropped
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
