"""A spy on the raw gRPC channels the SDK's sync `Channels` open: which calls are in flight on
each, and whether one was when the channel was closed (grpc/grpc issues 16290, 19235, 19973: a
channel closed under a call on another thread races grpc's C core).

A call is in flight until its thread has left it: a blocking call until it returns, a future
until the thread waiting on its result() has returned from it. That thread is made slow to
leave (LEAVE_DELAY_S), as a thread woken by a cancel may be: a close() that came before it left
is seen every time, not by luck of the scheduling. A method registered on a closed channel (a
stub made there: a segmentation fault in grpc's C core) is counted in `used_closed` and refused
instead."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

LEAVE_DELAY_S = 0.05


class ChannelSpy:
    """Install with `spy_channels(monkeypatch)`; then every grpc.insecure_channel is watched.
    `closed_under` lists what was in flight at each close of a channel."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0  # threads in a blocking call or waiting on a future's result()
        self.futures: list[SpyFuture] = []
        self.calls_started = threading.Event()
        self.closes = 0
        self.closed_under: list[str] = []
        self.used_closed = 0

    def enter(self) -> None:
        with self.lock:
            self.inside += 1
        self.calls_started.set()

    def leave(self) -> None:
        time.sleep(LEAVE_DELAY_S)
        with self.lock:
            self.inside -= 1

    def on_close(self) -> None:
        with self.lock:
            self.closes += 1
            self.closed_under.extend(["a call's thread still inside it"] * self.inside)

    def cancelled(self) -> int:
        with self.lock:
            return sum(1 for f in self.futures if f.cancelled())


class SpyFuture(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A future's stand-in: its thread is inside from the call's start until result() returned
    (or raised: as the real one, it is the call's RpcError too)."""

    def __init__(self, inner: Any, spy: ChannelSpy) -> None:
        self._inner = inner
        self._spy = spy
        spy.enter()

    def result(self, timeout: float | None = None) -> Any:
        try:
            return self._inner.result(timeout)
        finally:
            self._spy.leave()

    def cancel(self) -> bool:
        return bool(self._inner.cancel())

    def cancelled(self) -> bool:
        return bool(self._inner.cancelled())

    def done(self) -> bool:
        return bool(self._inner.done())

    def code(self) -> Any:
        return self._inner.code()

    def details(self) -> Any:
        return self._inner.details()

    def initial_metadata(self) -> Any:
        return self._inner.initial_metadata()

    def trailing_metadata(self) -> Any:
        return self._inner.trailing_metadata()

    def is_active(self) -> bool:
        return bool(self._inner.is_active())

    def time_remaining(self) -> Any:
        return self._inner.time_remaining()

    def add_callback(self, callback: Any) -> bool:
        return bool(self._inner.add_callback(callback))


class SpyCallable:
    def __init__(self, inner: Any, spy: ChannelSpy) -> None:
        self._inner = inner
        self._spy = spy

    def _blocking(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        self._spy.enter()
        try:
            return call(*args, **kwargs)
        finally:
            self._spy.leave()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._blocking(self._inner, *args, **kwargs)

    def with_call(self, *args: Any, **kwargs: Any) -> Any:
        return self._blocking(self._inner.with_call, *args, **kwargs)

    def future(self, *args: Any, **kwargs: Any) -> Any:
        future = SpyFuture(self._inner.future(*args, **kwargs), self._spy)
        with self._spy.lock:
            self._spy.futures.append(future)
        return future


class SpyChannel(grpc.Channel):
    def __init__(self, inner: grpc.Channel, spy: ChannelSpy) -> None:
        self._inner = inner
        self._spy = spy
        self._closed = False

    def unary_unary(self, *args: Any, **kwargs: Any) -> Any:
        if self._closed:  # grpc's C core would crash the test process
            with self._spy.lock:
                self._spy.used_closed += 1
            raise RuntimeError("a method registered on a closed channel")
        return SpyCallable(self._inner.unary_unary(*args, **kwargs), self._spy)

    def unary_stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.unary_stream(*args, **kwargs)

    def stream_unary(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.stream_unary(*args, **kwargs)

    def stream_stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.stream_stream(*args, **kwargs)

    def subscribe(self, *args: Any, **kwargs: Any) -> None:
        self._inner.subscribe(*args, **kwargs)

    def unsubscribe(self, *args: Any, **kwargs: Any) -> None:
        self._inner.unsubscribe(*args, **kwargs)

    def close(self) -> None:
        self._spy.on_close()
        self._closed = True
        self._inner.close()

    def __enter__(self) -> SpyChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spy_channels(monkeypatch: pytest.MonkeyPatch) -> ChannelSpy:
    """Watch every sync channel opened from now on (the aio ones are not: the loop owning them
    closes them)."""
    spy = ChannelSpy()
    real = grpc.insecure_channel
    monkeypatch.setattr(grpc, "insecure_channel", lambda *a, **k: SpyChannel(real(*a, **k), spy))
    return spy


@pytest.fixture
def silent_servers() -> Iterator[str]:
    """Two bootstrap servers that accept connections and never answer (a call waits out its
    deadline)."""
    listeners = [socket.create_server(("127.0.0.1", 0), backlog=64) for _ in range(2)]
    try:
        yield ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in listeners)
    finally:
        for listener in listeners:
            listener.close()
