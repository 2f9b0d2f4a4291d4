"""Goal: every fetch a Python client sends names it to the broker by the id client quotas count it
under: the Spark source's range reads (PartitionRangeReader), the consumer's session-closing
fetches at close(), and the consumer's group heartbeats carry the same effective id as its
fetches (Kafka's default "consumer-<group>-N" when no client.id is set), computed once.

Method: a real gRPC server on loopback, in this process, whose Fetch records the
`samsa-client-id` metadata of each call; the reader and the consumer driver are pointed at it
directly (no cluster). The group's id is read from the member settings its heartbeats are built
from (group_member.py).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.partition_range import PartitionRangeReader
from samsa.common.errors import ErrorCode
from samsa.metadata.client_quotas import CLIENT_ID_METADATA_KEY
from samsa.v1 import broker_pb2, broker_pb2_grpc


class RecordingBroker(broker_pb2_grpc.BrokerServiceServicer):
    """Answers every Fetch with an empty partition 0 of the first topic, noting the client id."""

    def __init__(self) -> None:
        self.client_ids: list[str | None] = []

    def Fetch(self, request: broker_pb2.FetchRequest, context: grpc.ServicerContext) -> object:
        metadata = dict(context.invocation_metadata())
        self.client_ids.append(metadata.get(CLIENT_ID_METADATA_KEY))
        name = request.topics[0].name if request.topics else ""
        return broker_pb2.FetchResponse(
            topics=[
                broker_pb2.FetchResponse.TopicResponse(
                    name=name,
                    partitions=[
                        broker_pb2.FetchResponse.PartitionResponse(
                            partition=0, error_code=ErrorCode.NONE
                        )
                    ],
                )
            ]
        )


@pytest.fixture
def broker() -> Iterator[tuple[RecordingBroker, str]]:
    servicer = RecordingBroker()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    broker_pb2_grpc.add_BrokerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def range_fetch_ids(endpoint: str, recorder: RecordingBroker, **config: str) -> list[str | None]:
    with PartitionRangeReader({"bootstrap.servers": endpoint, **config}) as reader:
        reader._leader = lambda topic, partition: endpoint  # type: ignore[method-assign]
        answer, why = reader._fetch_once("t", 0, 0, 0)
        assert answer is not None, why
    return recorder.client_ids


def test_the_spark_range_reader_sends_the_configured_client_id(broker) -> None:
    recorder, endpoint = broker
    assert range_fetch_ids(endpoint, recorder, **{"client.id": "nightly-etl"}) == ["nightly-etl"]


def test_the_spark_range_reader_without_one_sends_kafkas_default(broker) -> None:
    recorder, endpoint = broker
    [sent] = range_fetch_ids(endpoint, recorder)
    assert sent is not None and re.fullmatch(r"consumer-\d+", sent)


class OneBrokerMetadata:
    bootstrap = ("127.0.0.1:1",)

    def __init__(self, endpoint: str) -> None:
        self.endpoints = {1: endpoint}

    def keep(self, topics: object) -> None:
        pass


@pytest.mark.parametrize("settings", [{"client.id": "reader"}, {"group.id": "orders"}, {}])
def test_the_consumer_closes_its_fetch_sessions_under_its_own_id(broker, settings) -> None:
    recorder, endpoint = broker
    config = ConsumerConfig.from_dict({"bootstrap.servers": "127.0.0.1:1", **settings})
    driver = ConsumerDriver(config, OneBrokerMetadata(endpoint), lambda: None)  # type: ignore[arg-type]
    close = broker_pb2.FetchRequest(session_id=7, session_epoch=-1)
    asyncio.run(driver._close_session(1, close))
    assert recorder.client_ids == [driver.client_id]
    expected = {"client.id": r"reader", "group.id": r"consumer-orders-\d+"}
    assert re.fullmatch(expected.get(next(iter(settings), ""), r"consumer-\d+"), driver.client_id)


async def fetch_on_link(driver: ConsumerDriver, endpoint: str) -> None:
    """One fetch on the link the driver makes for a broker (this one serves no FetchStream: the
    link falls back to unary Fetch, as with an older broker)."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        request = broker_pb2.FetchRequest(topics=[broker_pb2.FetchRequest.TopicData(name="t")])
        await driver._new_link().fetch(channel, request, 5.0)


@pytest.mark.parametrize("client_id", ["", "reader"])
def test_the_group_heartbeats_carry_the_id_the_fetches_send(broker, client_id: str) -> None:
    recorder, endpoint = broker
    given = {"bootstrap.servers": "127.0.0.1:1", "group.id": "orders", "client.id": client_id}
    config = ConsumerConfig.from_dict(given)
    driver = ConsumerDriver(config, OneBrokerMetadata(endpoint), lambda: None)  # type: ignore[arg-type]
    asyncio.run(fetch_on_link(driver, endpoint))
    assert driver.group is not None
    assert recorder.client_ids == [driver.group.member.settings.client_id]
    assert re.fullmatch(client_id or r"consumer-orders-\d+", driver.client_id)
