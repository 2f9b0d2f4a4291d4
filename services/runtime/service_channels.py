"""The grpc.aio channels a service dials its peers with: sized for the largest message Samsa
sends, and traced when tracing is on (telemetry.outgoing_interceptors), so that a call made while
serving a traced request carries the trace on."""

from __future__ import annotations

import grpc

from samsa.common import limits
from samsa.services.runtime.telemetry import outgoing_interceptors

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
]


def service_channel(endpoint: str) -> grpc.aio.Channel:
    """A channel to `endpoint` (host:port); build it on the event loop that will use it."""
    return grpc.aio.insecure_channel(
        endpoint, options=CHANNEL_OPTIONS, interceptors=outgoing_interceptors()
    )
