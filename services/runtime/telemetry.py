"""OpenTelemetry tracing from the standard OTEL_* variables; off unless asked for.

OTEL_TRACES_EXPORTER: unset or "none" (default) keeps the SDK's no-op provider; "otlp" exports
over OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT; "console" prints spans (debugging). The service
name comes from OTEL_SERVICE_NAME, else the name the process passes. The gRPC interceptors
(runtime/server.py, the SDK's channels) create spans and carry W3C `traceparent` in metadata.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter


class TelemetryConfigError(ValueError):
    """An OTEL_* variable names something Samsa cannot export to."""


def configure(default_service_name: str) -> bool:
    """Install a tracer provider when OTEL_TRACES_EXPORTER asks for one; True if installed."""
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    if exporter_name in ("", "none"):
        return False
    exporter: SpanExporter
    if exporter_name == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    elif exporter_name == "console":
        exporter = ConsoleSpanExporter()
    else:
        raise TelemetryConfigError(
            f"OTEL_TRACES_EXPORTER={exporter_name!r}: Samsa supports none, otlp and console"
        )
    name = os.environ.get("OTEL_SERVICE_NAME", default_service_name)
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True
