"""FetchStream, the broker's side: a consumer's fetches over one long-lived stream.

Theory of operation. What a consumer waits for between a record's append and its poll() is a
fetch round trip, and a unary Fetch pays for a new call each time (HTTP/2 stream, headers, the
server's handler dispatch): about twice a message on an open stream (DESIGN §12). So the SDK
keeps one stream open to each broker it fetches from and sends its fetches on it one at a time,
the next once the previous one is answered, exactly as with unary calls. Each request is
answered by `fetch.fetch` as Fetch would answer it: fetch sessions (KIP-227), the long-poll, the
per-partition errors are the same code. Nothing is queued: the handler reads one request,
answers it, then reads the next.

Followers have their own stream (replica_stream.py), which proves membership: a fetch with a
replica_id moves the high watermark. This one is open to every client, so a request carrying a
replica_id ends it with a status saying so, before anything is read.

Memory. Each answer holds its bytes of the broker's answer budget (answer_budget.py) until the
`yield` returns, which is once gRPC has written it: a client that stops reading its answers
keeps at most one answer's bytes, the write does not complete, and its other fetches wait in line.
Nothing else refers to the answer while it is written (the records beside it are dropped).
An answer not written within the gate's write deadline ends the stream (answer_write_deadline.py):
gRPC then drops it, and the client's next read raises CANCELLED.

Limits. Every request passes the checks Fetch applies (partitions per request, no negative
sizes, offsets or session fields; gRPC bounds the message size); the long-poll is bounded by
limits.fetch_wait_ms_max; a stream that sends no request for `REQUEST_WAIT_S` is ended, so an
abandoned stream does not hold the broker's resources. `requests_in_turn` is that rule for both
streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

import grpc

from samsa.common import limits
from samsa.metadata.acls import Operation
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.answer_gate import AnswerGate
from samsa.services.broker.requests.fetch import fetch_answer
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.broker.requests.fetch_wire import stream_message
from samsa.services.broker.requests.quota_throttle import Identity, QuotaThrottle, delay
from samsa.services.broker.requests.request_checks import Refusal, fetch_refusal
from samsa.services.runtime.caller import topic_refusals
from samsa.services.runtime.request_iterators import close_requests
from samsa.v1 import broker_pb2

# A fetcher sends its next fetch as soon as it handled the previous answer, and every answer
# comes within its max_wait_ms (at most limits.fetch_wait_ms_max): a stream silent for twice
# that is abandoned or stuck, and is ended rather than kept. A consumer whose application stops
# polling stops fetching too; its next fetch opens a new stream.
REQUEST_WAIT_S = 2 * limits.fetch_wait_ms_max / 1000


Item = TypeVar("Item")


async def requests_in_turn(
    requests: AsyncIterator[Item], context: grpc.aio.ServicerContext, rpc: str
) -> AsyncIterator[Item]:
    """The stream's requests as they come, until the fetcher closes its side; a stream silent
    for REQUEST_WAIT_S ends with UNAVAILABLE."""
    loop = asyncio.get_running_loop()
    try:
        # One timeout for the whole stream, armed only while it waits for a request (never
        # across the yield, where the request is answered): cheaper than one per request.
        async with asyncio.timeout(None) as silence:
            while True:
                silence.reschedule(loop.time() + REQUEST_WAIT_S)
                item = await anext(requests, None)
                silence.reschedule(None)
                if item is None:
                    return
                yield item
    except TimeoutError:
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            f"no fetch on this {rpc} for {REQUEST_WAIT_S:.0f} s: open a new one",
        )


def consumer_refusal(item: broker_pb2.FetchStreamRequest) -> Refusal | None:
    """Why the stream must end at `item`, if it must: it carries consumers' fetches. Pure."""
    if not item.HasField("request"):
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            "a FetchStream request must carry a FetchRequest in `request`",
        )
    request = item.request
    if request.HasField("replica_id") and request.replica_id >= 0:
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            f"FetchStream is for consumers: leave replica_id unset (it is "
            f"{request.replica_id}); followers use ReplicaFetchStream",
        )
    return fetch_refusal(request)


async def serve_fetch_stream(
    host: PartitionHost,
    sessions: FetchSessionCache,
    requests: AsyncIterator[broker_pb2.FetchStreamRequest],
    context: grpc.aio.ServicerContext,
    gate: AnswerGate | None = None,
    quotas: QuotaThrottle | None = None,
) -> AsyncIterator[bytes]:
    """Answer each request of one stream in turn, as Fetch would (see the module doc); each
    answer is a serialized FetchStreamResponse (fetch_wire.py). A client over its
    consumer_byte_rate gets its answer late by its throttle time (`quotas`), which delays its
    next fetch too: the stream has one in flight. Its identity is read once, when a quota
    first counts."""
    deadline = gate.write_deadline if gate is not None else None
    identity: Identity | None = None  # read at the first request a quota counts
    try:
        async for item in requests_in_turn(requests, context, "FetchStream"):
            refusal = consumer_refusal(item)
            if refusal is not None:
                await context.abort(*refusal)
            # Each fetch decides its topics anew (the ACLs may change during a stream).
            refused = topic_refusals(Operation.READ)
            answer = await fetch_answer(host, item.request, sessions, gate, refused)
            held_bytes = answer.held_bytes
            timer = None
            try:
                if quotas is not None and quotas.active():  # throttled: waits holding its bytes
                    identity = identity or quotas.identity(context)  # once per stream
                    await delay(quotas.fetched(identity, answer))
                message = stream_message(answer)
                del answer  # its records: only the message is held while it is written
                if deadline is not None:
                    timer = deadline.arm("FetchStream", held_bytes, context)
                yield message
            finally:  # written, or the stream ended (cancelled, closed) with it unwritten
                if timer is not None:
                    timer.cancel()
                if gate is not None:
                    gate.release(held_bytes)
    finally:
        if deadline is not None:  # the write deadline's end of the call needs it closed
            await close_requests(requests)
