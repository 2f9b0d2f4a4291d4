"""One long-lived ProduceStream per broker, on grpc.aio: requests matched to answers by
correlation id. The stream carries messages serialized by hand (produce_message.py), so it is
opened without a request serializer (`raw_produce_stream`).

A stream round trip costs about half of a unary call here (DESIGN §12), which is what a caller
waiting on each record feels. Everything runs on the producer driver's event loop: `send()`
queues the request without awaiting (so requests reach the wire in the order the driver sent
them, which is what keeps one partition's batches in order), gRPC consumes the queue as the
request iterator, and a reader task matches each answer to its request's callback. The broker
may answer out of order (acks=all waits run concurrently); the correlation id says which
request an answer is for.

A stream that breaks (the broker restarted, the network failed) fails every request still
waiting on it with the gRPC error, and the driver opens a new one for the next request;
`expire()` breaks the stream once a request is past its request timeout, failing what waits on
it, as Kafka drops a connection past request.timeout.ms; a request whose deadline came sooner, its
batches' delivery deadline (given to `send`), fails alone: the stream and its other requests go
on. A stream the broker ended at its SASL ticket's expiry (refusals.session_expired, KIP-368)
broke for a passing reason too: its requests are retried on a new stream, after a new login.
Before that comes, the driver `retire()`s a stream whose ticket is due for renewal once no
request waits on it, and the next send opens one that carries a fresh ticket.
At most `limits.produce_stream_in_flight_max` requests wait on one
stream (the broker's own bound): the driver asks `has_room()` before draining for its broker.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable

import grpc

from samsa.client.produce_message import EncodedRequest, produce_stream_message
from samsa.client.producer_batch import ProducerBatch
from samsa.client.producer_ids import RETRIABLE_STATUSES
from samsa.client.refusals import session_expired
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)

PRODUCE_STREAM_METHOD = "/samsa.v1.BrokerService/ProduceStream"

# A stream that failed leaves its requests' outcomes unknown, so they are retried (with
# idempotence the broker drops what it already has). INTERNAL too: "Internal error from Core" is
# what grpc.aio reports for requests on a stream whose connection died mid-write (seen when a
# leader is killed), not an answer from the broker, whose own failures it logs and names.
STREAM_RETRIABLE_STATUSES = RETRIABLE_STATUSES | {grpc.StatusCode.INTERNAL}

# One request's batches, by (topic, partition), oldest first.
ByPartition = dict[tuple[str, int], list[ProducerBatch]]

# (response, None) on an answer; (None, error) when the stream broke or the request timed out.
Callback = Callable[[broker_pb2.ProduceResponse | None, grpc.RpcError | None], None]

# Opens the call: given the outgoing serialized messages, the stream of answers.
OpenCall = Callable[[AsyncIterator[bytes]], grpc.aio.StreamStreamCall]


def raw_produce_stream(channel: grpc.aio.Channel) -> OpenCall:
    """ProduceStream with requests already serialized (bytes pass through gRPC as they are)."""
    return channel.stream_stream(
        PRODUCE_STREAM_METHOD,
        request_serializer=None,
        response_deserializer=broker_pb2.ProduceStreamResponse.FromString,
    )


class StreamBroken(grpc.RpcError):
    """The stream ended or timed out with requests still waiting; a retry may succeed."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def stream_error_outcome(error: grpc.RpcError) -> tuple[ErrorCode, bool]:
    """The error code and retriability for every batch of a request whose stream failed."""
    code = (
        ErrorCode.REQUEST_TIMED_OUT
        if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        else ErrorCode.NETWORK_EXCEPTION
    )
    return code, error.code() in STREAM_RETRIABLE_STATUSES


