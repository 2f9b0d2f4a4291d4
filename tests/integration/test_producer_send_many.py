"""Goal: `Producer.send_many` against a real cluster: every record lands once, on the partition
send() would pick for its key, each partition's records in call order, also when the broker
drops Produce answers after appending (the idempotent producer retries those batches and the
broker's sequence check keeps them from being written twice); inside a transaction, an abort
hides the records from read_committed readers and a commit shows them all.

Method: one controller, one broker with `SAMSA_FAULTS=produce.drop_answer=…` (the answer to a
fraction of Produce requests is lost after the append), one transaction coordinator; real
processes from the launcher, stopped by PID also on failure. The records are read back with the
SDK's Consumer and compared with what send_many was given.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster, read_to_end

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, NewTopic, Producer
from samsa.client.partitioner import partition_for_key

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 4
DROP_ANSWER_PROBABILITY = 0.1
WAIT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir: Path = tmp_path_factory.mktemp("send-many")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAMSA_FAULTS", f"produce.drop_answer={DROP_ANSWER_PROBABILITY}")
        with local_cluster(data_dir, 1, 1, TRANSACTION_SETTINGS, coordinators=1) as running:
            yield running


def create(cluster: LocalCluster, topic: str) -> None:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])


def by_partition(cluster: LocalCluster, topic: str, isolation: str) -> dict[int, list[bytes]]:
    partitions = [(topic, p) for p in range(PARTITIONS)]
    records = read_to_end(cluster.spec.bootstrap_servers, partitions, isolation)
    logs: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for partition, _, value in sorted(records):
        logs[partition].append(value)
    return logs


def expected(keys: list[bytes], values: list[bytes]) -> dict[int, list[bytes]]:
    logs: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for key, value in zip(keys, values, strict=True):
        logs[partition_for_key(key, PARTITIONS)].append(value)
    return logs


def test_retried_batches_land_once_in_order_on_the_keys_partitions(cluster: LocalCluster):
    topic = "send-many"
    create(cluster, topic)
    keys = [b"user-%d" % (n % 1_000) for n in range(30_000)]
    values = [b"value-%06d" % n for n in range(30_000)]
    config = {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "batch.size": 4_096,  # many batches, so many answers to drop:
        "max.request.size": 4_096,  # one batch a request (~160), so ~16 answers dropped
        "retry.backoff.ms": 10,
    }
    with Producer(config) as producer:
        futures = [
            producer.send_many(topic, values[n : n + 10_000], keys[n : n + 10_000])
            for n in range(0, 30_000, 10_000)
        ]
        producer.flush(WAIT_S)
        assert [future.result(0) for future in futures] == [10_000] * 3
        assert producer.batch_retries > 0, "no answer was dropped: the test proved nothing"
    assert by_partition(cluster, topic, "read_uncommitted") == expected(keys, values)


def test_a_transaction_shows_its_records_only_once_committed(cluster: LocalCluster):
    topic = "send-many-txn"
    create(cluster, topic)
    keys = [b"k%d" % n for n in range(2_000)]
    aborted = [b"aborted-%d" % n for n in range(2_000)]
    committed = [b"committed-%d" % n for n in range(2_000)]
    config = {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        "transactional.id": "send-many",
        "linger.ms": 5,
    }
    with Producer(config) as producer:
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.send_many(topic, aborted, keys)
        producer.abort_transaction(WAIT_S)
        producer.begin_transaction()
        future = producer.send_many(topic, committed, keys)
        producer.commit_transaction(WAIT_S)
        assert future.result(0) == 2_000
    assert by_partition(cluster, topic, "read_committed") == expected(keys, committed)
