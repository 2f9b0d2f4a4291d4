"""In-memory brokers for the producer driver's tests: no port, no process, no sleep.

`FakeCluster.install(monkeypatch)` replaces what the producer reaches the network with: the
metadata (`ClusterMetadata`, so partition counts, leaders and endpoints are the test's) and the
BrokerService stub the driver opens its ProduceStream and InitProducerId calls on (the latter
answered by the cluster: scripted answers first, then a new producer id at epoch 0). Each fake
broker decodes every batch it receives, appends it to its partition's log and answers with the
offsets, like a leader would; `received` keeps what reached it, in arrival order, and
`answer_hook` lets a test answer a partition with an error instead, `rewrite_answer` change a
whole answer (leave a partition out, add one), and `max_batch_bytes` refuse a batch larger than
that with MESSAGE_TOO_LARGE (a topic's max.message.bytes). `hosted_topic_ids` makes a broker
answer UNKNOWN_TOPIC_ID to a request naming another id for that topic (KIP-516), and
`topic_ids_received` keeps the (topic, id) of every request; `refused_topics` end the stream at a
request naming one with the authorizer's PERMISSION_DENIED and trailing metadata (`acl_refusal`),
counted in `refusals`; the cluster's `topic_ids` are what
the metadata shows, learnt again at each `mark_stale` (a refresh). Like a leader, a broker answers a
batch that repeats the last one it appended for that producer and partition (same producer id,
epoch and base sequence: a retry after a lost answer) with the first write's offset, and
appends nothing. `refuse_to_encode(monkeypatch)` makes the producer's batch encoder refuse any
batch holding `POISON` (standing in for any record the codec cannot encode).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace

import grpc
import pytest

from samsa.client import async_producer, produce_sender, producer, producer_batch, producer_driver
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.common.errors import ErrorCode
from samsa.common.record import codec
from samsa.v1 import broker_pb2

TopicPartition = tuple[str, int]
# (topic, partition, decoded batch) -> a PartitionResponse to answer instead, or None to append.
AnswerHook = Callable[
    [str, int, codec.RecordBatch], broker_pb2.ProduceResponse.PartitionResponse | None
]
# The answer the broker built -> the answer it sends.
RewriteAnswer = Callable[[broker_pb2.ProduceResponse], broker_pb2.ProduceResponse]


@dataclass
class FakeBroker:
    broker_id: int
    logs: dict[TopicPartition, list[bytes | None]] = field(default_factory=dict)
    # Every batch that reached this broker, in arrival order.
    received: list[tuple[str, int, codec.RecordBatch]] = field(default_factory=list)
    answer_hook: AnswerHook | None = None
    requests: int = 0
    # Answers are held until this many requests of a stream have arrived, then sent together
    # (so that several requests are in flight at once).
    answer_in_groups_of: int = 1
    rewrite_answer: RewriteAnswer | None = None
    max_batch_bytes: int | None = None
    refused_topics: set[str] = field(default_factory=set)
    refusals: int = 0
    # (topic, partition) -> (producer id, epoch, base sequence, base offset) of the last batch
    # appended with a sequence.
    last_sequenced: dict[TopicPartition, tuple[int, int, int, int]] = field(default_factory=dict)
    # topic -> the id this broker hosts it under; a request naming another is refused.
    hosted_topic_ids: dict[str, bytes] = field(default_factory=dict)
    topic_ids_received: list[tuple[str, bytes]] = field(default_factory=list)

    def produce(self, request: broker_pb2.ProduceRequest) -> broker_pb2.ProduceResponse:
        self.requests += 1
        topics = []
        for topic in request.topics:
            self.topic_ids_received.append((topic.name, topic.topic_id))
            hosted = self.hosted_topic_ids.get(topic.name, topic.topic_id)
            if topic.topic_id and topic.topic_id != hosted:
                results = [
                    broker_pb2.ProduceResponse.PartitionResponse(
                        partition=data.partition, error_code=ErrorCode.UNKNOWN_TOPIC_ID
                    )
                    for data in topic.partitions
                ]
            else:
                results = [self._partition(topic.name, data) for data in topic.partitions]
            topics.append(
                broker_pb2.ProduceResponse.TopicResponse(name=topic.name, partitions=results)
            )
        answer = broker_pb2.ProduceResponse(topics=topics)
        return answer if self.rewrite_answer is None else self.rewrite_answer(answer)

    def _partition(
        self, topic: str, data: broker_pb2.ProduceRequest.PartitionData
    ) -> broker_pb2.ProduceResponse.PartitionResponse:
        batches = codec.decode_batches(data.records)
        answer_class = broker_pb2.ProduceResponse.PartitionResponse
        for batch in batches:
            self.received.append((topic, data.partition, batch))
            if self.answer_hook is not None:
                answer = self.answer_hook(topic, data.partition, batch)
                if answer is not None:
                    answer.partition = data.partition
                    return answer
            size = batch.header.size_bytes
            if self.max_batch_bytes is not None and size > self.max_batch_bytes:
                return answer_class(
                    partition=data.partition,
                    error_code=ErrorCode.MESSAGE_TOO_LARGE,
                    error_message=f"batch of {size} bytes > max.message.bytes",
                )
        topic_partition = (topic, data.partition)
        first = batches[0].header
        last = self.last_sequenced.get(topic_partition)
        identity = (first.producer_id, first.producer_epoch, first.base_sequence)
        if len(batches) == 1 and last is not None and last[:3] == identity:
            return answer_class(partition=data.partition, base_offset=last[3])  # a duplicate
        log = self.logs.setdefault(topic_partition, [])
        base_offset = len(log)
        for batch in batches:
            if batch.header.base_sequence >= 0:
                header = batch.header
                self.last_sequenced[topic_partition] = (
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    len(log),
                )
            log.extend(batch.values)
        return answer_class(
            partition=data.partition, error_code=ErrorCode.NONE, base_offset=base_offset
        )


class _FakeCall:
    """A ProduceStream call: answers each request as it is read, in order."""

    def __init__(self, broker: FakeBroker, requests: AsyncIterator) -> None:
        self._broker = broker
        self._answers: asyncio.Queue[
            broker_pb2.ProduceStreamResponse | grpc.aio.AioRpcError | None
        ] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._serve(requests))

    async def _serve(self, requests: AsyncIterator) -> None:
        held: list[broker_pb2.ProduceStreamResponse] = []
        async for message in requests:  # serialized by hand (produce_message.py)
            item = broker_pb2.ProduceStreamRequest.FromString(message)
            names = [t.name for t in item.request.topics if t.name in self._broker.refused_topics]
            if names:  # the authorizer ends the stream, as authorization.py does
                self._broker.refusals += 1
                self._answers.put_nowait(acl_refusal("29", f"topic:{names[0]}"))
                return
            response = self._broker.produce(item.request)
            held.append(
                broker_pb2.ProduceStreamResponse(
                    correlation_id=item.correlation_id, response=response
                )
            )
            if len(held) >= self._broker.answer_in_groups_of:
                for answer in held:
                    self._answers.put_nowait(answer)
                held.clear()
        self._answers.put_nowait(None)

    def __aiter__(self) -> _FakeCall:
        return self

    async def __anext__(self) -> broker_pb2.ProduceStreamResponse:
        answer = await self._answers.get()
        if answer is None:
            raise StopAsyncIteration
        if isinstance(answer, grpc.aio.AioRpcError):
            raise answer
        return answer

    def cancel(self) -> None:
        self._task.cancel()
        self._answers.put_nowait(None)


class FakeMetadata:
    """ClusterMetadata's surface, with the cluster's answers fixed by the test."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.leaders = dict(cluster.leaders)
        self.leader_epochs: dict[TopicPartition, int] = {tp: 0 for tp in cluster.leaders}
        self.partition_counts = cluster.partition_counts
        self.endpoints = {broker_id: f"fake:{broker_id}" for broker_id in cluster.brokers}
        self.topic_ids = dict(cluster.topic_ids)
        self.stale_marks = 0
        self._view_lock = threading.Lock()  # what update_leader, borrowed below, takes
        self._view_version = 0
        self.used: dict[str, int] = {}  # topic -> when the driver last said it used it
        self._cluster = cluster

    def needs_refresh(self) -> bool:
        return False

    def stop_waiting(self) -> None:
        pass

    def refresh(self, topics: object = (), timeout_s: float = 0) -> None:
        return None

    def mark_stale(self) -> None:
        self.stale_marks += 1
        self.topic_ids = dict(self._cluster.topic_ids)  # what the refresh would learn

    def use(self, topics: Iterable[str], now_ms: int) -> None:
        self.used.update(dict.fromkeys(topics, now_ms))

    def keep(self, topics: object) -> None:
        pass

    update_leader = ClusterMetadata.update_leader

    def partition_count(self, topic: str, timeout_s: float) -> int:
        return self.partition_counts[topic]


