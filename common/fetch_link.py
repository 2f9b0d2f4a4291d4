"""A fetcher's link to one server: its fetches, one at a time, on a long-lived gRPC stream.

Followers (ReplicaFetchStream, services/broker/replica/replica_fetcher.py) and consumers
(FetchStream, the SDK's consumer driver) both send a broker one fetch at a time and wait for its
answer, and a message on an open stream costs about half a unary call (DESIGN §12). `FetchLink`
holds that stream. It is opened on first use and again after any failure: a fetch that got no answer
may or may not have been applied, so the caller starts its fetch session over either way, as after a
failed unary call. A server that answers UNIMPLEMENTED (a broker from before the stream, during a
rolling upgrade) gets unary Fetch calls from then on, until one of those fails (it may come back
upgraded). A fetch cancelled while it waits drops the stream, whose next message would be the
cancelled fetch's answer. A consumer's stream is reopened too, between two fetches, once its
SASL ticket is due for renewal (`age`: the SDK's channels, sasl_login.py), so that it carries a
fresh one before the broker ends it at the old one's expiry (KIP-368).

A server that ends a stream at once (UNIMPLEMENTED) often ends it while the client still writes
the first request; grpc then fails that write with its own INTERNAL status, and the server's
status is lost (measured: against a server without the stream, a second stream raced the same
way). So a request whose fresh stream failed its first write with INTERNAL goes as a unary Fetch
(nothing was read on the stream: the request is safe to send again); the next request tries a
stream again, since a server that serves streams may have ended that one for a passing reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import grpc

from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)

OpenStream = Callable[[grpc.aio.Channel], grpc.aio.StreamStreamCall]
UnaryFetch = Callable[
    [grpc.aio.Channel, broker_pb2.FetchRequest, float], Awaitable[broker_pb2.FetchResponse]
]


class StreamAge(Protocol):
    """Which SASL ticket a stream opened now carries, and whether one opened at that
    `generation` should be reopened for a fresh one (the SDK's AioChannels)."""

    def stream_generation(self) -> int: ...

    def stream_stale(self, generation: int) -> bool: ...


class FetchFailed(Exception):
    """A fetch that got no answer: the status the call or stream ended with. `first_write`: the
    write of a stream's first request failed (see the module doc)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        first_write: bool = False,
        trailing: tuple[tuple[str, str | bytes], ...] = (),
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.first_write = first_write
        self.trailing = trailing  # the status's trailing metadata (an ACL refusal's code)


class FetchLink:
    """Fetches to one server on one stream (see the module doc). `open_stream` opens the stream
    on a channel, `wrap` makes a request into the stream's message, `unary` is the fallback
    call (channel, request, timeout in s)."""

    def __init__(
        self,
        *,
        open_stream: OpenStream,
        wrap: Callable[[broker_pb2.FetchRequest], object],
        unary: UnaryFetch,
        rpc: str,
        age: StreamAge | None = None,
    ) -> None:
        self._open_stream = open_stream
        self._age = age
        self._generation = 0  # the stream's, as it opened
        self._wrap = wrap
        self._unary = unary
        self._rpc = rpc
        self.unary_only = False
        self._call: grpc.aio.StreamStreamCall | None = None
        self._channel: grpc.aio.Channel | None = None

    async def fetch(
        self, channel: grpc.aio.Channel, request: broker_pb2.FetchRequest, timeout_s: float
    ) -> broker_pb2.FetchResponse:
        """The server's answer to `request` within `timeout_s`; FetchFailed when none came."""
        if not self.unary_only:
            try:
                return await self._fetch_on_stream(channel, request, timeout_s)
            except FetchFailed as failed:
                if failed.first_write and failed.code == grpc.StatusCode.INTERNAL:
                    # The server's status was lost in a race (see the module doc).
                    return await self._unary_fetch(channel, request, timeout_s)
                if failed.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise
            # Refused before anything was read: the same request is safe to send again.
            log.info("the server serves no %s: fetching with unary Fetch calls", self._rpc)
            self.unary_only = True
        return await self._unary_fetch(channel, request, timeout_s)

    async def _unary_fetch(
        self, channel: grpc.aio.Channel, request: broker_pb2.FetchRequest, timeout_s: float
    ) -> broker_pb2.FetchResponse:
        try:
            return await self._unary(channel, request, timeout_s)
        except grpc.aio.AioRpcError as error:
            self.unary_only = False  # the server may have restarted upgraded: try the stream
            raise FetchFailed(
                error.code(), error.details() or "", trailing=_trailing(error)
            ) from None

    async def _fetch_on_stream(
        self, channel: grpc.aio.Channel, request: broker_pb2.FetchRequest, timeout_s: float
    ) -> broker_pb2.FetchResponse:
        opened = self._call is None or self._channel is not channel or self._call.done()
        if not opened and self._age is not None and self._age.stream_stale(self._generation):
            log.info("%s reopened for a fresh SASL ticket", self._rpc)
            opened = True
        if opened:
            # A stream the server ended while it sat idle (fetch_stream.REQUEST_WAIT_S, a
            # restart) read none of our requests: a fresh one carries this request as well.
            self.close()
            self._generation = 0 if self._age is None else self._age.stream_generation()
            self._call = self._open_stream(channel)
            self._channel = channel
        call = self._call
        written = False
        try:
            async with asyncio.timeout(timeout_s):  # a write blocks if the server stops reading
                await call.write(self._wrap(request))
                written = True
                answer = await call.read()
        except grpc.aio.AioRpcError as error:
            self.close()
            first_write = opened and not written
            raise FetchFailed(
                error.code(), error.details() or "", first_write, _trailing(error)
            ) from None
        except TimeoutError:
            self.close()
            raise FetchFailed(
                grpc.StatusCode.DEADLINE_EXCEEDED, f"no answer within {timeout_s:.0f} s"
            ) from None
        except asyncio.InvalidStateError:  # the server ended the stream before this write
            code, details = await call.code(), await call.details()
            trailing = tuple(await call.trailing_metadata() or ())
            self.close()
            raise FetchFailed(code, details, trailing=trailing) from None
        except BaseException:  # cancelled: the stream's next message would be this answer
            self.close()
            raise
        if answer is grpc.aio.EOF:  # the server ended the stream without an error
            self.close()
            raise FetchFailed(grpc.StatusCode.UNAVAILABLE, f"the server ended the {self._rpc}")
        return answer.response

    def close(self) -> None:
        """Drop the stream, if one is open (the server sees it cancelled)."""
        if self._call is not None:
            self._call.cancel()
        self._call = None
        self._channel = None


def _trailing(error: grpc.aio.AioRpcError) -> tuple[tuple[str, str | bytes], ...]:
    return tuple(error.trailing_metadata() or ())
