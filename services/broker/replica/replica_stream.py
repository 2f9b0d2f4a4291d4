"""ReplicaFetchStream, the leader's side: a follower's fetches over one long-lived stream.

Theory of operation. An acks=all write completes when every follower in the ISR has fetched it and
then reported its new log end offset with its next fetch (replication.py): two fetch round trips per
follower per write. As unary Fetch calls, each of those pays for a new call (HTTP/2 stream, headers,
a membership proof signed and checked, the server's handler dispatch), which costs about twice a
message on an open stream. A follower therefore keeps one stream open to each leader it follows
(services/broker/replica/replica_fetcher.py) and sends its fetches on it, one at a time: the next
request goes once the previous one is answered, exactly as with unary calls, so each request is
answered by `fetch.fetch` as Fetch would answer it — fetch sessions (KIP-227), the long-poll, the
diverging-epoch check (KIP-320), follower progress, the high watermark and the ISR candidates are
all the same code. Nothing is queued: this handler reads one request, answers it, then reads the
next.

Membership. A fetch with a replica_id moves the high watermark, so the stream must come from the
broker it names. The stream's call metadata carries a membership proof signed for this method
(member_auth.py); it is checked against the first request's replica_id, and every later request
must carry the same replica_id: a stream proves membership once, as a unary Fetch does per call.
A request without a replica_id, or with another one, ends the stream with a status saying why.

Limits. Every request passes the checks Fetch applies (partitions per request, no negative
sizes, offsets or session fields; gRPC bounds the message size); the long-poll is bounded by
limits.fetch_wait_ms_max; a stream that sends no request for fetch_stream.REQUEST_WAIT_S is
ended, so an abandoned stream does not hold the broker's resources.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch_answer
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.broker.requests.fetch_stream import requests_in_turn
from samsa.services.broker.requests.fetch_wire import stream_message
from samsa.services.broker.requests.request_checks import Refusal, fetch_refusal
from samsa.services.runtime import member_auth
from samsa.services.runtime.membership import method_path
from samsa.v1 import broker_pb2

STREAM_METHOD = method_path(
    broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name, "ReplicaFetchStream"
)


def replica_refusal(
    item: broker_pb2.ReplicaFetchStreamRequest, member_id: int | None
) -> Refusal | None:
    """Why the stream must end at `item`, if it must: it is for followers, each request naming
    the broker the stream proved to be (`member_id`; None before the first request). Pure."""
    if not item.HasField("request"):
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            "a ReplicaFetchStream request must carry a FetchRequest in `request`",
        )
    request = item.request
    if not request.HasField("replica_id") or request.replica_id < 0:
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            "ReplicaFetchStream is for followers: set replica_id to your broker id "
            "(consumers use Fetch)",
        )
    if member_id is not None and request.replica_id != member_id:
        return (
            grpc.StatusCode.PERMISSION_DENIED,
            f"this stream proved membership as broker {member_id}; a request with "
            f"replica_id={request.replica_id} needs its own stream",
        )
    return fetch_refusal(request)


async def serve_replica_fetch_stream(
    host: PartitionHost,
    sessions: FetchSessionCache,
    member_key: bytes,
    requests: AsyncIterator[broker_pb2.ReplicaFetchStreamRequest],
    context: grpc.aio.ServicerContext,
) -> AsyncIterator[bytes]:
    """Answer each request of one stream in turn, as Fetch would (see the module doc); each
    answer is a serialized ReplicaFetchStreamResponse (fetch_wire.py)."""
    member_id: int | None = None
    async for item in requests_in_turn(requests, context, "ReplicaFetchStream"):
        refusal = replica_refusal(item, member_id)
        if refusal is not None:
            await context.abort(*refusal)
        if member_id is None:
            await member_auth.require_member(
                context,
                member_key,
                STREAM_METHOD,
                item.request.replica_id,
                f"ReplicaFetchStream with replica_id={item.request.replica_id}",
            )
            member_id = item.request.replica_id
        yield stream_message(await fetch_answer(host, item.request, sessions))