class FakeCluster:
    def __init__(self, topic: str = "events", partitions: int = 3, brokers: int = 1) -> None:
        self.brokers = {broker_id: FakeBroker(broker_id) for broker_id in range(1, brokers + 1)}
        self.partition_counts = {topic: partitions}
        self.leaders = {(topic, p): 1 + p % brokers for p in range(partitions)}
        self.topic_ids: dict[str, bytes] = {}  # what the metadata shows (none: not sent)
        self.metadata: FakeMetadata | None = None
        # InitProducerId: these answers first, in order; then a new producer id at epoch 0.
        self.init_producer_id_answers: list[broker_pb2.InitProducerIdResponse] = []
        self.init_producer_id_calls = 0

    def init_producer_id(self) -> broker_pb2.InitProducerIdResponse:
        self.init_producer_id_calls += 1
        if self.init_producer_id_answers:
            return self.init_producer_id_answers.pop(0)
        return broker_pb2.InitProducerIdResponse(
            producer_id=100 + self.init_producer_id_calls, producer_epoch=0
        )

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        cluster = self

        def make_metadata(*_: object) -> FakeMetadata:
            cluster.metadata = FakeMetadata(cluster)
            return cluster.metadata

        class FakeStub:
            def __init__(self, channel: object) -> None:
                self._broker = cluster.broker_of(channel)

            async def InitProducerId(
                self, request: broker_pb2.InitProducerIdRequest, timeout: float
            ) -> broker_pb2.InitProducerIdResponse:
                return cluster.init_producer_id()

        monkeypatch.setattr(producer, "ClusterMetadata", make_metadata)
        monkeypatch.setattr(async_producer, "ClusterMetadata", make_metadata)
        monkeypatch.setattr(
            producer_driver, "broker_pb2_grpc", SimpleNamespace(BrokerServiceStub=FakeStub)
        )
        monkeypatch.setattr(producer_driver.AioChannels, "get", lambda _, endpoint, **__: endpoint)
        monkeypatch.setattr(
            produce_sender,
            "raw_produce_stream",
            lambda endpoint: lambda requests, **_: _FakeCall(cluster.broker_of(endpoint), requests),
        )

    def broker_of(self, endpoint: object) -> FakeBroker:
        assert isinstance(endpoint, str) and endpoint.startswith("fake:")
        return self.brokers[int(endpoint.removeprefix("fake:"))]

    def log(self, topic: str, partition: int) -> list[bytes | None]:
        return [v for b in self.brokers.values() for v in b.logs.get((topic, partition), [])]


def acl_refusal(code: str, resource: str) -> grpc.aio.AioRpcError:
    """What the authorizer answers: PERMISSION_DENIED with the code and resource as trailing
    metadata (services/runtime/authorization.py)."""
    trailing = grpc.aio.Metadata(("samsa-error-code", code), ("samsa-resource", resource))
    return grpc.aio.AioRpcError(
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.aio.Metadata(),
        trailing,
        f"User:bob may not WRITE {resource}",
    )


POISON = b"cannot be encoded"


def refuse_to_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer's batch encoder raises for any batch holding POISON (see the module doc)."""

    def refusing_build_batch(values: list[bytes | None], **kwargs: object) -> bytes:
        if POISON in values:
            raise ValueError("the codec refused this batch")
        return codec.build_batch(values, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(producer_batch, "codec", SimpleNamespace(build_batch=refusing_build_batch))
