"""Goal: AsyncProducer and AsyncConsumer start once and are used on the loop that started them
(async_lifecycle.py). Started in one asyncio.run() and used in another, a send queued its record
in a producer whose driver was gone (awaiting it hung), and a poll returned [] for ever without
an error; a second start() left a driver task that nothing stopped.

Method: the producer against in-memory brokers (fake_produce_cluster.py); the consumer with a
cluster that is never reached (nothing is assigned). Every wait is bounded.
"""

from __future__ import annotations

import asyncio

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncConsumer, AsyncProducer, KafkaError

TOPIC = "events"
WAIT_S = 10
PRODUCER = {"bootstrap.servers": "fake:9092", "linger.ms": 0}  # never dialled
CONSUMER = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}  # never reached


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=1, brokers=1)
    fake.install(monkeypatch)
    return fake


def test_a_producer_used_after_its_loop_closed_raises(cluster: FakeCluster) -> None:
    producer = AsyncProducer(PRODUCER)
    asyncio.run(producer.start())

    async def send() -> None:
        async with asyncio.timeout(WAIT_S):
            await producer.send_and_wait(TOPIC, b"x", partition=0)

    with pytest.raises(KafkaError, match=r"another event loop \(now closed"):
        asyncio.run(send())
    with pytest.raises(KafkaError, match="another event loop"):
        asyncio.run(producer.stop(WAIT_S))
    assert cluster.log(TOPIC, 0) == []


def test_a_consumer_used_after_its_loop_closed_raises() -> None:
    consumer = AsyncConsumer(CONSUMER)
    asyncio.run(consumer.start())
    with pytest.raises(KafkaError, match=r"another event loop \(now closed"):
        asyncio.run(consumer.poll(WAIT_S))
    with pytest.raises(KafkaError, match="another event loop"):
        consumer.assignment()  # no loop running at all
    with pytest.raises(KafkaError, match="another event loop"):
        asyncio.run(consumer.stop(WAIT_S))


def test_a_producer_starts_once(cluster: FakeCluster) -> None:
    async def main() -> None:
        producer = AsyncProducer(PRODUCER)
        await producer.start()
        with pytest.raises(KafkaError, match="already started"):
            await producer.start()
        await producer.send_and_wait(TOPIC, b"x", partition=0)
        await producer.stop(WAIT_S)
        with pytest.raises(KafkaError, match="already started"):
            await producer.start()
        assert asyncio.all_tasks() == {asyncio.current_task()}  # no driver left running

    asyncio.run(main())
    assert cluster.log(TOPIC, 0) == [b"x"]


def test_a_consumer_starts_once() -> None:
    async def main() -> None:
        consumer = AsyncConsumer(CONSUMER)
        await consumer.start()
        with pytest.raises(KafkaError, match="already started"):
            await consumer.start()
        await consumer.stop(WAIT_S)
        with pytest.raises(KafkaError, match="already started"):
            await consumer.start()
        assert asyncio.all_tasks() == {asyncio.current_task()}  # no driver left running

    asyncio.run(main())
