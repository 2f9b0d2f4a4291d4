"""Goal: a record sent to a partition the producer's metadata does not know yet (just added with
create_partitions) waits, up to max.block.ms, for the metadata to show it, as Kafka's producer
does (waitOnMetadata), instead of being refused until the next periodic refresh (up to
metadata.max.age.ms, 5 minutes); a partition that does not come is refused once max.block.ms
has passed.

Method: both facades against the in-memory brokers (fake_produce_cluster.py); the producer's
metadata knows two partitions until it is refreshed, and the cluster has three.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, KafkaError, Producer
from samsa.common.errors import ErrorCode

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
SETTINGS = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0, "max.block.ms": 5_000}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=1)
    fake.install(monkeypatch)
    return fake


def forget_the_new_partition(cluster: FakeCluster) -> list[object]:
    """The producer's metadata predates partition 2; a refresh brings it. Returns the refreshes."""
    metadata = cluster.metadata
    assert metadata is not None
    metadata.partition_counts = {TOPIC: 2}
    refreshes: list[object] = []

    def refresh(topics: object = (), timeout_s: float = 0) -> None:
        refreshes.append(topics)
        metadata.partition_counts = {TOPIC: 3}

    metadata.refresh = refresh  # type: ignore[method-assign]
    return refreshes


def test_send_to_a_partition_just_added_waits_for_the_metadata(cluster: FakeCluster) -> None:
    with Producer(SETTINGS) as producer:
        refreshes = forget_the_new_partition(cluster)
        assert producer.send(TOPIC, b"new", partition=2).result(WAIT_S).offset == 0
        assert refreshes
        written = producer.send_many(TOPIC, [b"a", b"b"], partitions=[2, 1])
        producer.flush(WAIT_S)
        assert written.result(timeout=0) == 2
    assert cluster.log(TOPIC, 2) == [b"new", b"a"]


def test_async_send_to_a_partition_just_added_waits_for_the_metadata(cluster: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncProducer(SETTINGS) as producer:
            forget_the_new_partition(cluster)
            assert (await producer.send_and_wait(TOPIC, b"new", partition=2)).offset == 0

    asyncio.run(scenario())
    assert cluster.log(TOPIC, 2) == [b"new"]


def test_a_partition_that_never_comes_is_refused_after_max_block_ms(cluster: FakeCluster) -> None:
    with Producer({**SETTINGS, "max.block.ms": 300}) as producer:
        forget_the_new_partition(cluster)
        started = time.monotonic()
        with pytest.raises(KafkaError, match="partition 7 of 'events' does not exist") as refused:
            producer.send(TOPIC, b"x", partition=7)
        assert refused.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert 0.2 <= time.monotonic() - started < WAIT_S
        with pytest.raises(KafkaError, match="does not exist"):
            producer.send(TOPIC, b"x", partition=-1)  # never waited for
