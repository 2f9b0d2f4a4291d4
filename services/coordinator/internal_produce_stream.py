"""The coordinator's writes to internal topics over one long-lived ProduceStream per broker.

Theory of operation. Every group commit and every step of a transaction (Ongoing, Prepare,
Complete) is one acks=all write to a partition of `__consumer_offsets` or `__transaction_state`,
and the client waits on it. A new unary call costs about twice a message on an open stream
(DESIGN §12; measured again for this: a one-record acks=all write p50 ~1.15–1.25 ms unary,
~0.75–0.87 ms on a stream), so the coordinator keeps one stream open to each broker it writes to.

- The stream proves membership once, as it opens: its call metadata carries this coordinator's
  proof signed for ProduceStream, which the broker checks before it lets the stream write
  internal topics (services/broker/servicer.py). A stream opened without one could not write them.
- Requests are matched to answers by correlation id (the broker may answer out of order). At most
  `limits.produce_stream_in_flight_max` wait on one stream, the broker's bound; a writer beyond
  that waits for room. Each owned partition has at most one batch in flight (record_writer.py),
  so this bound is only reached by a coordinator owning very many partitions on one broker.
- A request with no answer within its timeout breaks the stream, as a unary deadline would end
  the call: every request waiting on it fails with `StreamBrokenError`, and the next write opens a
  new stream. The outcome of a failed request is unknown, which is safe: the writer resends the
  same batch with the same sequence, and the broker answers a duplicate with its first offsets.
- Tracing: a write made while a sampled span is current carries that span's context in the
  request's `traceparent`, so the broker's produce span joins the caller's trace (the stream's
  channel has no interceptor, which would cost every message).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import grpc
from opentelemetry import trace

from samsa.common import limits
from samsa.common.traceparent import format_traceparent
from samsa.v1 import broker_pb2, broker_pb2_grpc


class StreamBrokenError(Exception):
    """The stream ended, or a request on it timed out: the request's outcome is unknown."""


class InternalProduceStream:
    """One ProduceStream to one broker; create and use it on one running event loop."""

    def __init__(
        self,
        stub: broker_pb2_grpc.BrokerServiceStub,
        proof: tuple[tuple[str, str], ...],
    ) -> None:
        # Bounded by the semaphore: at most one queued item per waiting request, plus the end.
        self._requests: asyncio.Queue[broker_pb2.ProduceStreamRequest | None] = asyncio.Queue(
            maxsize=limits.produce_stream_in_flight_max + 1
        )
        self._room = asyncio.Semaphore(limits.produce_stream_in_flight_max)
        self._pending: dict[int, asyncio.Future[broker_pb2.ProduceResponse]] = {}
        self._ids = itertools.count()
        self.broken = False
        self._call = stub.ProduceStream(self._outgoing(), metadata=proof)
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _outgoing(self) -> AsyncIterator[broker_pb2.ProduceStreamRequest]:
        while (item := await self._requests.get()) is not None:
            yield item

    async def produce(
        self, request: broker_pb2.ProduceRequest, timeout_s: float
    ) -> broker_pb2.ProduceResponse:
        """Send `request` and wait for its answer; StreamBrokenError when the stream broke or
        no answer came within `timeout_s` (the stream is then broken too)."""
        async with self._room:
            if self.broken:
                raise StreamBrokenError("the stream to the broker is closed")
            correlation_id = next(self._ids)
            answer: asyncio.Future[broker_pb2.ProduceResponse] = (
                asyncio.get_running_loop().create_future()
            )
            self._pending[correlation_id] = answer
            self._requests.put_nowait(
                broker_pb2.ProduceStreamRequest(
                    correlation_id=correlation_id,
                    request=request,
                    traceparent=_current_traceparent(),
                )
            )
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


def _current_traceparent() -> str:
    """The current span's W3C context when it is sampled, else "" (nothing to join)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return ""
    return format_traceparent(context)
