"""The SDK against a real cluster: 100,000 keyed records across partitions, all consumed back in
order per partition with their keys, values, headers and timestamps; seeks and time lookups."""

from __future__ import annotations

import pytest
from cluster_helpers import local_cluster

from samsa.client import Admin, Consumer, KafkaError, NewTopic, Producer, TopicError
from samsa.client.partitioner import partition_for_key
from samsa.common.errors import ErrorCode, InvalidConfigError

pytestmark = pytest.mark.timeout(300)
RECORDS = 100_000
PARTITIONS = 3
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("e2e"), controllers=1, brokers=2) as running:
        yield running


@pytest.fixture(scope="module")
def produced(cluster):
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("events", PARTITIONS, 1)])
    sent: dict[int, list[tuple[bytes, bytes, int, tuple]]] = {p: [] for p in range(PARTITIONS)}
    futures = []
    with Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "zstd"}
    ) as producer:
        for n in range(RECORDS):
            key = b"user-%d" % (n % 1000)
            value = b"event-%d" % n
            headers = (("n", b"%d" % n),)
            timestamp = BASE_TS + n
            future = producer.send("events", value, key=key, headers=headers, timestamp=timestamp)
            futures.append(future)
            sent[partition_for_key(key, PARTITIONS)].append((key, value, timestamp, headers))
        producer.flush()
    offsets = {}
    for future in futures:
        metadata = future.result(timeout=0)
        offsets.setdefault(metadata.partition, []).append(metadata.offset)
    return sent, offsets


def test_every_record_comes_back_in_order_per_partition_with_all_its_fields(cluster, produced):
    sent, offsets = produced
    for partition_offsets in offsets.values():
        assert partition_offsets == list(range(len(partition_offsets))), "dense offsets"
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.spec.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "max.poll.records": 5000,
        }
    )
    with consumer:
        consumer.assign([("events", p) for p in range(PARTITIONS)])
        received: dict[int, list] = {p: [] for p in range(PARTITIONS)}
        total = 0
        while total < RECORDS:
            records = consumer.poll(timeout=10)
            assert records, f"poll returned nothing after {total} records"
            for record in records:
                received[record.partition].append(
                    (record.key, record.value, record.timestamp, record.headers)
                )
            total += len(records)
        assert consumer.poll(timeout=0.5) == [], "no record twice"
    for partition in range(PARTITIONS):
        assert received[partition] == sent[partition]


def test_seek_position_and_offsets_for_times(cluster, produced):
    sent, _ = produced
    bootstrap = cluster.spec.bootstrap_servers
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "latest"}) as consumer:
        tp = ("events", 0)
        consumer.assign([tp])
        assert consumer.position(tp) == len(sent[0]), "latest = the end"
        consumer.seek(tp, 10)
        first = consumer.poll(timeout=10)[0]
        assert (first.offset, first.key, first.value) == (10, sent[0][10][0], sent[0][10][1])
        consumer.seek_to_beginning()
        assert consumer.poll(timeout=10)[0].offset == 0
        target = sent[0][50][2]
        found = consumer.offsets_for_times({tp: target})[tp]
        assert found is not None and (found.offset, found.timestamp) == (50, target)
        assert consumer.offsets_for_times({tp: BASE_TS + 10 * RECORDS})[tp] is None
        with pytest.raises(ValueError, match="must be an int of ms since the epoch, >= 0"):
            consumer.offsets_for_times({tp: -1})


def test_client_errors_are_clear(cluster):
    bootstrap = cluster.spec.bootstrap_servers
    with pytest.raises(InvalidConfigError, match=r"linger\.ms"):
        Producer({"bootstrap.servers": bootstrap, "linger_ms": 5})
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        with pytest.raises(TopicError) as exists:
            admin.create_topic("events", 1, 1)
        assert exists.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        with pytest.raises(TopicError) as bad:
            admin.create_topic("bad-config", 1, 1, {"cleanup.policy": "shred"})
        assert bad.value.code == ErrorCode.INVALID_CONFIG and "cleanup.policy" in str(bad.value)
        admin.alter_configs("events", set={"retention.ms": "3600000"})
        assert admin.describe_configs("events")["retention.ms"].value == "3600000"
    with Producer({"bootstrap.servers": bootstrap, "max.block.ms": 500}) as producer:
        with pytest.raises(KafkaError) as unknown:
            producer.send("no-such-topic", b"x")
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_the_producer_retries_across_a_broker_restart_and_loses_nothing(cluster):
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("retried", 1, 1)])
        leader = admin.describe_topics(["retried"])["retried"].partitions[0].leader
    futures = []
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"}) as producer:
        for n in range(2000):
            futures.append(producer.send("retried", b"before-%d" % n))
        producer.flush()
        cluster.kill(f"broker-{leader}")
        for n in range(2000):  # sent while the only replica is down: retried until it is back
            futures.append(producer.send("retried", b"during-%d" % n))
        cluster.start(f"broker-{leader}")
        producer.flush(timeout=60)
    offsets = [future.result(timeout=0).offset for future in futures]
    assert offsets == list(range(4000)), "every record acked once, in order"
    with Consumer(
        {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "max.poll.records": 4000}
    ) as consumer:
        consumer.assign([("retried", 0)])
        values = []
        while len(values) < 4000:
            records = consumer.poll(timeout=30)
            assert records, f"nothing after {len(values)} records"
            values += [r.value for r in records]
    assert values == [b"before-%d" % n for n in range(2000)] + [
        b"during-%d" % n for n in range(2000)
    ]
