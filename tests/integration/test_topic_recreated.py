"""Goal: a topic deleted and created again under the same name is a new topic to the SDK
(KIP-516, README "Topic ids"): a consumer that read the old topic to offset 8 reads the new one
from its start (auto.offset.reset=earliest), not from offset 8, which in the new topic is the
middle; and the producer whose metadata still shows the old topic's id writes to the new one.

Method: a real local cluster (1 controller, 1 broker; processes stopped by PID). The same
Producer and Consumer (assigned, no group) live through the deletion and re-creation; the
consumer's partition is paused meanwhile (else a fetch of offset 8 from the new, still empty
topic would be answered OFFSET_OUT_OF_RANGE and reset it anyway), and the new topic gets more
records than the old one had, so a consumer keeping its old position would skip the first 8 of
them. Timings are bounds far above what this takes on a loaded machine.
"""

from __future__ import annotations

import time

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until

from samsa.client import Admin, Consumer, NewTopic, Producer

pytestmark = pytest.mark.timeout(180)

TOPIC = "recreated"
OLD_RECORDS, NEW_RECORDS = 8, 12


def poll_values(consumer: Consumer, count: int, timeout_s: float = 60) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        values += [record.value for record in consumer.poll(timeout=0.5)]
    return values


def test_a_recreated_topic_is_read_from_its_start_and_written_under_its_new_id(tmp_path):
    with local_cluster(tmp_path, 1, 1, FAST_SETTINGS) as cluster:
        bootstrap = cluster.spec.brokers[0].endpoint
        admin = Admin({"bootstrap.servers": bootstrap})
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
        try:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
            for n in range(OLD_RECORDS):
                producer.send(TOPIC, b"old-%d" % n, partition=0).result(timeout=30)
            consumer.assign([(TOPIC, 0)])
            assert poll_values(consumer, OLD_RECORDS) == [b"old-%d" % n for n in range(8)]
            old_id = admin.describe_topics([TOPIC])[TOPIC].topic_id
            consumer.pause([(TOPIC, 0)])

            admin.delete_topics([TOPIC])
            wait_until("the deletion", lambda: TOPIC not in admin.list_topics())
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
            new_id = admin.describe_topics([TOPIC])[TOPIC].topic_id
            assert new_id != old_id
            offsets = [
                producer.send(TOPIC, b"new-%d" % n, partition=0).result(timeout=60).offset
                for n in range(NEW_RECORDS)
            ]
            assert offsets == list(range(NEW_RECORDS)), "written to the new topic, from 0"

            consumer.resume([(TOPIC, 0)])
            values = poll_values(consumer, NEW_RECORDS)
            assert values == [b"new-%d" % n for n in range(NEW_RECORDS)], (
                "the new topic is read from its start, not from the old topic's position"
            )
        finally:
            consumer.close()
            producer.close()
            admin.close()
