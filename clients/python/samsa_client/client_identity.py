"""Who a client is to the brokers: its client.id, sent as gRPC metadata, so that brokers can hold
it to its client quotas (KIP-13; services/broker/quotas.py, README "Quotas").

A producer or consumer without a client.id of its own takes Kafka's default: "producer-N", or
"consumer-<group.id>-N" ("consumer-N" without a group), N counting the clients of this process
from 1, so that each is told apart in a broker's byte counts and quotas can name it. The id
travels as the `samsa-client-id` metadata (metadata/client_quotas.CLIENT_ID_METADATA_KEY) of
each stream as it opens (ProduceStream, FetchStream) and of each unary Fetch (a consumer's
session-closing ones and the Spark source's range reads, partition_range.py, included): one
header per stream, nothing per message. A consumer computes its id once (consumer_driver.py) and
its group heartbeats carry the same one, so DescribeGroups shows the id its quotas count under.
The configuration refuses an id over limits.client_id_length_max.
"""

from __future__ import annotations

import itertools

import grpc

from samsa.common.fetch_link import FetchLink, StreamAge
from samsa.metadata.client_quotas import CLIENT_ID_METADATA_KEY
from samsa.v1 import broker_pb2, broker_pb2_grpc

# Kafka's sequences of default client ids, one per kind of client in this process (next() on
# itertools.count is atomic under the GIL: clients made on several threads get distinct ids).
_PRODUCER_SEQUENCE = itertools.count(1)
_CONSUMER_SEQUENCE = itertools.count(1)

Metadata = tuple[tuple[str, str], ...]


def producer_client_id(configured: str) -> str:
    """The producer's client.id: as configured, else Kafka's default "producer-N"."""
    return configured or f"producer-{next(_PRODUCER_SEQUENCE)}"


def consumer_client_id(configured: str, group_id: str | None) -> str:
    """The consumer's client.id: as configured, else Kafka's default "consumer-<group>-N"."""
    if configured:
        return configured
    group = f"{group_id}-" if group_id else ""
    return f"consumer-{group}{next(_CONSUMER_SEQUENCE)}"


def client_metadata(client_id: str) -> Metadata:
    """The call metadata that names the client to a broker."""
    return ((CLIENT_ID_METADATA_KEY, client_id),)


def consumer_fetch_link(client_id: str = "", age: StreamAge | None = None) -> FetchLink:
    """A broker's fetches on one FetchStream, or unary Fetch calls if it has none (common/
    fetch_link.py), each naming the consumer by `client_id` (none when empty); `age`: the
    channels, whose SASL login says when to reopen the stream for a fresh ticket."""
    metadata = client_metadata(client_id) if client_id else None

    async def unary(
        channel: grpc.aio.Channel, request: broker_pb2.FetchRequest, timeout_s: float
    ) -> broker_pb2.FetchResponse:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        return await stub.Fetch(request, timeout=timeout_s, metadata=metadata)

    return FetchLink(
        open_stream=lambda channel: broker_pb2_grpc.BrokerServiceStub(channel).FetchStream(
            metadata=metadata
        ),
        wrap=lambda request: broker_pb2.FetchStreamRequest(request=request),
        unary=unary,
        rpc="FetchStream",
        age=age,
    )
