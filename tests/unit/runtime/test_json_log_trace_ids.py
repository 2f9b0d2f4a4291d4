"""Goal: a JSON log line carries a trace_id only when that trace is kept, as logs.py promises
("a log line leads to its trace"). With sampling (OTEL_TRACES_SAMPLER=parentbased_traceidratio,
say 1 %), the 99 % of requests not kept still run inside a valid, non-recording span context; their
lines carried its trace_id too, and `samsa trace` on it found nothing. And one record stays one
line, whatever newlines its message and traceback hold.

Method: JsonFormatter over LogRecords made inside spans of a private TracerProvider whose sampler
drops, then keeps, every trace.
"""

from __future__ import annotations

import json
import logging
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

from samsa.services.runtime.logs import JsonFormatter


def record(message: str = "hello", **fields: object) -> logging.LogRecord:
    return logging.makeLogRecord({"msg": message, "levelname": "INFO", "name": "t", **fields})


def test_a_line_in_a_trace_not_kept_names_no_trace() -> None:
    formatter = JsonFormatter("broker-1")
    dropped = TracerProvider(sampler=ALWAYS_OFF).get_tracer("test")
    with dropped.start_as_current_span("unsampled request") as span:
        assert span.get_span_context().is_valid  # a context, but no span anyone will see
        entry = json.loads(formatter.format(record()))
    assert "trace_id" not in entry and "span_id" not in entry
    kept = TracerProvider(sampler=ALWAYS_ON).get_tracer("test")
    with kept.start_as_current_span("sampled request") as span:
        entry = json.loads(formatter.format(record()))
    assert entry["trace_id"] == f"{span.get_span_context().trace_id:032x}"


def test_one_record_is_one_line() -> None:
    formatter = JsonFormatter("broker-1")
    try:
        raise ValueError("two\nlines")
    except ValueError:
        exc_info = sys.exc_info()
    line = formatter.format(record("a\nb", exc_info=exc_info, peer=object()))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["msg"] == "a\nb" and "two\\nlines" in json.dumps(entry["exc"])
