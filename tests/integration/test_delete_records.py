"""DeleteRecords (KIP-107) on a real 3-broker cluster: the log start moves on every in-sync
replica before the call returns, so a leader elected after a `kill -9` never serves a deleted
record again; a consumer positioned below the new start resets; refusals say what to fix.

One cluster for the module (1 controller, 3 brokers), topics of replication factor 3 with
min.insync.replicas=2 and 1 KiB segments, so that deleting records deletes whole segment files
on every replica as well.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, admin_write, local_cluster, wait_until

from samsa.client import Admin, Consumer, NewTopic, Producer, TopicError
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2

pytestmark = pytest.mark.timeout(300)

SETTINGS = dict(FAST_SETTINGS, **{"replica.lag.time.max.ms": "2000"})
REPLICATED = {"min.insync.replicas": "2", "segment.bytes": "1024", "max.message.bytes": "1024"}
RECORDS = 300  # per partition, one batch each (linger 0, sync sends): many 1 KiB segments


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    data_dir = tmp_path_factory.mktemp("delete-records")
    with local_cluster(data_dir, controllers=1, brokers=3, settings=SETTINGS) as running:
        yield running


def leader_and_isr(cluster, topic: str, partition: int) -> tuple[int, tuple[int, ...]]:
    answer = admin_write(
        cluster.spec, "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[topic])
    )
    state = answer.topics[0].partitions[partition]
    return state.leader, tuple(state.isr)


def produce(bootstrap: str, topic: str, partitions: int) -> None:
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0}) as producer:
        for n in range(RECORDS):
            for partition in range(partitions):
                producer.send(topic, b"v-%d" % n, partition=partition).result(30)


def segment_bases(data_dir: Path, broker_id: int, topic: str, partition: int) -> list[int]:
    directory = data_dir / f"broker-{broker_id}" / f"{topic}-{partition}"
    return sorted(int(path.stem) for path in directory.glob("*.log"))


def read_from_start(bootstrap: str, topic: str, partition: int) -> list[tuple[int, bytes]]:
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([(topic, partition)])
        end = consumer.end_offsets([(topic, partition)])[(topic, partition)]
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while consumer.position((topic, partition)) < end:
            assert time.monotonic() < deadline, f"could not read {topic}-{partition} to its end"
            records += [(r.offset, r.value) for r in consumer.poll(timeout=2)]
        return records


def test_deleted_records_stay_deleted_on_every_replica_after_the_leader_dies(cluster) -> None:
    """The invariant: once delete_records returns, no replica that can be elected holds a record
    below the offset. Partition 0 is cut at 200, partition 1 at its high watermark (-1). A
    consumer that had read partition 0 from 0, positioned at 50, resets to 200 (earliest);
    then the leader of partition 0 is killed, and its successor starts at 200 too, on disk
    as well."""
    bootstrap, data_dir = cluster.spec.bootstrap_servers, cluster.data_dir
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("trim", 2, 3, REPLICATED)])
    wait_until("a full ISR", lambda: len(leader_and_isr(cluster, "trim", 0)[1]) == 3, 60)
    wait_until("a full ISR", lambda: len(leader_and_isr(cluster, "trim", 1)[1]) == 3, 60)
    produce(bootstrap, "trim", 2)

    config = {
        "bootstrap.servers": bootstrap,
        "max.poll.records": 50,
        "auto.offset.reset": "earliest",
    }
    with Consumer(config) as reader, Admin({"bootstrap.servers": bootstrap}) as admin:
        reader.assign([("trim", 0)])
        reader.seek(("trim", 0), 0)
        first: list[int] = []
        while len(first) < 50:
            first += [r.offset for r in reader.poll(timeout=2)]
        assert first == list(range(len(first)))

        low = admin.delete_records({("trim", 0): 200, ("trim", 1): -1})
        assert low == {("trim", 0): 200, ("trim", 1): RECORDS}

        reader.seek(("trim", 0), 50)  # drops what it fetched ahead: its next fetch is at 50
        resumed: list[int] = []
        deadline = time.monotonic() + 30
        while not resumed:
            assert time.monotonic() < deadline, "the consumer below the log start never reset"
            resumed = [r.offset for r in reader.poll(timeout=2)]
        assert resumed[0] == 200, "a consumer below the new log start resets to it"

        assert admin.delete_records({("trim", 0): 100}) == {("trim", 0): 200}, (
            "an offset below the log start changes nothing"
        )

    for broker in cluster.spec.brokers:
        bases = segment_bases(data_dir, broker.broker_id, "trim", 0)
        assert len(bases) > 1 and bases[1] > 200, (
            f"broker {broker.broker_id} kept a segment wholly below 200: {bases}"
        )
        assert segment_bases(data_dir, broker.broker_id, "trim", 1)[0] > 0

    leader, _ = leader_and_isr(cluster, "trim", 0)
    cluster.kill(f"broker-{leader}")
    try:
        wait_until(
            "a new leader of trim-0",
            lambda: leader_and_isr(cluster, "trim", 0)[0] not in (-1, leader),
            30,
        )
        records = read_from_start(bootstrap, "trim", 0)
        assert [offset for offset, _ in records] == list(range(200, RECORDS))
        assert [value for _, value in records] == [b"v-%d" % n for n in range(200, RECORDS)]
        assert read_from_start(bootstrap, "trim", 1) == []
    finally:
        cluster.start(f"broker-{leader}")
    wait_until("a full ISR again", lambda: len(leader_and_isr(cluster, "trim", 0)[1]) == 3, 60)


def test_refusals_say_what_to_fix_and_change_nothing(cluster) -> None:
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics(
            [
                NewTopic("kept", 1, 3, REPLICATED),
                NewTopic("compacted", 1, 3, {"cleanup.policy": "compact"}),
            ]
        )
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for n in range(10):
                producer.send("kept", b"k-%d" % n)
                producer.send("compacted", b"c-%d" % n, key=b"%d" % n)

        with pytest.raises(TopicError) as above:
            admin.delete_records({("kept", 0): 11})
        assert above.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert "high watermark 10" in str(above.value)
        with pytest.raises(TopicError) as compacted:
            admin.delete_records({("compacted", 0): 5})
        assert compacted.value.code == ErrorCode.POLICY_VIOLATION
        assert "cleanup.policy=compact" in str(compacted.value)
        with pytest.raises(TopicError) as missing:
            admin.delete_records({("kept", 7): 1})
        assert missing.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    assert [v for _, v in read_from_start(bootstrap, "kept", 0)] == [
        b"k-%d" % n for n in range(10)
    ], "a refused deletion deleted nothing"
