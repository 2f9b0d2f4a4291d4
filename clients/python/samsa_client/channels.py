"""gRPC channels of the SDK: one per endpoint, sized for maximal batches, traced with OpenTelemetry.

`Channels` holds sync channels (metadata and admin reads, on the caller's or a worker thread);
their close() cancels the calls in flight on other threads and closes the channels only once no
call is in flight (cancellable_channel.py: closing a channel under a call races grpc's C core,
grpc/grpc issues 16290, 19235, 19973, and a stub made on a closed one crashes it). `AioChannels`
holds grpc.aio channels for the producer driver's event loop, which alone uses and closes them.

The OTel client interceptor starts a span per call and injects the W3C `traceparent` into the call
metadata, so a request can be followed from the application into the broker (whose server
interceptor continues the trace). On the sync channels, with no tracer provider configured, it
does nothing measurable. On the aio channels it wraps every message of a stream in one more async
generator even then, which a producer waiting on each record feels: they are intercepted only when
the application set a tracer provider before the producer started (`tracing_configured`), as the
services install theirs only when an exporter is configured. Heartbeats and fetches
(common/quiet_rpcs.py) are never intercepted: a consumer polls all the time, and its records are
traced one by one instead (record_tracing.py).

Security: a client with `security.protocol=SSL` or SASL_SSL (client_tls.py) hands both its
channel sets its `ClientSecurity`, read once when the client was built: TLS, and with SASL_SSL
the client's one login (sasl_login.py), whose ticket the credentials attach to every call. Each
set makes its credentials from it once and dials every endpoint with `secure_channel`. Without it
(PLAINTEXT), channels are insecure.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors, client_interceptor, grpcext
from opentelemetry.instrumentation.grpc.filters import any_of, full_method_name, negate

from samsa.client import fork_safety
from samsa.client.cancellable_channel import CallRegistry, CancellableChannel
from samsa.client.inflight_calls import closed_error
from samsa.common import limits
from samsa.common.quiet_rpcs import CONNECTION_STREAMS, QUIET_METHODS

if TYPE_CHECKING:  # client_tls.py's login dials with CHANNEL_OPTIONS
    from samsa.client.client_tls import ClientSecurity

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
]

# True for the calls the interceptors trace: all but the quiet ones and the connection streams.
TRACED_CALLS = negate(
    any_of(*(full_method_name(method) for method in sorted(QUIET_METHODS | CONNECTION_STREAMS)))
)


class Channels:
    """Channels by endpoint (host:port), created on first use and closed together.

    Once closed, `get` raises instead of opening a channel that nothing would close: a call made
    after the client's close(), or one still retrying on another thread, ends there. A call in
    flight at close() is cancelled (its thread sees an RpcError, CANCELLED), and the channels are
    closed once none is in flight (cancellable_channel.py). In a child process forked meanwhile
    `get` raises the fork error (fork_safety.py), naming `client`. With `security` (TLS, a
    login), every channel is a secure one made with its credentials."""

    def __init__(self, client: str = "client", security: ClientSecurity | None = None) -> None:
        self.security = security
        self._credentials = None if security is None else security.channel_credentials()
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._closed = False
        self._client = client
        self._raw: list[grpc.Channel] = []  # under the registry: closed once no call is in flight
        self._calls = CallRegistry(self._close_raw)
        self._forked: list[grpc.Channel] | None = None  # the parent's, in a forked child
        fork_safety.call_in_child(self)

    def get(self, endpoint: str) -> grpc.Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            with self._lock:
                if self._forked is not None:
                    raise fork_safety.forked_error(self._client)
                if self._closed:
                    raise closed_error()
                channel = self._channels.get(endpoint)
                if channel is None:
                    raw = _channel(endpoint, self._credentials)
                    self._raw.append(raw)
                    interceptor = client_interceptor(filter_=TRACED_CALLS)
                    cancellable = CancellableChannel(raw, self._calls)
                    channel = grpcext.intercept_channel(cancellable, interceptor)
                    self._channels[endpoint] = channel
        return channel

    def close(self) -> None:
        """Refuse new calls, cancel those in flight (on any thread), and close the channels now
        if none is in flight, else on the thread of the last one as it leaves. Idempotent."""
        with self._lock:
            self._closed = True
            self._channels.clear()
            if self._forked is not None:  # the parent's calls and channels: not this process's
                return
        self._calls.close()

    def _close_raw(self) -> None:
        """Run once, with no call in flight and none to come (CallRegistry)."""
        with self._lock:
            raw, self._raw = self._raw, []
        for channel in raw:
            channel.close()

    def after_fork_in_child(self) -> None:
        """The parent's channels are neither used nor closed here (gRPC's core did not follow
        the fork); they are kept, so that no finalizer closes them either. The lock is new: a
        parent thread may have held it at the fork."""
        self._lock = threading.Lock()
        self._forked, self._channels = self._raw, {}
        self._raw = []
        self._closed = True


def _channel(endpoint: str, credentials: grpc.ChannelCredentials | None) -> grpc.Channel:
    if credentials is None:
        return grpc.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
    return grpc.secure_channel(endpoint, credentials, options=CHANNEL_OPTIONS)


def tracing_configured() -> bool:
    """True once the application set a tracer provider (the default is a proxy to nothing)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


class AioChannels:
    """grpc.aio channels by endpoint, for one event loop (no lock: only that loop touches them);
    secure ones with `security` (TLS, a login)."""

    def __init__(self, security: ClientSecurity | None = None) -> None:
        self._credentials = None if security is None else security.channel_credentials()
        self._login = None if security is None else security.login
        self._channels: dict[tuple[str, bool], grpc.aio.Channel] = {}
        self._interceptors = (
            aio_client_interceptors(filter_=TRACED_CALLS) if tracing_configured() else None
        )

    def get(self, endpoint: str, *, traced: bool = True) -> grpc.aio.Channel:
        """The channel to `endpoint`; `traced=False` for produce and fetch streams and fetches,
        which must not pay an interceptor per message (common/quiet_rpcs.py): with tracing on,
        those go on a second channel without one."""
        key = (endpoint, traced and self._interceptors is not None)
        channel = self._channels.get(key)
        if channel is None:
            interceptors = self._interceptors if key[1] else None
            if self._credentials is None:
                channel = grpc.aio.insecure_channel(
                    endpoint, options=CHANNEL_OPTIONS, interceptors=interceptors
                )
            else:
                channel = grpc.aio.secure_channel(
                    endpoint, self._credentials, options=CHANNEL_OPTIONS, interceptors=interceptors
                )
            self._channels[key] = channel
        return channel

    def stream_generation(self) -> int:
        """The SASL login's generation a stream opened now carries (0 without a login)."""
        return 0 if self._login is None else self._login.stream_generation()

    def stream_stale(self, generation: int) -> bool:
        """Whether an idle stream opened at `generation` should be reopened for a fresh SASL
        ticket (sasl_login.py); never without a login."""
        return self._login is not None and self._login.stream_stale(generation)

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
