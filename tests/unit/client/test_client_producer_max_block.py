"""Goal: max.block.ms bounds a whole send() call, as Kafka's producer does: the wait for an
unknown topic's metadata and the wait for buffer memory share one budget. Before, each wait had
the full max.block.ms, so a send() could block for twice as long.

Method: both facades against the in-memory brokers (fake_produce_cluster.py), which hold every
answer so buffer.memory stays full after one record. The facade's clock is a fake that a test
moves: the metadata lookup (the topic is unknown to the producer) takes 80 % of max.block.ms,
and every read of the clock moves it a tick, so that even a wait that never ends in real time
ends on the fake clock. The time the call took is read off that clock.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, ProduceError, Producer
from samsa.client import async_producer as async_producer_module
from samsa.client import producer as producer_module
from samsa.common.errors import ErrorCode

TOPIC = "events"
MAX_BLOCK_S = 0.2
METADATA_WAIT_S = 0.8 * MAX_BLOCK_S
TICK_S = 0.02  # per read of the clock: a wait loop always ends, on the fake clock
SETTINGS = {
    "bootstrap.servers": "fake:9092",
    "linger.ms": 0,
    "max.block.ms": int(MAX_BLOCK_S * 1000),
    "buffer.memory": 2_000,
    "batch.size": 1_000,
}
BIG = b"x" * 1_500  # one of these fills buffer.memory


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1_000.0
        self.metadata_timeouts: list[float] = []

    def monotonic(self) -> float:
        self.now_s += TICK_S
        return self.now_s

    def partition_count(self, topic: str, timeout_s: float) -> int:
        """The metadata lookup of an unknown topic: it takes METADATA_WAIT_S of `timeout_s`."""
        self.metadata_timeouts.append(timeout_s)
        self.now_s += min(METADATA_WAIT_S, timeout_s)
        return 1


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=1)
    fake.install(monkeypatch)
    fake.brokers[1].answer_in_groups_of = 1_000  # no answer: memory is never freed
    return fake


def forget_the_topic(cluster: FakeCluster, clock: FakeClock) -> None:
    """The facade knows no partition count: every send looks the topic up (on the clock)."""
    metadata = cluster.metadata
    assert metadata is not None
    metadata.partition_counts = {}
    metadata.partition_count = clock.partition_count  # type: ignore[method-assign]


def test_send_blocks_max_block_ms_in_all_for_metadata_and_memory(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
):
    clock = FakeClock()
    monkeypatch.setattr(producer_module, "time", SimpleNamespace(monotonic=clock.monotonic))
    producer = Producer(SETTINGS)
    forget_the_topic(cluster, clock)
    producer.send(TOPIC, BIG)  # fits: buffer.memory is now full
    started_s = clock.now_s
    with pytest.raises(ProduceError) as blocked:
        producer.send(TOPIC, BIG)
    took_s = clock.now_s - started_s
    assert blocked.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert "max.block.ms (200 ms" in str(blocked.value)
    assert took_s <= MAX_BLOCK_S + 2 * TICK_S  # before: the metadata wait + a full max.block.ms
    assert clock.metadata_timeouts[-1] <= MAX_BLOCK_S
    producer.close(timeout=0.1)


def test_send_many_shares_max_block_ms_with_the_metadata_wait(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
):
    clock = FakeClock()
    monkeypatch.setattr(producer_module, "time", SimpleNamespace(monotonic=clock.monotonic))
    producer = Producer(SETTINGS)
    forget_the_topic(cluster, clock)
    producer.send(TOPIC, BIG)
    started_s = clock.now_s
    with pytest.raises(ProduceError):
        producer.send_many(TOPIC, [BIG])
    assert clock.now_s - started_s <= MAX_BLOCK_S + 2 * TICK_S
    producer.close(timeout=0.1)


def test_async_send_blocks_max_block_ms_in_all_for_metadata_and_memory(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
):
    clock = FakeClock()
    monkeypatch.setattr(async_producer_module, "time", SimpleNamespace(monotonic=clock.monotonic))

    async def main() -> float:
        producer = AsyncProducer(SETTINGS)
        await producer.start()
        forget_the_topic(cluster, clock)
        await producer.send(TOPIC, BIG)
        started_s = clock.now_s
        with pytest.raises(ProduceError) as blocked:
            await producer.send(TOPIC, BIG)
        took_s = clock.now_s - started_s
        assert blocked.value.code == ErrorCode.REQUEST_TIMED_OUT
        await producer.stop(timeout=0.1)
        return took_s

    assert asyncio.run(main()) <= MAX_BLOCK_S + 2 * TICK_S
    assert clock.metadata_timeouts[-1] <= MAX_BLOCK_S
