"""Spans as JSON lines in a file: the exporter behind OTEL_TRACES_EXPORTER=file, and its reader.

Why a file: DESIGN §9 wants a request's span tree readable with no other software. Each finished
span is one JSON object on one line, written with a single os.write on a file opened O_APPEND, so
several processes (a cluster's controllers, brokers and coordinators, and the application) may
share one file and no line is split or interleaved with another (Linux appends a write to a
regular file whole). `samsa trace` (clients/python/cli/trace_command.py) reads these lines back.

A line's fields: trace_id and span_id (lower-case hex, W3C widths), parent_span_id (hex or null),
name, kind (SERVER, CLIENT, PRODUCER, CONSUMER, INTERNAL), service (the resource's service.name),
start_ns and end_ns (Unix epoch nanoseconds), status (UNSET, OK, ERROR), attributes, and links
(each with trace_id, span_id and attributes).

Shared by services (services/runtime/telemetry.py) and the SDK's users (a test or an application
sets up `SpanFileExporter` on its own tracer provider), hence in common/.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """One finished span as the JSON object of its line."""
    context = span.context
    assert context is not None
    parent = span.parent
    return {
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": f"{parent.span_id:016x}" if parent is not None else None,
        "name": span.name,
        "kind": span.kind.name,
        "service": span.resource.attributes.get(SERVICE_NAME, ""),
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "links": [
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
    }


class SpanFileExporter(SpanExporter):
    """Appends each span as one JSON line to `path` (or writes to an already open `fd`, as the
    console exporter does with stdout)."""

    def __init__(self, path: str | None = None, *, fd: int | None = None) -> None:
        assert (path is None) != (fd is None), "a path or an fd, not both"
        self._owns_fd = fd is None
        if fd is None:
            assert path is not None
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._fd = fd

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            line = json.dumps(span_to_dict(span), default=str, separators=(",", ":")) + "\n"
            os.write(self._fd, line.encode())
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        if self._owns_fd and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export wrote through already


def read_spans(paths: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The spans of span files, in file order; a torn or foreign line is skipped."""
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                try:
                    span = json.loads(line)
                except ValueError:
                    continue
                if isinstance(span, dict) and "trace_id" in span and "span_id" in span:
                    yield span
