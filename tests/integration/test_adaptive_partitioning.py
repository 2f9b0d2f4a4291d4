"""Goal: a keyless producer keeps writing while one broker stops answering: with
`partitioner.availability.timeout.ms` set, a partition whose leader has taken nothing for that
long gets no new records (KIP-794), so the records flow to the brokers that keep up instead of
piling up in buffer.memory behind the stopped one; and when the broker is back, every record is
acknowledged. (The load weighting that adaptive partitioning adds by default is tested
deterministically in test_client_partitioner.py.)

Method: 2 brokers whose sessions outlast the test (the stopped one stays the leader of its
partitions: the producer must notice the stall by itself, not from the metadata), a topic of 4
partitions at RF 1, two led by each broker. Broker 2 is SIGSTOPped: it keeps its connections and
answers nothing. A producer (availability timeout 200 ms, buffer.memory 2 MiB, max.block.ms 3 s)
sends 60,000 keyless 100-byte records; half a second later, 30,000 more. The first burst may
place batches on the stopped broker's partitions before their first batches are overdue; the
second places at most the one batch that was open for them when it began (the sticky partition
is only redrawn when its batch closes). No send() gives up. Then the broker is resumed and
everything is flushed. Checked against the rule removed (availability timeout 0): the second burst
then places thousands of records there, or send() gives up once the buffer is full of them.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from cluster_helpers import local_cluster, wait_until

from samsa.client import Admin, NewTopic, Producer
from samsa.client.record_future import RecordFuture

FIRST_BURST = 60_000
SECOND_BURST = 30_000
VALUE = b"v" * 100
BATCH_SIZE = 16_384
# Long sessions: a stopped broker is not fenced during the test, so it stays the leader.
SETTINGS = {"broker.session.timeout.ms": "60000", "broker.heartbeat.interval.ms": "300"}
PRODUCER = {
    "linger.ms": 5,
    "batch.size": BATCH_SIZE,
    "buffer.memory": 2 << 20,
    "max.block.ms": 3_000,
    "partitioner.availability.timeout.ms": 200,
}


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        description = admin.describe_topics([topic])[topic]
    return {p.partition: p.leader for p in description.partitions}


def send(producer: Producer, count: int) -> list[RecordFuture]:
    return [producer.send("flow", VALUE) for _ in range(count)]


def test_keyless_records_flow_around_a_stopped_broker(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=2, settings=SETTINGS) as cluster:
        bootstrap = cluster.spec.bootstrap_servers
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic("flow", 4, 1)])
        placed = wait_until(
            "every partition led",
            lambda: (found := leaders(bootstrap, "flow")) and min(found.values()) >= 0 and found,
        )
        stopped = {partition for partition, leader in placed.items() if leader == 2}
        assert len(stopped) == 2, placed

        producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
        try:
            for partition in range(4):  # connections and metadata, before the clock matters
                producer.send("flow", VALUE, partition=partition)
            producer.flush(30)
            cluster.kill("broker-2", signal.SIGSTOP)
            try:
                first = send(producer, FIRST_BURST)
                time.sleep(0.5)
                second = send(producer, SECOND_BURST)
            finally:
                cluster.kill("broker-2", signal.SIGCONT)
            producer.flush(60)
        finally:
            producer.close(10)

        first_there = sum(f.result(timeout=0).partition in stopped for f in first)
        second_there = sum(f.result(timeout=0).partition in stopped for f in second)
        # At most the batch that was open on a stopped partition as the second burst began.
        assert second_there <= BATCH_SIZE // len(VALUE), (first_there, second_there)
        assert first_there < FIRST_BURST // 2, (first_there, second_there)
