"""The grpc.aio channels a service dials its peers with: sized for the largest message Samsa
sends, TLS when the process is (transport.py), and traced when tracing is on
(telemetry.outgoing_interceptors), so that a call made while serving a traced request carries
the trace on."""

from __future__ import annotations

import grpc

from samsa.common import limits
from samsa.services.runtime import transport
from samsa.services.runtime.telemetry import outgoing_interceptors

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
]


def service_channel(endpoint: str, *, traced: bool = True) -> grpc.aio.Channel:
    """A channel to `endpoint` (host:port); build it on the event loop that will use it.
    `traced=False` for a channel that carries only connection streams and fetches (the replica
    fetcher's): those run in the background with no context to carry, and an interceptor would
    cost every message (common/quiet_rpcs.py)."""
    interceptors = outgoing_interceptors() if traced else None
    return transport.dial(endpoint, options=CHANNEL_OPTIONS, interceptors=interceptors)
