"""One long-lived gRPC stream to a server whose requests are answered by correlation id: the
shape of a coordinator's internal writes and transaction markers to the brokers
(services/coordinator/internal_produce_stream.py, internal_markers_stream.py), of a broker's
checks at the transaction coordinators (services/runtime/txn_added_check.py), and of a
transactional producer's calls to its coordinators (the SDK's transaction_client.py).

Theory of operation. A new unary call costs about twice a message on an open stream (DESIGN
§12), and these calls sit on a client's critical path, so the caller keeps one stream of each
kind open to each peer it calls.

- A stream that must prove membership does so once, as it opens: the caller opens the call with
  its proof in the metadata, signed for that RPC, and the peer checks it then.
- Requests are matched to answers by correlation id (the server may answer out of order). At most
  `in_flight_max` wait on one stream, the server's bound; a caller beyond that waits for room.
- A request with no answer within its timeout breaks the stream, as a unary deadline would end
  the call: every request waiting on it fails with `StreamBrokenError`, and the next one opens a
  new stream. The outcome of a failed request is unknown; every kind is safe to send again (a
  write resends its batch with the same sequence, a marker at the same epoch is a retry, a check
  changes nothing, an add is idempotent, and a transaction's end is answered again from its
  state). The error carries the status the stream ended with, if any: a server that does not
  serve the RPC (UNIMPLEMENTED) read none of the requests.

A subclass names its RPC and its request message, and may build each message and read each
answer its own way (the produce stream adds the caller's trace context; the transaction stream
puts each kind of request in a field of its own).
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
    """The stream ended, or a request on it timed out: the request's outcome is unknown. `code`
    is the status the server ended the stream with (None: no status, e.g. a timeout);
    `rpc_error` the failure itself, whose trailing metadata may say more (an ACL refusal's)."""

    def __init__(
        self,
        why: str,
        code: grpc.StatusCode | None = None,
        rpc_error: grpc.RpcError | None = None,
    ) -> None:
        super().__init__(why)
        self.code = code
        self.rpc_error = rpc_error


class RequestStream(Generic[Request, Response]):
    """One stream to one server; create and use it on one running event loop. `message_type` is
    the stream's request message: `correlation_id` and `request` fields, answered by a message
    with `correlation_id` and `response` (or a subclass overrides `_message` and `_answer`)."""

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
        self._broken_why = ""
        self._broken_code: grpc.StatusCode | None = None
        self._broken_error: grpc.RpcError | None = None
        self._call = open_call(self._outgoing())
        self._reader = asyncio.get_running_loop().create_task(self._read())

    def _message(self, correlation_id: int, request: Request) -> Any:
        """The stream message for `request` (a subclass may add fields)."""
        return self._message_type(correlation_id=correlation_id, request=request)

    def _answer(self, item: Any) -> Response:
        """The answer a stream message carries (a subclass may read it its own way)."""
        return item.response  # type: ignore[no-any-return]

    # --- the stream -------------------------------------------------------------------------

    async def _outgoing(self) -> AsyncIterator[Any]:
        while (item := await self._requests.get()) is not None:
            yield item

    async def send(self, request: Request, timeout_s: float) -> Response:
        """Send `request` and wait for its answer; StreamBrokenError when the stream broke or
        no answer came within `timeout_s` (the stream is then broken too)."""
        async with self._room:
            if self.broken:
                raise StreamBrokenError(
                    f"the stream is closed ({self._broken_why})",
                    self._broken_code,
                    self._broken_error,
                )
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
        code = None
        failure = None
        try:
            async for item in self._call:
                waiter = self._pending.pop(item.correlation_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(self._answer(item))
            why = "the server ended the stream"
        except grpc.aio.AioRpcError as error:
            code, failure = error.code(), error
            why = f"{code.name}: {error.details()}"
        except asyncio.CancelledError:
            why = "the stream was closed"
        self._break(why, code, failure)

    def _break(
        self, why: str, code: grpc.StatusCode | None = None, failure: grpc.RpcError | None = None
    ) -> None:
        if self.broken:
            return
        self.broken = True
        self._broken_why = why
        self._broken_code = code
        self._broken_error = failure
        self._call.cancel()
        with contextlib.suppress(asyncio.QueueFull):  # gRPC stopped reading it: nothing waits
            self._requests.put_nowait(None)
        waiting = list(self._pending.values())
        self._pending.clear()
        for waiter in waiting:
            if not waiter.done():
                waiter.set_exception(StreamBrokenError(why, code, failure))

    async def close(self) -> None:
        self._break("the stream was closed")
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
