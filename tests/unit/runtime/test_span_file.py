"""Spans never go into the JSON-lines logs: the span file holds one JSON object per span per line
(common/span_file.py), and a log line written inside a span carries its trace_id and span_id
(runtime/logs.py). Method: a local tracer provider (the global one is left alone) exporting to a
tmp_path file, a log record formatted inside one of its spans, and the lines read back."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from samsa.common.span_file import SpanFileExporter, read_spans
from samsa.services.runtime import telemetry
from samsa.services.runtime.logs import JsonFormatter


def file_provider(path, service="test-app"):
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(SimpleSpanProcessor(SpanFileExporter(str(path))))
    return provider


def test_each_span_is_one_json_line_with_its_parent_and_links(tmp_path):
    path = tmp_path / "spans.jsonl"
    provider = file_provider(path)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("parent") as parent:
        link = trace.Link(parent.get_span_context(), {"why": "test"})
        with tracer.start_as_current_span("child", links=[link], attributes={"a": 1}):
            pass
    provider.shutdown()
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    child, root = (json.loads(line) for line in lines)  # a span is written when it ends
    assert root["parent_span_id"] is None
    assert child["parent_span_id"] == root["span_id"]
    assert child["trace_id"] == root["trace_id"]
    assert child["service"] == "test-app"
    assert child["attributes"] == {"a": 1}
    assert child["links"] == [
        {"trace_id": root["trace_id"], "span_id": root["span_id"], "attributes": {"why": "test"}}
    ]
    assert child["end_ns"] >= child["start_ns"]


def test_reading_skips_torn_and_foreign_lines(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text('{"trace_id": "01", "span_id": "02"}\n{"trace_id": \nnot json\n[1]\n')
    assert [span["span_id"] for span in read_spans([str(path)])] == ["02"]


def test_a_log_line_inside_a_span_carries_its_ids_not_the_span(tmp_path):
    provider = file_provider(tmp_path / "spans.jsonl")
    formatter = JsonFormatter("broker-1")
    record = logging.makeLogRecord({"msg": "hello", "levelname": "INFO", "name": "t"})
    assert "trace_id" not in json.loads(formatter.format(record))
    with provider.get_tracer("test").start_as_current_span("work") as span:
        entry = json.loads(formatter.format(record))
    context = span.get_span_context()
    assert entry["trace_id"] == f"{context.trace_id:032x}"
    assert entry["span_id"] == f"{context.span_id:016x}"
    provider.shutdown()


def test_the_file_exporter_needs_a_path(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "file")
    monkeypatch.delenv("SAMSA_TRACES_FILE", raising=False)
    with pytest.raises(telemetry.TelemetryConfigError, match="SAMSA_TRACES_FILE"):
        telemetry.configure("samsa-test")


def test_an_unknown_exporter_is_refused(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(telemetry.TelemetryConfigError, match="none, otlp, file and console"):
        telemetry.configure("samsa-test")
