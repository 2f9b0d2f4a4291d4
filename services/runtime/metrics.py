"""Metrics: OpenTelemetry instruments, served for Prometheus to scrape at `http://ADDR/metrics`.

Off unless an address is given (`--metrics-listen HOST:PORT`, or the `SAMSA_METRICS_LISTEN`
environment variable, or just a port). Then `start` installs a MeterProvider whose reader is
OpenTelemetry's Prometheus exporter and serves prometheus_client's registry over HTTP on a
thread of its own. When off, every instrument is OpenTelemetry's no-op one, and the RPC
interceptor is not installed at all, so metrics cost nothing.

What every service gets (`RpcMetrics`, a server interceptor installed beside the RPC guard):
- `rpc_server_duration_milliseconds`: a histogram per unary RPC (method, gRPC status code), the
  latency a client sees minus the network, so rates and percentiles per RPC come from it; the
  status is the one the client got (an abort's, a code set on the context, DEADLINE_EXCEEDED or
  CANCELLED when grpc cancelled the handler for the client);
- `rpc_server_messages_total`: messages received and sent per streaming RPC (method, direction),
  since a stream's own duration says nothing about the requests in it.
Brokers and controllers count their background loops' restarts (`samsa.task.restarts` {task},
supervisor.py). Services add their own instruments from `meter()`, and series labelled by what
comes and goes (a topic, a group) through `register_collector` (labelled_series.py).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry import metrics
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from samsa.services.runtime.request_iterators import close_requests
from samsa.services.runtime.wrapping_interceptor import WrappingInterceptor

_LOGGER = logging.getLogger(__name__)
ENV_LISTEN = "SAMSA_METRICS_LISTEN"
METER_NAME = "samsa"
# Buckets for RPC latency (ms): sub-millisecond produce up to long-polls and slow admin writes.
LATENCY_BUCKETS_MS = (0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class MetricsConfigError(ValueError):
    """The metrics address is not HOST:PORT or a port."""


@dataclass(frozen=True)
class MetricsEndpoint:
    host: str
    port: int  # 0: any free port (tests)


def parse_listen(text: str | None) -> MetricsEndpoint | None:
    """`HOST:PORT`, `:PORT` or `PORT` (all interfaces), an IPv6 host in brackets as gRPC
    listeners are written ([::]:PORT); None or "" means off."""
    if text is None or not text.strip():
        return None
    host, _, port = text.strip().rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise MetricsConfigError(
            f"metrics listen address {text!r}: use HOST:PORT, :PORT or PORT (0-65535)"
        )
    if host.startswith("[") and host.endswith("]"):  # [::1]:PORT: the host is ::1
        host = host[1:-1]
    return MetricsEndpoint(host or "0.0.0.0", int(port))


def endpoint_from(flag: str | None) -> MetricsEndpoint | None:
    """The flag if given, else SAMSA_METRICS_LISTEN."""
    return parse_listen(flag if flag is not None else os.environ.get(ENV_LISTEN))


_started = False


def enabled() -> bool:
    """Whether `start` ran in this process (servers then install RpcMetrics)."""
    return _started


@dataclass
class MetricsServer:
    """What `start` started: the bound port (for `port` 0) and how to stop serving."""

    port: int
    shutdown: Callable[[], None]


def start(service_name: str, endpoint: MetricsEndpoint) -> MetricsServer:
    """Install the meter provider and serve /metrics; call once per process, first thing."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
    from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

    name = os.environ.get("OTEL_SERVICE_NAME", service_name)
    # The exporter's collector goes on a registry of its own, served through one that lets one
    # scrape at a time collect from it (OneScrapeAtATime says why).
    exported = CollectorRegistry(auto_describe=False)
    one_at_a_time = OneScrapeAtATime(exported)
    REGISTRY.register(one_at_a_time)
    provider = MeterProvider(
        resource=Resource.create({SERVICE_NAME: name}),
        metric_readers=[PrometheusMetricReader(registry=exported)],
        views=[
            View(
                instrument_name="rpc.server.duration",
                aggregation=ExplicitBucketHistogramAggregation(LATENCY_BUCKETS_MS),
            )
        ],
    )
    global _started
    metrics.set_meter_provider(provider)
    _started = True
    try:
        server, thread = start_http_server(endpoint.port, addr=endpoint.host)
    except OSError as error:
        raise MetricsConfigError(
            f"cannot serve metrics on {endpoint.host}:{endpoint.port}: {error}"
        ) from error

    def shutdown() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        provider.shutdown()
        REGISTRY.unregister(one_at_a_time)

    return MetricsServer(server.server_address[1], shutdown)


