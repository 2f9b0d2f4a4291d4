"""Goal: consumers fetch over FetchStream (services/broker/requests/fetch_stream.py) with the rules
of the unary Fetch it replaces, and the SDK's link to it (common/fetch_link.py, used by the consumer
driver) uses the stream, survives a stream the broker ended, and falls back to unary Fetch on a
broker without it.

Method: the protocol against a real broker over loopback gRPC (tests/integration/
cluster_helpers.py, every process stopped by PID): a consumer's fetch session and long-poll on
one stream, and each malformed or foreign request ending the stream with a status saying what to
fix. The link runs against in-process gRPC servers standing in for brokers of other versions (one
serving Fetch only, one ending every stream after one answer), which count what they were sent.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster

from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.client.client_identity import consumer_fetch_link
from samsa.common.record.codec import decode_batches
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(180)

TOPIC = "streamed-reads"


class Stream:
    """One FetchStream from a test: `ask` sends a request and returns its answer."""

    def __init__(self, endpoint: str) -> None:
        self.channel = grpc.insecure_channel(endpoint)
        self.requests: queue.Queue[broker_pb2.FetchStreamRequest | None] = queue.Queue()

        def requests():  # type: ignore[no-untyped-def]
            while (item := self.requests.get()) is not None:
                yield item

        stub = broker_pb2_grpc.BrokerServiceStub(self.channel)
        self.answers = stub.FetchStream(requests(), timeout=60)

    def ask(self, request: broker_pb2.FetchRequest | None) -> broker_pb2.FetchResponse:
        item = broker_pb2.FetchStreamRequest()
        if request is not None:
            item.request.CopyFrom(request)
        self.requests.put(item)
        return next(self.answers).response

    def close(self) -> None:
        self.answers.cancel()
        self.requests.put(None)
        self.channel.close()


def fetch(offset: int, **fields) -> broker_pb2.FetchRequest:  # type: ignore[no-untyped-def]
    return broker_pb2.FetchRequest(
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name=TOPIC,
                partitions=[
                    broker_pb2.FetchRequest.PartitionData(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        **{"max_wait_ms": 0, "max_bytes": 1 << 20, **fields},
    )


def record_count(answer: broker_pb2.FetchResponse) -> int:
    result = answer.topics[0].partitions[0]
    assert result.error_code == 0, result.error_message
    return sum(len(batch.values) for batch in decode_batches(result.records))


def test_a_consumer_reads_on_one_stream_with_its_session_and_long_poll(tmp_path: Path) -> None:
    with local_cluster(tmp_path, 1, 1) as cluster:
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
        with Admin(config) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        with Producer({**config, "linger.ms": "0"}) as producer:
            for i in range(10):
                producer.send(TOPIC, b"%d" % i, partition=0).result(timeout=30)
        endpoint = cluster.spec.brokers[0].endpoint
        stream = Stream(endpoint)
        try:
            opened = stream.ask(fetch(0, session_id=0, session_epoch=0))
            assert opened.error_code == 0 and opened.session_id > 0
            assert record_count(opened) == 10
            assert opened.topics[0].partitions[0].high_watermark == 10

            # The next request on the stream parks (long-poll) until a record arrives.
            later: list[broker_pb2.FetchResponse] = []
            waiting = threading.Thread(
                target=lambda: later.append(
                    stream.ask(
                        fetch(
                            10,
                            session_id=opened.session_id,
                            session_epoch=1,
                            max_wait_ms=20_000,
                        )
                    )
                )
            )
            waiting.start()
            with Producer({**config, "linger.ms": "0"}) as producer:
                producer.send(TOPIC, b"late", partition=0).result(timeout=30)
            waiting.join(timeout=30)
            assert later, "the parked fetch was not answered after the append"
            assert later[0].session_id == opened.session_id
            assert record_count(later[0]) == 1
        finally:
            stream.close()

        refusals = [
            (fetch(0, replica_id=0), "followers use ReplicaFetchStream"),
            (None, "must carry a FetchRequest"),
            (fetch(0, max_wait_ms=-1), "must not be negative"),
        ]
        for request, phrase in refusals:
            refused = Stream(endpoint)
            try:
                with pytest.raises(grpc.RpcError) as ended:
                    refused.ask(request)
                assert ended.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert phrase in (ended.value.details() or ""), ended.value.details()
            finally:
                refused.close()

        # The SDK's consumer reads everything over its stream.
        with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([(TOPIC, 0)])
            values: list[bytes] = []
            while len(values) < 11:
                records = consumer.poll(timeout=30)
                assert records, f"nothing after {len(values)}"
                values += [record.value for record in records]
        assert values == [b"%d" % i for i in range(10)] + [b"late"]


class _FetchOnly(broker_pb2_grpc.BrokerServiceServicer):
    """A broker from before FetchStream: Fetch only (the rest UNIMPLEMENTED)."""

    def __init__(self) -> None:
        self.unary = 0
        self.streams = 0
        self.streamed = 0

    async def Fetch(self, request, context):  # type: ignore[no-untyped-def]
        self.unary += 1
        return broker_pb2.FetchResponse(session_id=7)


class _OneAnswerStreams(_FetchOnly):
    """A broker that ends every FetchStream after one answer, as one does with an idle stream."""

    async def FetchStream(self, request_iterator, context):  # type: ignore[no-untyped-def]
        self.streams += 1
        async for _ in request_iterator:
            self.streamed += 1
            yield broker_pb2.FetchStreamResponse(response=broker_pb2.FetchResponse(session_id=8))
            return


def run_link(servicer: _FetchOnly, fetches: int) -> list[int]:
    """Send `fetches` fetches through a consumer's link to a server running `servicer`; the
    session ids answered."""

    async def run() -> list[int]:
        server = grpc.aio.server()
        broker_pb2_grpc.add_BrokerServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        link = consumer_fetch_link()
        answers = []
        try:
            for _ in range(fetches):
                answers.append((await link.fetch(channel, fetch(0), 10)).session_id)
                await asyncio.sleep(0.2)  # the stream's end reaches the client
        finally:
            link.close()
            await channel.close()
            await server.stop(None)
        return answers

    return asyncio.run(run())


def test_the_link_falls_back_to_unary_fetch_on_a_broker_without_the_stream() -> None:
    servicer = _FetchOnly()
    assert run_link(servicer, 3) == [7, 7, 7]
    assert servicer.unary == 3


def test_the_link_opens_a_new_stream_when_the_broker_ended_the_last_one() -> None:
    servicer = _OneAnswerStreams()
    assert run_link(servicer, 3) == [8, 8, 8]  # no fetch failed, none went unary
    assert (servicer.streams, servicer.streamed, servicer.unary) == (3, 3, 0)
