"""The asyncio event loop every Samsa process runs on, and the SDK's loop threads: uvloop when it is
installed (a dependency on Linux and macOS), else the standard library's.

Why. Every request a service answers crosses the event loop several times: gRPC's completion
arrives through the loop, the handler's tasks and queues hand it on, and the answer leaves through
it again. On the 2-core machine the project is measured on, uvloop cut the broker's CPU per
synchronous produce by ~14 % and the produce→consume latency by ~17 % against the standard loop
(docs/benchmarks.md, "The event loop"), with no change to Samsa's code. gRPC's asyncio stack
supports uvloop.

What differs, and why it does not matter here: uvloop's clock (`loop.time()`) and timers have
millisecond resolution. Samsa uses `loop.time()` only for timeouts and deadlines of tens of
milliseconds or more, and measures durations with `time.monotonic()` / `time.perf_counter()`.

`SAMSA_EVENT_LOOP=asyncio` forces the standard loop (to compare, or to rule uvloop out when
debugging); `uvloop` requires it. The benchmark runs its peers' clients and the bare gRPC
ping-pong on the same loop, so that the comparison stays like for like.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENVIRONMENT_VARIABLE = "SAMSA_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


class EventLoopChoiceError(RuntimeError):
    """SAMSA_EVENT_LOOP names no loop this process can run."""


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def chosen(environ: dict[str, str] | os._Environ[str] | None = None) -> str:
    """ "uvloop" or "asyncio": what `new_event_loop` makes under `environ` (default: this
    process's environment)."""
    value = (os.environ if environ is None else environ).get(ENVIRONMENT_VARIABLE, "").strip()
    if value and value not in CHOICES:
        raise EventLoopChoiceError(
            f"{ENVIRONMENT_VARIABLE}={value!r}: use one of {', '.join(CHOICES)} (or leave it "
            "unset: uvloop when installed)"
        )
    available = _uvloop_factory() is not None
    if value == "uvloop" and not available:
        raise EventLoopChoiceError(
            f"{ENVIRONMENT_VARIABLE}=uvloop, but uvloop is not installed: pip install uvloop, "
            f"or unset {ENVIRONMENT_VARIABLE}"
        )
    if value == "asyncio" or not available:
        return "asyncio"
    return "uvloop"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the chosen kind (see `chosen`)."""
    factory = _uvloop_factory() if chosen() == "uvloop" else None
    return factory() if factory is not None else asyncio.new_event_loop()


def new_thread_loop(name: str) -> asyncio.AbstractEventLoop:
    """A new loop for a background thread of the SDK (the sync Producer's and Consumer's): its
    `asyncio.to_thread` calls run on daemon threads (`DaemonThreadExecutor`)."""
    loop = new_event_loop()
    loop.set_default_executor(DaemonThreadExecutor(name))
    return loop


class DaemonThreadExecutor(concurrent.futures.ThreadPoolExecutor):
    """A daemon thread per call, which the interpreter does not wait for at exit.

    Why. The default executor's threads are joined at interpreter exit (concurrent.futures'
    exit hook), and refuse work from then on. A sync client that the application did not close
    (a script that ends without close(), as Kafka's clients allow: their network threads are
    daemons) held the exit for as long as a metadata read to an unreachable cluster retried
    (5 s), while its loop, refused the next read, logged a traceback every turn (0.1 s). The
    calls are rare (metadata refreshes), so a thread each costs nothing that matters.
    `shutdown(wait=True)` (the client's close(), through loop.shutdown_default_executor) still
    waits for the calls under way."""

    def __init__(self, name: str) -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)  # its pool is never used
        self._name = name
        self._guard = threading.Lock()
        self._running: set[threading.Thread] = set()
        self._closed = False

    def submit(  # type: ignore[override]
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args, **kwargs)
                    except BaseException as error:
                        future.set_exception(error)
                    else:
                        future.set_result(result)
            finally:
                with self._guard:
                    self._running.discard(thread)

        thread = threading.Thread(target=run, name=f"{self._name}-call", daemon=True)
        with self._guard:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._running.add(thread)
        thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._guard:
            self._closed = True
            running = list(self._running)
        if wait:
            for thread in running:
                thread.join()
        super().shutdown(wait=False)


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on a loop of the chosen kind."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
