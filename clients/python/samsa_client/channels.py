"""gRPC channels of the SDK: one per endpoint, sized for maximal batches, traced with OpenTelemetry.

`Channels` holds sync channels (metadata and admin reads, on the caller's or a worker thread);
`AioChannels` holds grpc.aio channels for the producer driver's event loop, which alone uses and
closes them.

The OTel client interceptor starts a span per call and injects the W3C `traceparent` into the call
metadata, so a request can be followed from the application into the broker (whose server
interceptor continues the trace). With no tracer provider configured it does nothing measurable.
"""

from __future__ import annotations

import threading

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors, client_interceptor, grpcext

from samsa.common import limits

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
]


class Channels:
    """Channels by endpoint (host:port), created on first use and closed together."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}

    def get(self, endpoint: str) -> grpc.Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            with self._lock:
                channel = self._channels.get(endpoint)
                if channel is None:
                    raw = grpc.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
                    channel = grpcext.intercept_channel(raw, client_interceptor())
                    self._channels[endpoint] = channel
        return channel

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()


class AioChannels:
    """grpc.aio channels by endpoint, for one event loop (no lock: only that loop touches them)."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, endpoint: str) -> grpc.aio.Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = grpc.aio.insecure_channel(
                endpoint, options=CHANNEL_OPTIONS, interceptors=aio_client_interceptors()
            )
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