class OneScrapeAtATime:
    """A collector serving another registry's families, one scrape at a time.

    OpenTelemetry's Prometheus exporter hands each collection to the scrape through a queue its
    collector shares between scrapes: when a second scrape queued its collection before the
    first took its own, the first answered every series twice or more (which Prometheus rejects
    as duplicate samples) and the second answered none. Two Prometheus servers scraping the same
    service, or a person with curl beside one, could meet that; holding a lock over a whole
    collection keeps each scrape to its own."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry
        self._lock = threading.Lock()

    def describe(self) -> list[Any]:
        return []  # registering must not collect

    def collect(self) -> list[Any]:
        with self._lock:
            return list(self._registry.collect())


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-listen",
        default=None,
        help=f"serve Prometheus metrics at HOST:PORT/metrics (or {ENV_LISTEN}); off by default",
    )


def serve(listen: str | None, service_name: str) -> MetricsServer | None:
    """Start serving at `listen`, a service's resolved `metrics.listen` (MetricsConfigError
    when the address is malformed or taken); None when metrics are off. SAMSA_METRICS_LISTEN
    is not read again here: the config weighed it against the flag and the file already, and
    a flag that turned metrics off (`--metrics-listen ""`) must stay off."""
    endpoint = parse_listen(listen)
    if endpoint is None:
        return None
    served = start(service_name, endpoint)
    _LOGGER.info(
        "serving metrics at http://%s:%d/metrics",
        endpoint.host,
        served.port,
        extra={"metrics_port": served.port},
    )
    return served


def register_collector(collector: Any) -> None:
    """Serve a prometheus_client collector's families beside the instruments' (families whose
    label sets come and go: labelled_series.py says why they are not instruments)."""
    from prometheus_client import REGISTRY

    REGISTRY.register(collector)


def meter() -> metrics.Meter:
    """Samsa's meter (a no-op one while metrics are off)."""
    return metrics.get_meter(METER_NAME)


Behaviour = Callable[[Any, grpc.aio.ServicerContext], Any]


class RpcMetrics(WrappingInterceptor):
    """Per-RPC latency (unary) and message counts (streams); see the module docstring."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__()
        instruments = meter()
        self._duration = instruments.create_histogram(
            "rpc.server.duration", unit="ms", description="time to answer a unary RPC"
        )
        self._messages = instruments.create_counter(
            "rpc.server.messages", description="messages received and sent on streaming RPCs"
        )
        self._clock = clock

    def wrap_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        name = method.rsplit("/", 1)[-1]
        if not handler.request_streaming and not handler.response_streaming:
            behaviour = handler.unary_unary
            if not inspect.iscoroutinefunction(behaviour):
                return handler
            return grpc.unary_unary_rpc_method_handler(
                self._timed(behaviour, name),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.request_streaming and handler.response_streaming:
            behaviour = handler.stream_stream
            if not inspect.isasyncgenfunction(behaviour):
                return handler
            return grpc.stream_stream_rpc_method_handler(
                self._counted(behaviour, name),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # Samsa serves no half-streaming RPC

    def _timed(self, behaviour: Behaviour, name: str) -> Behaviour:
        async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = self._clock()
            code = "OK"
            try:
                answer = await behaviour(request, context)
                status = context.code()  # a handler may set a code and return
                if isinstance(status, grpc.StatusCode):
                    code = status.name
                return answer
            except asyncio.CancelledError:
                # grpc cancels the handler when the client's deadline passes or it cancels.
                remaining = context.time_remaining()
                timed_out = remaining is not None and remaining <= 0
                code = "DEADLINE_EXCEEDED" if timed_out else "CANCELLED"
                raise
            except BaseException:
                status = context.code()
                code = status.name if isinstance(status, grpc.StatusCode) else "UNKNOWN"
                raise
            finally:
                elapsed_ms = (self._clock() - started) * 1000
                self._duration.record(elapsed_ms, {"rpc.method": name, "rpc.grpc.status": code})

        return timed

    def _counted(self, behaviour: Behaviour, name: str) -> Behaviour:
        received = {"rpc.method": name, "direction": "received"}
        sent = {"rpc.method": name, "direction": "sent"}
        messages = self._messages

        async def counting(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
            try:
                async for request in requests:
                    messages.add(1, received)
                    yield request
            finally:
                await close_requests(requests)  # closed with this one: request_iterators.py

        async def counted(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            async for response in behaviour(counting(requests), context):
                messages.add(1, sent)
                yield response

        return counted
