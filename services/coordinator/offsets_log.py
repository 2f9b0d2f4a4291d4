"""The coordinator's gRPC link to the brokers: produce to, read from, and list offsets of topics,
write transaction markers, describe a partition's producers, and take producer ids.

Theory of operation. Every call goes to the partition's leader as this process's metadata image
names it (`ownership.leader_endpoint`); no leader (or an unreachable one) answers a retriable
error, and the caller retries once its image moves. Writes and WriteTxnMarkers carry the
cluster's membership proof signed as this coordinator: brokers refuse writes to internal topics
(and markers) without one, so a client cannot forge group or transaction state. Writes go over
one ProduceStream per broker, and markers over one WriteTxnMarkersStream per broker, each of
which proves membership once as it opens (internal_produce_stream.py,
internal_markers_stream.py): a message on one costs about two thirds of a new unary call, and
every group commit and transaction step waits on one. Calls never raise for gRPC failures: they
answer an ErrorCode, so callers handle "no leader", "leader moved" and "broker down" in one
place. The channels follow TLS rotations (service_channels.ChannelCache): after one, the next
call dials the broker again with the new files and the streams open again on the new channels.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.request_stream import RequestStream, StreamBrokenError
from samsa.metadata.image import MetadataImage
from samsa.services.coordinator.internal_markers_stream import InternalMarkersStream
from samsa.services.coordinator.internal_produce_stream import InternalProduceStream
from samsa.services.coordinator.ownership import leader_endpoint
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.membership import method_path
from samsa.services.runtime.service_channels import ChannelCache
from samsa.v1 import broker_pb2, broker_pb2_grpc

Stream = TypeVar("Stream", bound=RequestStream)  # type: ignore[type-arg]

BROKER_SERVICE = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name
CALL_TIMEOUT_S = 10.0
PRODUCE_TIMEOUT_MS = 5_000  # acks=all wait on the broker; the call's deadline is longer
FETCH_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ProduceResult:
    error_code: int
    error_message: str
    base_offset: int = -1


@dataclass(frozen=True)
class FetchResult:
    error_code: int
    error_message: str
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True)
class OffsetResult:
    error_code: int
    offset: int = -1


@dataclass(frozen=True)
class ProducersResult:
    error_code: int
    error_message: str
    producers: tuple[broker_pb2.DescribeProducersResponse.ProducerState, ...] = ()


def _unavailable(what: str) -> tuple[int, str]:
    return ErrorCode.LEADER_NOT_AVAILABLE, f"{what} has no live leader in this coordinator's image"


class OffsetsLog:
    """Stubs to the brokers, looked up by leader in the image `image()` returns."""

    def __init__(self, image: Callable[[], MetadataImage], signer: MemberSigner) -> None:
        self.image = image
        self.signer = signer
        self._channels = ChannelCache()
        # The streams' channels, with no interceptor; a rotation drops the streams on them.
        self._stream_channels = ChannelCache(traced=False, on_redial=self._drop_streams)
        self._streams: dict[str, InternalProduceStream] = {}
        self._markers_streams: dict[str, InternalMarkersStream] = {}
        self._next_broker = -1

    async def close(self) -> None:
        streams = [*self._streams.values(), *self._markers_streams.values()]
        await asyncio.gather(*(stream.close() for stream in streams))
        await asyncio.gather(self._channels.close(), self._stream_channels.close())

    def _drop_streams(self) -> None:
        """The stream channels were dialled again (a TLS rotation): the next request opens a
        new stream; the old ones finish what they carry, closed with their channel."""
        self._streams.clear()
        self._markers_streams.clear()

    def _stub(self, endpoint: str) -> broker_pb2_grpc.BrokerServiceStub:
        return self._channels.stub(endpoint, broker_pb2_grpc.BrokerServiceStub)

    def _proof(self, rpc: str) -> tuple[tuple[str, str], ...]:
        """A membership proof for one call to `rpc`: with ACLs on, a broker lets the cluster's
        own reads and producer ids through without an ACL (authorization.py)."""
        return self.signer.metadata(method_path(BROKER_SERVICE, rpc))

    def _produce_stream(self, endpoint: str) -> InternalProduceStream:
        """The open write stream to `endpoint`, or a new one."""
        return self._open(self._streams, endpoint, "ProduceStream", InternalProduceStream)

    def _markers_stream(self, endpoint: str) -> InternalMarkersStream:
        """The open markers stream to `endpoint`, or a new one."""
        return self._open(
            self._markers_streams, endpoint, "WriteTxnMarkersStream", InternalMarkersStream
        )

    def _open(
        self,
        streams: dict[str, Stream],
        endpoint: str,
        rpc: str,
        new: Callable[[broker_pb2_grpc.BrokerServiceStub, tuple[tuple[str, str], ...]], Stream],
    ) -> Stream:
        """`streams`' open stream to `endpoint`, or a new one, its membership proof signed for
        `rpc` (checked once, as the stream opens)."""
        stub = self._stream_channels.stub(endpoint, broker_pb2_grpc.BrokerServiceStub)
        stream = streams.get(endpoint)  # after the stub: a rotation drops the old streams
        if stream is None or stream.broken:
            proof = self.signer.metadata(method_path(BROKER_SERVICE, rpc))
            stream = streams[endpoint] = new(stub, proof)
        return stream

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        """Append one batch with acks=all to the partition's leader."""
        endpoint = leader_endpoint(self.image(), topic, partition)
        if endpoint is None:
            return ProduceResult(*_unavailable(f"{topic}-{partition}"))
        request = broker_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=PRODUCE_TIMEOUT_MS,
            topics=[
                broker_pb2.ProduceRequest.TopicData(
                    name=topic,
                    partitions=[
                        broker_pb2.ProduceRequest.PartitionData(partition=partition, records=batch)
                    ],
                )
            ],
        )
        try:
            response = await self._produce_stream(endpoint).produce(request, CALL_TIMEOUT_S)
        except StreamBrokenError as error:
            return ProduceResult(ErrorCode.NETWORK_EXCEPTION, f"{endpoint}: {error}")
        answer = response.topics[0].partitions[0]
        return ProduceResult(answer.error_code, answer.error_message, answer.base_offset)

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        """Read committed records (up to the high watermark) from `offset` at the leader."""
        endpoint = leader_endpoint(self.image(), topic, partition)
        if endpoint is None:
            return FetchResult(*_unavailable(f"{topic}-{partition}"))
        request = broker_pb2.FetchRequest(
            max_wait_ms=0,
            max_bytes=FETCH_MAX_BYTES,
            topics=[
                broker_pb2.FetchRequest.TopicData(
                    name=topic,
                    partitions=[
                        broker_pb2.FetchRequest.PartitionData(
                            partition=partition,
                            fetch_offset=offset,
                            partition_max_bytes=FETCH_MAX_BYTES,
                        )
                    ],
                )
            ],
        )
        try:
            response = await self._stub(endpoint).Fetch(
                request, timeout=CALL_TIMEOUT_S, metadata=self._proof("Fetch")
            )
        except grpc.aio.AioRpcError as error:
            return FetchResult(ErrorCode.NETWORK_EXCEPTION, f"{endpoint}: {error.details()}")
        if response.error_code:
            return FetchResult(response.error_code, response.error_message)
        answer = response.topics[0].partitions[0]
        return FetchResult(
            answer.error_code,
            answer.error_message,
            answer.records,
            answer.high_watermark,
            answer.log_start_offset,
        )

    async def list_offsets(
        self, partitions: Iterable[tuple[str, int]], spec: int
    ) -> dict[tuple[str, int], OffsetResult]:
        """One offset per partition (`spec`: an OffsetSpec), asking each leader once per
        `limits.request_partitions_max` partitions: a broker refuses a ListOffsets naming more
        whole (RESOURCE_EXHAUSTED), and a group may have committed offsets of more."""
        image = self.image()
        by_leader: dict[str, list[tuple[str, int]]] = defaultdict(list)
        results: dict[tuple[str, int], OffsetResult] = {}
        for topic, partition in partitions:
            endpoint = leader_endpoint(image, topic, partition)
            if endpoint is None:
                results[(topic, partition)] = OffsetResult(ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                by_leader[endpoint].append((topic, partition))
        step = limits.request_partitions_max
        answers = await asyncio.gather(
            *(
                self._list_at(endpoint, wanted[start : start + step], spec)
                for endpoint, wanted in by_leader.items()
                for start in range(0, len(wanted), step)
            )
        )
        for answer in answers:
            results.update(answer)
        return results

    async def _list_at(
        self, endpoint: str, wanted: list[tuple[str, int]], spec: int
    ) -> dict[tuple[str, int], OffsetResult]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in wanted:
            by_topic[topic].append(partition)
        request = broker_pb2.ListOffsetsRequest(
            topics=[
                broker_pb2.ListOffsetsRequest.TopicData(
                    name=topic,
                    partitions=[
                        broker_pb2.ListOffsetsRequest.PartitionData(partition=p, offset_spec=spec)
                        for p in numbers
                    ],
                )
                for topic, numbers in by_topic.items()
            ]
        )
        try:
            response = await self._stub(endpoint).ListOffsets(
                request, timeout=CALL_TIMEOUT_S, metadata=self._proof("ListOffsets")
            )
        except grpc.aio.AioRpcError:
            return {key: OffsetResult(ErrorCode.NETWORK_EXCEPTION) for key in wanted}
        results = {key: OffsetResult(ErrorCode.UNKNOWN_SERVER_ERROR) for key in wanted}
        for topic in response.topics:
            for answer in topic.partitions:
                results[(topic.name, answer.partition)] = OffsetResult(
                    answer.error_code, answer.offset
                )
        return results

    async def write_txn_markers(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], tuple[int, str]]:
        """Write one transaction's COMMIT (or ABORT) marker to each partition, asking each
        leader once; (error code, message) per partition. A partition whose topic is not in the
        image answers UNKNOWN_TOPIC_OR_PARTITION, one without a live leader
        LEADER_NOT_AVAILABLE."""
        image = self.image()
        by_leader: dict[str, list[tuple[str, int]]] = defaultdict(list)
        results: dict[tuple[str, int], tuple[int, str]] = {}
        for topic, partition in partitions:
            topic_image = image.topics.get(topic)
            if topic_image is None or partition not in topic_image.partitions:
                results[(topic, partition)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"{topic}-{partition} is not in this coordinator's image (deleted?)",
                )
                continue
            endpoint = leader_endpoint(image, topic, partition)
            if endpoint is None:
                results[(topic, partition)] = _unavailable(f"{topic}-{partition}")
            else:
                by_leader[endpoint].append((topic, partition))
        marker = broker_pb2.WriteTxnMarkersRequest.TransactionMarker(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=committed,
            coordinator_epoch=coordinator_epoch,
        )
        answers = await asyncio.gather(
            *(self._markers_at(endpoint, marker, wanted) for endpoint, wanted in by_leader.items())
        )
        for answer in answers:
            results.update(answer)
        return results

    async def _markers_at(
        self,
        endpoint: str,
        marker: broker_pb2.WriteTxnMarkersRequest.TransactionMarker,
        wanted: list[tuple[str, int]],
    ) -> dict[tuple[str, int], tuple[int, str]]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in wanted:
            by_topic[topic].append(partition)
        request = broker_pb2.WriteTxnMarkersRequest(timeout_ms=PRODUCE_TIMEOUT_MS)
        one = request.markers.add()
        one.CopyFrom(marker)
        for topic, numbers in by_topic.items():
            one.topics.add(name=topic, partitions=numbers)
        try:
            response = await self._markers_stream(endpoint).send(request, CALL_TIMEOUT_S)
        except StreamBrokenError as error:
            failed = (ErrorCode.NETWORK_EXCEPTION, f"{endpoint}: {error}")
            return dict.fromkeys(wanted, failed)
        results = dict.fromkeys(
            wanted, (ErrorCode.UNKNOWN_SERVER_ERROR, f"{endpoint} did not answer the partition")
        )
        for answered in response.markers:
            for topic in answered.topics:
                for answer in topic.partitions:
                    results[(topic.name, answer.partition)] = (
                        answer.error_code,
                        answer.error_message,
                    )
        return results

    async def describe_producers(self, topic: str, partition: int) -> ProducersResult:
        """The producers the partition's leader remembers (DescribeProducers)."""
        endpoint = leader_endpoint(self.image(), topic, partition)
        if endpoint is None:
            return ProducersResult(*_unavailable(f"{topic}-{partition}"))
        request = broker_pb2.DescribeProducersRequest(
            topics=[
                broker_pb2.DescribeProducersRequest.TopicRequest(name=topic, partitions=[partition])
            ]
        )
        try:
            response = await self._stub(endpoint).DescribeProducers(
                request, timeout=CALL_TIMEOUT_S, metadata=self._proof("DescribeProducers")
            )
        except grpc.aio.AioRpcError as error:
            return ProducersResult(ErrorCode.NETWORK_EXCEPTION, f"{endpoint}: {error.details()}")
        answer = response.topics[0].partitions[0]
        return ProducersResult(
            answer.error_code, answer.error_message, tuple(answer.active_producers)
        )

    async def init_producer_id(self) -> tuple[int, str, int]:
        """A fresh producer id from a live broker's block (InitProducerId without a
        transactional id): (error code, message, producer id). The transaction coordinator
        takes its producer ids this way rather than holding blocks of its own."""
        brokers = self.image().live_brokers()
        if not brokers:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "no live broker to take a producer id", -1
        self._next_broker = (self._next_broker + 1) % len(brokers)
        endpoint = brokers[self._next_broker].member_endpoint
        try:
            response = await self._stub(endpoint).InitProducerId(
                broker_pb2.InitProducerIdRequest(),
                timeout=CALL_TIMEOUT_S,
                metadata=self._proof("InitProducerId"),
            )
        except grpc.aio.AioRpcError as error:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{endpoint}: {error.details()}", -1
        return response.error_code, response.error_message, response.producer_id
