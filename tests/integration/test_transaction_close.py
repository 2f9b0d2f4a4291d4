"""Goal: closing a transactional producer with its transaction still open aborts that
transaction, as Kafka's producer does, so that read_committed readers of its partitions go on at
once instead of waiting for transaction.timeout.ms; its records are never shown to them. The
same for AsyncProducer.stop(), and for a transaction whose batch failed (abortable error). A
prepared transaction is left for its completer (test_transactions_sdk.py closes such a
producer, then commits it).

Method: one controller, one broker, one coordinator (real processes from the launcher, stopped
by PID also on failure). Each producer asks for a transaction.timeout.ms of 10 minutes, so only
close() can have ended its transaction within the test. After close(), DescribeProducers shows no
open transaction on the partition, and a record committed after it is read at read_committed
while the closed transaction's records are not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster, read_to_end

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, AsyncProducer, NewTopic, Producer
from samsa.client.errors import KafkaError

pytestmark = pytest.mark.timeout(180)

# Far beyond the test's waits: a transaction that ended did so because close() aborted it.
TRANSACTION_TIMEOUT_MS = 600_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("txn-close")
    with local_cluster(data_dir, 1, 1, TRANSACTION_SETTINGS, coordinators=1) as running:
        yield running


def producer_config(cluster: LocalCluster, transactional_id: str) -> dict[str, object]:
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
    }


def new_topic(cluster: LocalCluster, topic: str, configs: dict[str, str] | None = None) -> None:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs or {})])


def open_transactions(cluster: LocalCluster, topic: str) -> list[int]:
    """The start offsets of the transactions open on the topic's partition 0."""
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        producers = admin.describe_producers([(topic, 0)])[(topic, 0)]
    return [p.current_txn_start_offset for p in producers if p.current_txn_start_offset >= 0]


def commit_one(cluster: LocalCluster, topic: str, value: bytes) -> None:
    producer = Producer(producer_config(cluster, f"{topic}-after"))
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(topic, value, partition=0)
        producer.commit_transaction(30)
    finally:
        producer.close(10)


def assert_aborted_by_close(cluster: LocalCluster, topic: str, unseen: list[bytes]) -> None:
    assert open_transactions(cluster, topic) == [], "close() left the transaction open"
    commit_one(cluster, topic, b"after")
    bootstrap = cluster.spec.bootstrap_servers
    values = [value for _, _, value in read_to_end(bootstrap, [(topic, 0)], "read_committed")]
    assert values == [b"after"], f"read_committed saw {values}, never any of {unseen}"
    everything = {value for _, _, value in read_to_end(bootstrap, [(topic, 0)], "read_uncommitted")}
    assert set(unseen) <= everything, "the aborted records were written (and then aborted)"


def test_close_aborts_the_open_transaction(cluster: LocalCluster) -> None:
    topic = "close-open"
    new_topic(cluster, topic)
    producer = Producer(producer_config(cluster, "close-open-app"))
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        values = [b"open-%d" % i for i in range(5)]
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush(30)  # written to the partition, the transaction open there
        assert len(open_transactions(cluster, topic)) == 1
    finally:
        producer.close(10)
    assert_aborted_by_close(cluster, topic, values)


def test_close_aborts_a_transaction_whose_batch_failed(cluster: LocalCluster) -> None:
    """An abortable error (a refused batch) leaves the transaction open at the coordinator with
    the partitions it added; close() ends it as abort_transaction() would."""
    topic = "close-failed"
    new_topic(cluster, topic, {"max.message.bytes": "2000"})
    producer = Producer(producer_config(cluster, "close-failed-app"))
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(topic, b"written", partition=0)
        producer.flush(30)
        refused = producer.send(topic, bytes(5000), partition=0)  # over max.message.bytes
        with pytest.raises(KafkaError):
            refused.result(30)
        with pytest.raises(KafkaError, match="abort_transaction"):
            producer.commit_transaction(10)
    finally:
        producer.close(10)
    assert_aborted_by_close(cluster, topic, [b"written"])


def test_async_producer_stop_aborts_the_open_transaction(cluster: LocalCluster) -> None:
    topic = "close-async"
    new_topic(cluster, topic)

    async def main() -> None:
        async with AsyncProducer(producer_config(cluster, "close-async-app")) as producer:
            await producer.init_transactions(30)
            producer.begin_transaction()
            for i in range(3):
                await producer.send(topic, b"async-%d" % i, partition=0)
            await producer.flush(30)
            assert len(open_transactions(cluster, topic)) == 1

    asyncio.run(main())
    assert_aborted_by_close(cluster, topic, [b"async-%d" % i for i in range(3)])
