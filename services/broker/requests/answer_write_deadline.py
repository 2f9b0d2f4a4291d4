"""A deadline on gRPC's write of a consumer's fetch answer (Fetch and FetchStream alike).

Why. An answer holds its bytes of the broker's answer budget (answer_budget.py) until gRPC has
written it, and under HTTP/2 flow control a client that sends fetches and never reads the answers
keeps that write from ever completing: a stranger could fill the budget and leave every consumer
of the broker with empty answers for as long as it liked. So an answer not written within the
deadline (limits.fetch_answer_write_ms_max, or the broker key fetch.answer.write.timeout.ms) ends
its RPC: gRPC drops the message and the answer's bytes go back to the budget. One rate-limited
line (rate_limited_log.py) says so.

How, and why so. grpc.aio has no server-side cancel. Measured with grpcio 1.85 (a grpc.aio
server, 8 MiB answers, a client that writes requests and never reads, asyncio and uvloop):
- cancelling the handler's task ends the handler, but not the call: the message stays queued in
  gRPC's core (the RSS does not move), and the client never gets a status;
- `context.abort()` from a timer queues the status behind the unwritten message: the same;
- the core cancels a call (RST_STREAM; the client reads CANCELLED) when the last reference to its
  server-side state goes. Two tasks hold it: the handler's (grpc's `_handle_exceptions`), and the
  task that started it and then awaits the call's close. The deadline cancels both. The second is
  learnt from a task factory on the broker's loop (`install`), which notes the creator of every
  gRPC handler task. A stream's request iterator also holds the state, in a reference cycle,
  until the handler closes it (services/runtime/request_iterators.py).
With that, 10 unread answers of 8 MiB (+160 MiB of RSS) were freed at their deadline but the
last one or two accepted, whose state gRPC's accept loop keeps until it accepts its next call
(the next fetch of any consumer). The connection stays open and serves the client's other calls.
gRPC's accept loop also keeps, for the server's life, the first call it accepts through its
generic handlers and the first of its last registered method (locals of `_server_main_loop`):
at worst two answers per listener, whose budget is released while gRPC still holds them.
If gRPC's structure changes so that the second task is not found, `arm` arms nothing and logs
why: else every ended call's budget would be released while gRPC still held its bytes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Coroutine, Generator
from typing import Any

import grpc

from samsa.common import limits
from samsa.services.runtime.rate_limited_log import LogRateLimiter

_LOGGER = logging.getLogger(__name__)

# The coroutine grpc.aio runs each RPC's handler in (a task of its own, created by the task that
# then awaits the call's close): grpc/_cython/_cygrpc/aio/server.pyx.pxi, `_schedule_rpc_coro`.
GRPC_HANDLER_COROUTINE = "_handle_exceptions"

TaskFactory = Any  # asyncio's own annotation is private


class AnswerWriteDeadline:
    """Ends an RPC whose fetch answer gRPC has not written within `timeout_ms`."""

    def __init__(self, timeout_ms: int = limits.fetch_answer_write_ms_max) -> None:
        assert 0 < timeout_ms <= limits.fetch_answer_write_ms_max, timeout_ms
        self.timeout_ms = timeout_ms
        # A gRPC handler task -> the task that awaits its call's close (both hold the call).
        self._closers: weakref.WeakKeyDictionary[asyncio.Task[Any], weakref.ref[Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._log_limiter = LogRateLimiter(
            limits.rpc_failure_log_lines_max, limits.rpc_failure_log_window_ms
        )
        self.ended_count = 0  # RPCs ended by the deadline, for tests and metrics

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Note, on `loop`, which task creates each gRPC handler task (before the server
        starts: a call accepted earlier cannot be ended)."""
        previous: TaskFactory = loop.get_task_factory()
        closers = self._closers

        def task_factory(
            loop: asyncio.AbstractEventLoop,
            coro: Generator[Any, None, Any] | Coroutine[Any, Any, Any],
            **kwargs: Any,
        ) -> asyncio.Future[Any]:
            if previous is None:
                task = asyncio.Task(coro, loop=loop, **kwargs)
            else:
                task = previous(loop, coro, **kwargs)
            if getattr(coro, "__name__", None) == GRPC_HANDLER_COROUTINE:
                closer = asyncio.current_task(loop)
                if closer is not None:
                    closers[task] = weakref.ref(closer)
            return task

        loop.set_task_factory(task_factory)

    def arm(
        self, rpc: str, held_bytes: int, context: grpc.aio.ServicerContext
    ) -> asyncio.TimerHandle | None:
        """From the handler, as its answer is handed to gRPC: a timer that ends the RPC unless
        cancelled once the answer is written. None when the RPC cannot be ended (see above)."""
        task = asyncio.current_task()
        closer = self._closers.get(task) if task is not None else None
        closer_task = closer() if closer is not None else None
        if task is None or closer_task is None:
            self._log("no write deadline for a %s answer: gRPC's handler task is unknown", rpc)
            return None
        return asyncio.get_running_loop().call_later(
            self.timeout_ms / 1000,
            self._end,
            rpc,
            held_bytes,
            context,
            task,
            closer_task,
        )

    def _end(
        self,
        rpc: str,
        held_bytes: int,
        context: grpc.aio.ServicerContext,
        task: asyncio.Task[Any],
        closer: asyncio.Task[Any],
    ) -> None:
        self.ended_count += 1
        self._log(
            "ended a %s from %s: its answer (%d bytes) was not read within %d ms",
            rpc,
            context.peer(),
            held_bytes,
            self.timeout_ms,
        )
        task.cancel()  # the handler: its answer's bytes go back to the budget
        closer.cancel()  # the last holder of the call: gRPC's core then cancels it

    def _log(self, message: str, *args: object) -> None:
        admission = self._log_limiter.admit(int(time.monotonic() * 1000))
        if admission.suppressed_before:
            _LOGGER.warning(
                "suppressed %d more lines about fetch answer write deadlines",
                admission.suppressed_before,
            )
        if admission.write:
            _LOGGER.warning(message, *args)
