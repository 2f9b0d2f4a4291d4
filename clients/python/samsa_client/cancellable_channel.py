"""A sync gRPC channel whose calls the client's close() cancels, and which closes only once idle.

Why: gRPC Python's `Channel.close()` under a call blocked on another thread races grpc's C core
(grpc/grpc issues 16290, 19235, 19973: a crash of the process at times, a ValueError out of the
call at others), yet a client's close() must end a call under way there (a metadata refresh
waiting on a silent cluster). So every unary call is issued as a future (`Method.future`, whose
`cancel()` is thread-safe) and waited on, counted in the client's `InFlightCalls`
(inflight_calls.py): close() cancels the calls in flight, whose threads see an RpcError with
CANCELLED as they saw one with a closed channel before, and the raw channels close on the thread
of the last call to leave (or at once when none is in flight).

A stub's making touches the channel too: grpc registers each method with the channel's C core
(`unary_unary(..., _registered_method=True)`), which on a closed channel is a segmentation fault
(seen in grpcio 1.85 when a refresh made its stub as another thread's close() closed the
channel). So a method is registered only inside a call, once counted (the channel then stays
open), and once per channel, under a lock (grpc says that registration is not thread-safe).

The SDK's sync code makes unary calls only (streams are the aio drivers'): a stream call here is
refused, since close() could neither cancel it nor know when it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc

from samsa.client.inflight_calls import InFlightCalls


class CallRegistry:
    """`InFlightCalls` under a lock, shared by a client's channels; `close_channels` is run once,
    when close() began and no call is in flight any more."""

    def __init__(self, close_channels: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._calls: InFlightCalls[grpc.Future] = InFlightCalls()
        self._close_channels = close_channels

    def wait(self, issue: Callable[[], grpc.Future]) -> tuple[Any, grpc.Future]:
        """Issue a call and wait for its answer, cancellable by `close` meanwhile."""
        with self._lock:
            self._calls.begin()
        future: grpc.Future | None = None
        try:
            future = issue()
            with self._lock:
                cancel = self._calls.started(future)
            if cancel:
                future.cancel()
            try:
                return future.result(), future
            except grpc.FutureCancelledError:  # close() cancelled it: the call's own RpcError
                raise future from None  # type: ignore[misc]  # a grpc.Call too, code CANCELLED
        finally:
            if future is not None and not future.done():  # the wait was interrupted (Ctrl-C)
                future.cancel()  # no call left behind on a channel about to close
            with self._lock:
                closable = self._calls.end(future)
            if closable:
                self._close_channels()

    def close(self) -> None:
        """Cancel the calls in flight; close the channels now if none is, else when the last
        one ends. Later calls raise KafkaError (the client is closed)."""
        with self._lock:
            calls, closable = self._calls.close()
        for call in calls:
            call.cancel()
        if closable:
            self._close_channels()


class CancellableChannel(grpc.Channel):
    """`channel` whose unary calls go through `registry`; stream calls are refused."""

    def __init__(self, channel: grpc.Channel, registry: CallRegistry) -> None:
        self._channel = channel
        self._registry = registry
        self._lock = threading.Lock()
        self._methods: dict[str, grpc.UnaryUnaryMultiCallable] = {}  # registered, by method

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> grpc.UnaryUnaryMultiCallable:
        """The raw channel is not touched here (a stub is made on a channel that may be closed
        meanwhile): only by a call, once counted (`registered`)."""
        return CancellableUnaryUnary(method, args, kwargs, self)

    def registered(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The raw channel's callable for `method`, made once; only inside a counted call."""
        with self._lock:
            callable_ = self._methods.get(method)
            if callable_ is None:
                callable_ = self._methods[method] = self._channel.unary_unary(
                    method, *args, **kwargs
                )
            return callable_

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return RefusedStream(method)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return RefusedStream(method)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return RefusedStream(method)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._channel.unsubscribe(callback)

    def close(self) -> None:
        """The client's channels close together, once idle (`CallRegistry.close`)."""
        self._registry.close()

    def __enter__(self) -> CancellableChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CancellableUnaryUnary(grpc.UnaryUnaryMultiCallable):
    """A blocking unary call made as a future its channel's registry can cancel."""

    def __init__(
        self,
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        channel: CancellableChannel,
    ) -> None:
        self._method, self._args, self._kwargs = method, args, kwargs
        self._channel = channel
        self._registry = channel._registry

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        return self.with_call(request, *args, **kwargs)[0]

    def with_call(self, request: Any, *args: Any, **kwargs: Any) -> tuple[Any, grpc.Call]:
        def issue() -> grpc.Future:  # counted: the channel is open until this call ends
            inner = self._channel.registered(self._method, self._args, self._kwargs)
            return inner.future(request, *args, **kwargs)

        return self._registry.wait(issue)

    def future(self, request: Any, *args: Any, **kwargs: Any) -> grpc.Future:
        raise TypeError(
            "the SDK's sync channels make blocking calls only (cancellable_channel.py): a "
            "future of its own would outlive the client's close()"
        )


class RefusedStream:
    """A stream method's callable on a sync channel: refused when called (module doc)."""

    def __init__(self, method: str) -> None:
        self._method = method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{self._method}: the SDK's sync channels make unary calls only (a stream would "
            "outlive the client's close()); use the aio channels (AioChannels) for streams"
        )

    with_call = future = __call__
