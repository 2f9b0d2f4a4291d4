"""One long-lived gRPC stream to a peer service whose requests are answered by correlation id:
the shape of a coordinator's internal writes and transaction markers to the brokers
(services/coordinator/internal_produce_stream.py, internal_markers_stream.py) and of a broker's
checks at the transaction coordinators (txn_added_check.py).

Theory of operation. A new unary call costs about twice a message on an open stream (DESIGN
§12), and these calls sit on a client's critical path, so the caller keeps one stream of each
kind open to each peer it calls.

- A stream that must prove membership does so once, as it opens: the caller opens the call with
  its proof in the metadata, signed for that RPC, and the peer checks it then.
- Requests are matched to answers by correlation id (the broker may answer out of order). At most
  `in_flight_max` wait on one stream, the broker's bound; a caller beyond that waits for room.
- A request with no answer within its timeout breaks the stream, as a unary deadline would end
  the call: every request waiting on it fails with `StreamBrokenError`, and the next one opens a
  new stream. The outcome of a failed request is unknown; every kind is safe to send again (a
  write resends its batch with the same sequence, a marker at the same epoch is a retry, a check
  changes nothing and an add is idempotent).

A subclass names its RPC and its request message, and may add fields to each message (the
produce stream adds the caller's trace context).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

import grpc

Request = TypeVar("Request")
Response = TypeVar("Response")


class StreamBrokenError(Exception):
    """The stream ended, or a request on it timed out: the request's outcome is unknown."""


class InternalStream(Generic[Request, Response]):
    """One stream to one peer; create and use it on one running event loop. `message_type` is
    the stream's request message: `correlation_id` and `request` fields, answered by a message
    with `correlation_id` and `response` (every Samsa request stream is shaped so)."""

    def __init__(
        self,
        open_call: Callable[[AsyncIterator[Any]], Any],
        in_flight_max: int,
        message_type: Callable[..., Any],
    ) -> None:
        self._message_type = message_type
        # Bounded by the semaphore: at most one queued item per waiting request, plus the end.
        self._requests: asyncio.Queue[Any] = asyncio.Queue(maxsize=in_flight_max + 1)
        self._room = asyncio.Semaphore(in_flight_max)
        self._pending: dict[int, asyncio.Future[Response]] = {}
        self._ids = itertools.count()
        self.broken = False
        self._call = open_call(self._outgoing())
        self._reader = asyncio.get_running_loop().create_task(self._read())

    def _message(self, correlation_id: int, request: Request) -> Any:
        """The stream message for `request` (a subclass may add fields)."""
        return self._message_type(correlation_id=correlation_id, request=request)

    # --- the stream -------------------------------------------------------------------------

    async def _outgoing(self) -> AsyncIterator[Any]:
        while (item := await self._requests.get()) is not None:
            yield item

    async def send(self, request: Request, timeout_s: float) -> Response:
        """Send `request` and wait for its answer; StreamBrokenError when the stream broke or
        no answer came within `timeout_s` (the stream is then broken too)."""
        async with self._room:
            if self.broken:
                raise StreamBrokenError("the stream to the broker is closed")
            correlation_id = next(self._ids)
            answer: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = answer
            self._requests.put_nowait(self._message(correlation_id, request))
            try:
                return await asyncio.wait_for(asyncio.shield(answer), timeout_s)
            except TimeoutError:
                self._break(f"no answer within {timeout_s:.3g} s")
                raise StreamBrokenError(f"no answer within {timeout_s:.3g} s") from None
            finally:
                self._pending.pop(correlation_id, None)

    async def _read(self) -> None:
        try:
            async for item in self._call:
                waiter = self._pending.pop(item.correlation_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(item.response)
            why = "the broker ended the stream"
        except grpc.aio.AioRpcError as error:
            why = f"{error.code().name}: {error.details()}"
        except asyncio.CancelledError:
            why = "the stream was closed"
        self._break(why)

    def _break(self, why: str) -> None:
        if self.broken:
            return
        self.broken = True
        self._call.cancel()
        with contextlib.suppress(asyncio.QueueFull):  # gRPC stopped reading it: nothing waits
            self._requests.put_nowait(None)
        waiting = list(self._pending.values())
        self._pending.clear()
        for waiter in waiting:
            if not waiter.done():
                waiter.set_exception(StreamBrokenError(why))

    async def close(self) -> None:
        self._break("the stream was closed")
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
