"""Goal: any max.block.ms the configuration takes (up to Java's Long.MAX_VALUE, which Kafka users
set to mean "block as long as it takes") works as the default timeout of the transactional
calls, rather than overflowing the thread wait that hands them to the driver's loop.

Method: a transactional sync Producer against in-memory brokers (fake_produce_cluster.py); it
is put in the state init_transactions() leaves (no coordinator here), and a transaction that
sent nothing ends without a coordinator call.
"""

from __future__ import annotations

import asyncio

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, Producer

TOPIC = "events"
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
LONG_MAX = 2**63 - 1


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=1, brokers=1)
    fake.install(monkeypatch)
    return fake


def test_the_largest_max_block_ms_is_a_usable_default_timeout(cluster: FakeCluster) -> None:
    config = {"bootstrap.servers": BOOTSTRAP, "transactional.id": "t", "max.block.ms": LONG_MAX}
    with Producer(config) as producer:
        assert producer._txn is not None
        producer._txn.on_initialized()  # as init_transactions() leaves it
        producer.begin_transaction()
        producer.commit_transaction()  # nothing sent: ends without a coordinator call
        producer.begin_transaction()
        producer.abort_transaction()


def test_the_largest_max_block_ms_is_a_usable_default_timeout_async(cluster: FakeCluster) -> None:
    config = {"bootstrap.servers": BOOTSTRAP, "transactional.id": "t", "max.block.ms": LONG_MAX}

    async def scenario() -> None:
        async with AsyncProducer(config) as producer:
            assert producer._driver is not None and producer._driver.txn is not None
            producer._driver.txn.on_initialized()  # as init_transactions() leaves it
            producer.begin_transaction()
            await producer.commit_transaction()
            producer.begin_transaction()
            await producer.abort_transaction()

    asyncio.run(scenario())