class ProduceStream:
    """Must be created and used on one running event loop."""

    def __init__(self, open_call: OpenCall, generation: int = 0) -> None:
        # Bounded by has_room(): at most one queued item per waiting request, plus the sentinel.
        self._requests: asyncio.Queue[bytes | None] = asyncio.Queue(
            maxsize=limits.produce_stream_in_flight_max + 1
        )
        # correlation id -> (callback, time.monotonic() deadline, what that deadline is,
        # whether missing it breaks the stream)
        self._pending: dict[int, tuple[Callback, float, str, bool]] = {}
        self._ids = itertools.count()
        self.broken = False
        self.generation = generation  # the SASL login's, as it opened (channels.py)
        self._call = open_call(self._outgoing())
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _outgoing(self) -> AsyncIterator[bytes]:
        while (item := await self._requests.get()) is not None:
            yield item

    def has_room(self) -> bool:
        """False while the stream already has the most requests a broker takes at once."""
        return not self.broken and len(self._pending) < limits.produce_stream_in_flight_max

    def send(
        self,
        request: EncodedRequest,
        callback: Callback,
        timeout_s: float,
        traceparent: str = "",
        deadline_reason: str = "",
        breaks: bool = True,
    ) -> bool:
        """Queue `request`, to be answered within `timeout_s` (`deadline_reason` names that
        limit); False (nothing sent) when the stream is broken: open another. `traceparent`: a
        sampled record's, so that the broker's spans join its trace. `breaks` False: missing
        the deadline fails this request alone (a delivery deadline, which says nothing about
        the broker); True, the stream breaks, as a connection past request.timeout.ms does."""
        if self.broken:
            return False
        assert len(self._pending) < limits.produce_stream_in_flight_max, "send without room"
        correlation_id = next(self._ids)
        reason = deadline_reason or f"no answer within {timeout_s * 1000:.0f} ms"
        self._pending[correlation_id] = (callback, time.monotonic() + timeout_s, reason, breaks)
        self._requests.put_nowait(produce_stream_message(correlation_id, request, traceparent))
        return True

    async def _read(self) -> None:
        error: grpc.RpcError
        try:
            async for answer in self._call:
                entry = self._pending.pop(answer.correlation_id, None)
                if entry is not None:
                    entry[0](answer.response, None)
            error = StreamBroken(grpc.StatusCode.UNAVAILABLE, "the broker ended the stream")
        except grpc.RpcError as rpc_error:
            error = rpc_error
            if session_expired(rpc_error):  # not refused: retried on a new stream, a new login
                error = StreamBroken(grpc.StatusCode.UNAVAILABLE, rpc_error.details() or "")
        except asyncio.CancelledError:
            error = StreamBroken(grpc.StatusCode.CANCELLED, "the stream was closed")
        except Exception as failure:  # an answer's handling failed: a bug, but the requests
            # still waiting must not wait for their deadline on a stream no one reads any more
            log.exception("produce stream: handling an answer failed")
            self._call.cancel()
            error = StreamBroken(grpc.StatusCode.INTERNAL, f"handling an answer failed: {failure}")
        self._break(error)

    def _break(self, error: grpc.RpcError) -> None:
        if self.broken:
            return
        self.broken = True
        waiting = list(self._pending.values())
        self._pending.clear()
        self._requests.put_nowait(None)
        for callback, _, _, _ in waiting:
            callback(None, error)

    def retire(self) -> bool:
        """End the stream if no request waits on it (for one with a fresh SASL ticket, opened
        by the next send); False, nothing done, while one does."""
        if self._pending or self.broken:
            return False
        self._call.cancel()
        self._break(StreamBroken(grpc.StatusCode.CANCELLED, "reopened with a new SASL ticket"))
        return True

    def expire(self) -> None:
        """Fail the requests past their deadline without an answer: break the stream if one
        of them `breaks` it, else fail them alone (a late answer is then ignored)."""
        now = time.monotonic()
        expired = [cid for cid, entry in self._pending.items() if now >= entry[1]]
        if any(self._pending[cid][3] for cid in expired):
            reason = next(self._pending[cid][2] for cid in expired if self._pending[cid][3])
            self._call.cancel()
            self._break(StreamBroken(grpc.StatusCode.DEADLINE_EXCEEDED, reason))
            return
        for cid in expired:
            callback, _, reason, _ = self._pending.pop(cid)
            callback(None, StreamBroken(grpc.StatusCode.DEADLINE_EXCEEDED, reason))

    async def close(self) -> None:
        """End the stream; requests still waiting fail with CANCELLED."""
        self._call.cancel()
        self._break(StreamBroken(grpc.StatusCode.CANCELLED, "the producer was closed"))
        await asyncio.gather(self._reader, return_exceptions=True)
