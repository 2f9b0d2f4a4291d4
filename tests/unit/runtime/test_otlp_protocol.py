"""Goal: OTEL_TRACES_EXPORTER=otlp with OTEL_EXPORTER_OTLP_PROTOCOL (or its _TRACES_ form) set to
http/protobuf or http/json, the usual way to reach a collector's port 4318, stops the service at
start with a line saying Samsa speaks OTLP over gRPC only. Samsa's exporter is the gRPC one: it
ignored the variable, dialled the HTTP port with gRPC, and every span was dropped behind a
warning per export, for as long as the service ran.

Method: telemetry.configure under monkeypatched variables; no exporter is built when refused,
and `grpc` (the default) is accepted.
"""

from __future__ import annotations

import pytest
from opentelemetry import trace

from samsa.services.runtime import telemetry


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_an_http_protocol_is_refused_saying_what_works(
    monkeypatch: pytest.MonkeyPatch, variable: str, protocol: str
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.setenv(variable, protocol)
    with pytest.raises(telemetry.TelemetryConfigError, match="grpc"):
        telemetry.configure("samsa-test")


def test_grpc_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = []
    monkeypatch.setattr(trace, "set_tracer_provider", installed.append)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    assert telemetry.configure("samsa-test") is True
    assert len(installed) == 1
    installed[0].shutdown()
