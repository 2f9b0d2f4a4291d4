"""One gRPC server per service process, with what every Samsa service serves besides its own API.

- message size limits from `samsa.common.limits` (a request over them is refused by gRPC with
  RESOURCE_EXHAUSTED before it reaches our code);
- `grpc.health.v1` (SERVING once started, NOT_SERVING while stopping), for load balancers,
  docker-compose health checks and `samsa up`;
- server reflection, so that grpcurl and other generic tools can list and call the API;
- the OpenTelemetry server interceptor: a span per RPC, continuing the W3C trace context a client
  sends in metadata — when tracing is on (OTEL_TRACES_EXPORTER set, see telemetry.py). Off by
  default, and then not installed at all: it costs a third of a small RPC's latency.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from samsa.common import limits

SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    ("grpc.so_reuseport", 0),
]


class ServerStartError(RuntimeError):
    """The listener could not be bound; the message names the address."""


class GrpcServer:
    """A grpc.aio server bound to `listen`, serving health and reflection for `service_names`."""

    def __init__(self, listen: str, service_names: Sequence[str], *, tracing: bool) -> None:
        self.listen = listen
        # The interceptor costs ~0.3 ms per RPC even with nowhere to send spans: installed only
        # when telemetry.configure() set up an exporter.
        interceptors = [aio_server_interceptor()] if tracing else []
        self.server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=interceptors)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.service_names = list(service_names)
        reflection.enable_server_reflection(
            [*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], self.server
        )
        self.port = 0

    async def start(self) -> None:
        try:
            self.port = self.server.add_insecure_port(self.listen)
        except RuntimeError as error:
            raise ServerStartError(f"cannot listen on {self.listen}: {error}") from error
        if self.port == 0:
            raise ServerStartError(f"cannot listen on {self.listen} (address in use?)")
        await self.server.start()
        await self._set_status(health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, grace_s: float) -> None:
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.stop(grace_s)

    async def _set_status(self, status: int) -> None:
        for name in ["", *self.service_names]:
            await self.health.set(name, status)
