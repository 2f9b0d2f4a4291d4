"""One gRPC server per service process, with what every Samsa service serves besides its own API.

- message size limits from `samsa.common.limits` (a request over them is refused by gRPC with
  RESOURCE_EXHAUSTED before it reaches our code), and the requests one connection may have in
  progress at once (`grpc_streams_per_connection_max`; a gRPC client queues the rest), the
  connections it serves (`max.connections`, open_files.py) and, in the guard, the requests in
  progress over all of them (`grpc_requests_in_progress_max`: UNAVAILABLE beyond it);
- `grpc.health.v1` (SERVING once started, NOT_SERVING while stopping), for load balancers,
  docker-compose health checks and `samsa up`; with `health_file`, a file kept fresh while it
  answers SERVING (health_file.py), which a container's health check reads for the cost of a
  `stat`;
- server reflection, so that grpcurl and other generic tools can list and call the API;
- the OpenTelemetry server interceptor: a span per RPC, continuing the W3C trace context a client
  sends in metadata — when tracing is on (OTEL_TRACES_EXPORTER set, see telemetry.py). Off by
  default, and then not installed at all: it costs a third of a small RPC's latency;
- per-RPC metrics (metrics.py's `RpcMetrics`) when the process serves metrics;
- the RPC guard (`RpcGuard`), an interceptor every service gets, so that bad bytes and our own bugs
  end a call with a status a client can act on, and cost a bounded number of log lines.

The guard, in detail. grpc.aio answers a request its deserializer cannot parse with UNKNOWN
("Unexpected DecodeError") and logs a traceback at ERROR for each one; inside a request stream the
DecodeError is raised into whichever task iterates the requests, where it can die unseen. The
guard wraps each method handler once (cached by method name, so an RPC costs a dict lookup):
- its request deserializer returns an `_Undecodable` sentinel instead of raising DecodeError;
- its behaviour aborts with INVALID_ARGUMENT ("the request is not a valid samsa.v1.X: <reason>")
  when the request is the sentinel; so it does, with RESOURCE_EXHAUSTED, for a request that would
  parse into more than request_shape.ELEMENTS_MAX objects, counted before parsing (one 80 MiB
  request of empty entries parsed into ~2 GB). A request stream raises `UndecodableRequestError`
  into whichever task reads it when it meets one; the behaviour turns that into the same abort once
  it reaches the handler's own task. (Never abort from another task: grpc allows one operation batch
  at a time per call, so an abort racing the handler's write fails with TOO_MANY_OPERATIONS.
  A handler that reads its requests in a task of its own must hand that task's failure back, as
  ProduceStream does);
- an exception our handler did not expect (a programmer error) answers INTERNAL with a short
  message instead of grpc's UNKNOWN with the exception's text; grpc's own control-flow errors
  (an abort, a stopped server) pass through untouched.
Both kinds are logged (undecodable at WARNING, one line; unexpected at ERROR with the traceback),
at most `limits.rpc_failure_log_lines_max` lines per `rpc_failure_log_window_ms` each; the rest are
counted and summarized in one line when the window ends (rate_limited_log.py is the pure rule).
Only `async def` and async-generator behaviours are wrapped (all of Samsa's); a synchronous one
is served as grpc would serve it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_server_interceptor
from opentelemetry.instrumentation.grpc.filters import any_of, full_method_name, negate

from samsa.common import limits
from samsa.common.quiet_rpcs import CONNECTION_STREAMS
from samsa.services.runtime import metrics, transport
from samsa.services.runtime.health_file import HealthFile, own_address
from samsa.services.runtime.open_files import connections_bound, open_files_limit
from samsa.services.runtime.rate_limited_log import LogRateLimiter
from samsa.services.runtime.request_iterators import close_requests
from samsa.services.runtime.request_shape import elements_problem
from samsa.services.runtime.wrapping_interceptor import WrappingInterceptor, behaviour_of, rebuilt

_LOGGER = logging.getLogger(__name__)

SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_concurrent_streams", limits.grpc_streams_per_connection_max),
    ("grpc.max_connection_idle_ms", limits.grpc_connection_idle_ms),
    ("grpc.so_reuseport", 0),
]


# The longest reason from a DecodeError quoted back to the client.
_REASON_CHARS_MAX = 200


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class _Undecodable:
    """What a guarded deserializer returns for bytes that are not the method's request type, or
    that would parse into too many objects (request_shape.py: RESOURCE_EXHAUSTED)."""

    __slots__ = ("code", "message")

    def __init__(
        self, message: str, code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT
    ) -> None:
        self.message = message
        self.code = code


def _guard_deserializer(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    descriptor = getattr(getattr(deserializer, "__self__", None), "DESCRIPTOR", None)
    type_name = getattr(descriptor, "full_name", "request message")

    def deserialize(raw: bytes) -> Any:
        if descriptor is not None and (problem := elements_problem(descriptor, raw)) is not None:
            return _Undecodable(problem, grpc.StatusCode.RESOURCE_EXHAUSTED)
        try:
            return deserializer(raw)
        except DecodeError as error:
            # upb says "Error parsing message with type 'X': <reason>"; keep the reason.
            reason = str(error).rpartition("': ")[2] or "not protobuf wire format"
            return _Undecodable(
                f"the request is not a valid {type_name}: {reason[:_REASON_CHARS_MAX]} "
                f"({len(raw)} bytes)"
            )

    return deserialize


class UndecodableRequestError(Exception):
    """Raised by a guarded request stream at an undecodable message; answered with `code`
    (INVALID_ARGUMENT, or RESOURCE_EXHAUSTED for one too many objects to parse)."""

    def __init__(
        self,
        message: str,
        code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT,
        trailing_metadata: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.trailing_metadata = trailing_metadata  # an ACL refusal's code and resource


class _RateLimitedLogger:
    """One kind of line, written at most as often as `LogRateLimiter` allows; a timer writes the
    summary of a window that ended with lines suppressed."""

    def __init__(self, level: int, kind: str, clock_ms: Callable[[], int]) -> None:
        self.level = level
        self.kind = kind
        self.clock_ms = clock_ms
        self.limiter = LogRateLimiter(
            limits.rpc_failure_log_lines_max, limits.rpc_failure_log_window_ms
        )
        self.summary_armed = False

    def log(self, message: str, *args: object, exc_info: BaseException | None = None) -> None:
        now_ms = self.clock_ms()
        admission = self.limiter.admit(now_ms)
        if admission.suppressed_before:
            self._summarize(admission.suppressed_before)
        if admission.write:
            _LOGGER.log(self.level, message, *args, exc_info=exc_info)
        elif not self.summary_armed:
            self._arm(now_ms)

    def _arm(self, now_ms: int) -> None:
        end_ms = self.limiter.window_end_ms()
        assert end_ms is not None
        self.summary_armed = True
        # A few ms late rather than early: asyncio may run a timer up to its clock resolution soon.
        delay_s = (max(0, end_ms - now_ms) + 10) / 1000
        asyncio.get_running_loop().call_later(delay_s, self._flush)

    def _flush(self) -> None:
        self.summary_armed = False
        now_ms = self.clock_ms()
        suppressed = self.limiter.close_window(now_ms)
        if suppressed:
            self._summarize(suppressed)
        elif self.limiter.suppressed:
            self._arm(now_ms)

    def _summarize(self, suppressed: int) -> None:
        _LOGGER.log(
            self.level,
            "suppressed %d more log lines about %s in the last %d s",
            suppressed,
            self.kind,
            limits.rpc_failure_log_window_ms // 1000,
            extra={"suppressed": suppressed},
        )


Behaviour = Callable[[Any, grpc.aio.ServicerContext], Any]


class RpcGuard(WrappingInterceptor):
    """Undecodable requests answer INVALID_ARGUMENT, unexpected exceptions INTERNAL; both are
    logged at a bounded rate (see the module docstring)."""

    def __init__(
        self,
        clock_ms: Callable[[], int] = _monotonic_ms,
        requests_max: int = limits.grpc_requests_in_progress_max,
    ) -> None:
        super().__init__()
        self.requests_max = requests_max
        self.in_progress = 0  # calls between their handler's start and end
        self._undecodable_log = _RateLimitedLogger(
            logging.WARNING, "undecodable requests", clock_ms
        )
        self._failure_log = _RateLimitedLogger(logging.ERROR, "unexpected exceptions", clock_ms)
        self._busy_log = _RateLimitedLogger(logging.WARNING, "requests refused as busy", clock_ms)

    def wrap_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        wrapped = self._wrap(behaviour_of(handler), method, handler.request_streaming)
        if wrapped is None:
            return handler
        deserializer = handler.request_deserializer
        return rebuilt(handler, wrapped, deserializer and _guard_deserializer(deserializer))

    def _wrap(self, behaviour: Behaviour, method: str, streaming_in: bool) -> Behaviour | None:
        checked = self._check_stream if streaming_in else self._check_request
        if inspect.isasyncgenfunction(behaviour):

            async def stream_out(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if self.in_progress >= self.requests_max:
                    await self._refuse_busy(context, method)
                self.in_progress += 1
                try:
                    request = checked(request, context, method)
                    async for response in behaviour(request, context):
                        yield response
                except UndecodableRequestError as refused:
                    await context.abort(refused.code, str(refused), refused.trailing_metadata)
                except grpc.aio.BaseError:
                    raise  # an abort, a stopped server: grpc's own control flow
                except Exception as error:
                    await self._fail(error, context, method)
                finally:
                    self.in_progress -= 1

            return stream_out
        if inspect.iscoroutinefunction(behaviour):

            async def unary_out(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if self.in_progress >= self.requests_max:
                    await self._refuse_busy(context, method)
                self.in_progress += 1
                try:
                    request = checked(request, context, method)
                    return await behaviour(request, context)
                except UndecodableRequestError as refused:
                    await context.abort(refused.code, str(refused), refused.trailing_metadata)
                except grpc.aio.BaseError:
                    raise
                except Exception as error:
                    await self._fail(error, context, method)
                finally:
                    self.in_progress -= 1

            return unary_out
        return None

    async def _refuse_busy(self, context: grpc.aio.ServicerContext, method: str) -> None:
        """A call beyond requests_max (limits.grpc_requests_in_progress_max says why)."""
        self._busy_log.log("refused %s from %s: busy", method, context.peer())
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            f"this service has {self.in_progress} requests in progress, its most "
            "(limits.grpc_requests_in_progress_max): retry after a backoff",
        )

    def _check_request(self, request: Any, context: grpc.aio.ServicerContext, method: str) -> Any:
        if type(request) is _Undecodable:
            self._refuse(request, context, method)
        return request

    def _check_stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, method: str
    ) -> AsyncIterator[Any]:
        return self._checked_stream(requests, context, method)

    async def _checked_stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, method: str
    ) -> AsyncIterator[Any]:
        try:
            async for request in requests:
                if type(request) is _Undecodable:
                    self._refuse(request, context, method)
                yield request
        finally:
            await close_requests(requests)  # closed with this one: request_iterators.py

    def _refuse(
        self, request: _Undecodable, context: grpc.aio.ServicerContext, method: str
    ) -> None:
        self._undecodable_log.log(
            "refused an undecodable request to %s from %s: %s",
            method,
            context.peer(),
            request.message,
        )
        raise UndecodableRequestError(request.message, request.code)

    async def _fail(self, error: Exception, context: grpc.aio.ServicerContext, method: str) -> None:
        self._failure_log.log(
            "unexpected %s in %s: %s", type(error).__name__, method, error, exc_info=error
        )
        if context.done():
            return  # the status is already sent (an abort from another task): nothing to answer
        await context.abort(
            grpc.StatusCode.INTERNAL,
            f"the server failed on {method} ({type(error).__name__}); it is logged there",
        )


class ServerStartError(RuntimeError):
    """The listener could not be bound; the message names the address."""


def _cannot_listen(listen: str, key: str = "listeners") -> str:
    return (
        f"cannot listen on {listen}: the port is in use by another process, or the host is "
        f"not an address of this machine (set {key} to a free host:port)"
    )


def check_bindable(address: str, key: str) -> None:
    """ServerStartError unless a listener could bind `address` (host:port, an IPv6 host in
    brackets) now: for a listener bound by a library that only retries in silence (a
    controller's Raft port: pysyncobj tries again every second, for ever). SO_REUSEADDR, as
    that library binds, so a port a previous run left in TIME_WAIT passes."""
    host, _, port = address.rpartition(":")
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(where)
    except OSError as error:
        raise ServerStartError(_cannot_listen(address, key)) from error


class GrpcServer:
    """A grpc.aio server bound to `listen`, serving health and reflection for `service_names`."""

    def __init__(
        self,
        listen: str,
        service_names: Sequence[str],
        *,
        tracing: bool,
        health_file: str | None = None,
        connections_max: int = limits.grpc_connections_max,
        listen_key: str = "listeners",
        inner_interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        self.listen = listen
        self.listen_key = listen_key  # the setting named when the address cannot be bound
        self.health_file_path = health_file
        self._health_file: HealthFile | None = None
        # The tracing interceptor costs ~0.3 ms per RPC even with nowhere to send spans: installed
        # only when telemetry.configure() set up an exporter. The guard is innermost, so a span
        # records the status it chose.
        self.guard = RpcGuard()
        interceptors: list[grpc.aio.ServerInterceptor] = []
        if tracing:  # the connection streams are traced per message or not at all
            untraced = any_of(*(full_method_name(name) for name in sorted(CONNECTION_STREAMS)))
            interceptors.append(aio_server_interceptor(filter_=negate(untraced)))
        if metrics.enabled():  # outside the guard, so it sees the status the guard chose
            interceptors.append(metrics.RpcMetrics())
        interceptors.append(self.guard)
        # Inside the guard (the authorizer, authorization.py): a refusal it raises in a request
        # stream is aborted by the guard from the handler's task.
        interceptors.extend(inner_interceptors)
        self.interceptors = tuple(interceptors)  # outermost first
        # max.connections, within the open-files limit (open_files.py; limits.py says why).
        self.connections_max = connections_bound(connections_max, open_files_limit())
        options = [*SERVER_OPTIONS, ("grpc.max_allowed_incoming_connections", self.connections_max)]
        self.server = grpc.aio.server(options=options, interceptors=interceptors)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.service_names = list(service_names)
        reflection.enable_server_reflection(
            [*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], self.server
        )
        self.port = 0

    async def start(self) -> None:
        try:
            self.port = transport.bind(self.server, self.listen)
        except RuntimeError as error:  # grpc's text only says to turn on its debug logs
            raise ServerStartError(_cannot_listen(self.listen, self.listen_key)) from error
        if self.port == 0:
            raise ServerStartError(_cannot_listen(self.listen, self.listen_key))
        await self.server.start()
        await self._set_status(health_pb2.HealthCheckResponse.SERVING)
        if self.health_file_path is not None:
            address = own_address(self.listen, self.port)
            self._health_file = HealthFile(self.health_file_path, address)
            self._health_file.start()

    async def stop(self, grace_s: float) -> None:
        if self._health_file is not None:
            await self._health_file.stop()
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.stop(grace_s)

    async def _set_status(self, status: int) -> None:
        for name in ["", *self.service_names]:
            await self.health.set(name, status)
