"""W3C trace context (`traceparent`) values, as the SDK puts them in record headers and on
ProduceStream requests, and as the broker reads them back: version-traceid-parentid-flags, e.g.
00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01. Version ff is invalid, and a later
version may append fields."""

from __future__ import annotations

import re

from opentelemetry.trace import SpanContext, TraceFlags

TRACEPARENT = "traceparent"
TRACEPARENT_BYTES_MAX = 512
_TRACEPARENT_RE = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def format_traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def parse_traceparent(value: str | bytes | None) -> SpanContext | None:
    """The remote span context of a `traceparent` value; None when it is not one."""
    if value is None or len(value) > TRACEPARENT_BYTES_MAX:
        return None
    text = value.decode("ascii", errors="replace") if isinstance(value, bytes) else value
    match = _TRACEPARENT_RE.fullmatch(text)  # not `$`, which lets a trailing newline by
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    context = SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )
    return context if context.is_valid else None
