"""OpenTelemetry tracing from the standard OTEL_* variables; off unless asked for.

OTEL_TRACES_EXPORTER: unset or "none" (default) keeps the SDK's no-op provider; "otlp" exports over
OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT (an OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL other than grpc is
refused: it would dial an HTTP port with gRPC and drop every span); "file" appends one JSON line per
span to SAMSA_TRACES_FILE (common/span_file.py; processes may share the file), which `samsa trace`
reads; "console" writes those same lines to stdout. Spans never go to stderr, where the JSON log
lines are (logs.py): a log line written inside a span carries its trace_id and span_id instead, and
`samsa up` keeps each process's stdout apart from its log. The service name comes from
OTEL_SERVICE_NAME, else the name the process passes. OTEL_TRACES_SAMPLER(_ARG) choose which traces
are kept, with the SDK's names, except that heartbeats, polls and health checks never start a trace
of their own (sampling.py). The gRPC interceptors (runtime/server.py on the way in,
`outgoing_interceptors` on a service's own calls, the SDK's channels) create spans and carry the W3C
`traceparent` in metadata, so a call a service makes while serving a traced one (a forwarded admin
write, a coordinator's write to a broker) continues the caller's trace.
"""

from __future__ import annotations

import os

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from samsa.common.span_file import SpanFileExporter
from samsa.services.runtime.sampling import SamplerConfigError, sampler_from_env

TRACES_FILE_VARIABLE = "SAMSA_TRACES_FILE"


class TelemetryConfigError(ValueError):
    """An OTEL_* variable names something Samsa cannot export to or sample with."""


def configure(default_service_name: str) -> bool:
    """Install a tracer provider when OTEL_TRACES_EXPORTER asks for one; True if installed."""
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    if exporter_name in ("", "none"):
        return False
    exporter: SpanExporter
    if exporter_name == "otlp":
        _check_otlp_protocol()
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    elif exporter_name == "file":
        path = os.environ.get(TRACES_FILE_VARIABLE, "")
        if not path:
            raise TelemetryConfigError(
                f"OTEL_TRACES_EXPORTER=file needs {TRACES_FILE_VARIABLE}=PATH (spans are appended)"
            )
        try:
            exporter = SpanFileExporter(path)
        except OSError as error:
            raise TelemetryConfigError(f"{TRACES_FILE_VARIABLE}={path!r}: {error}") from error
    elif exporter_name == "console":
        exporter = SpanFileExporter(fd=1)  # stdout: the logs are on stderr
    else:
        raise TelemetryConfigError(
            f"OTEL_TRACES_EXPORTER={exporter_name!r}: Samsa supports none, otlp, file and console"
        )
    try:
        sampler = sampler_from_env(os.environ)
    except SamplerConfigError as error:
        raise TelemetryConfigError(str(error)) from error
    name = os.environ.get("OTEL_SERVICE_NAME", default_service_name)
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}), sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


def _check_otlp_protocol() -> None:
    """Samsa's OTLP exporter is the gRPC one: an HTTP protocol asked for (a collector's port
    4318) would be dialled with gRPC and every span dropped, so it is refused at start."""
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = os.environ.get(variable, "").strip().lower()
        if protocol:
            if protocol != "grpc":
                raise TelemetryConfigError(
                    f"{variable}={protocol!r}: Samsa exports OTLP over gRPC only; set it to "
                    "grpc (or leave it unset) and point OTEL_EXPORTER_OTLP_ENDPOINT at the "
                    "collector's OTLP/gRPC port (4317 by default)"
                )
            return  # the traces-specific variable wins over the general one


def tracing_on() -> bool:
    """True once `configure` (or a test) installed a tracer provider."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def outgoing_interceptors() -> list[grpc.aio.ClientInterceptor] | None:
    """The interceptors of a service's own grpc.aio channels: a span per call, carrying the
    current context in metadata; None when tracing is off (they cost even with nothing to
    export). Build channels after `configure`."""
    return aio_client_interceptors() if tracing_on() else None
