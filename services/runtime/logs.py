"""Structured logs: one JSON object per line on stderr, so that `samsa up` logs can be grepped
and shipped as they are. Fields: ts (ISO 8601, UTC), level, service, logger, msg, the `extra`
fields a call passes, and the exception text when there is one. Level from SAMSA_LOG_LEVEL.

A line logged inside a recording span (tracing on, telemetry.py; its trace sampled) also carries
that span's trace_id and span_id (W3C hex, as the span file and `samsa trace` print them), so a
log line leads to its trace. Spans themselves never come here: they go to a file or stdout."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime

from opentelemetry import trace

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        # Only a kept trace: an unsampled request still runs in a valid context, whose id leads
        # nowhere (`samsa trace` would find no span of it).
        if context.is_valid and context.trace_flags.sampled:
            entry["trace_id"] = f"{context.trace_id:032x}"
            entry["span_id"] = f"{context.span_id:016x}"
        for key, value in vars(record).items():
            if key not in _STANDARD:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class LogConfigError(Exception):
    """SAMSA_LOG_LEVEL names no level; the message lists them (a service stops at start)."""


def configure(service: str) -> None:
    """Send every log of this process to stderr as JSON lines."""
    level = os.environ.get("SAMSA_LOG_LEVEL", "INFO")
    if level.upper() not in logging.getLevelNamesMapping():  # WARN, NOTSET, ... pass too
        raise LogConfigError(f"SAMSA_LOG_LEVEL={level!r}: use one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # pysyncobj and grpc are chatty at INFO about reconnects that are routine here.
    logging.getLogger("pysyncobj").setLevel(logging.WARNING)
