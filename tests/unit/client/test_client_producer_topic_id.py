"""Goal: the producer names each topic's id from its metadata in every Produce (KIP-516), and
when a broker answers UNKNOWN_TOPIC_ID (the topic was deleted and created again, and the
producer's metadata is behind) it refreshes its metadata and retries under the new id within
delivery.timeout.ms: the record is written once, to the new topic. The hand-serialized request
(produce_message.py) carries the id exactly as the generated classes would.

Method: produce_request against the generated classes' bytes; then the sync Producer against an
in-memory broker (fake_produce_cluster.py) hosting the topic under a new id while the producer's
metadata still shows the old one.
"""

from __future__ import annotations

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import Producer
from samsa.client.produce_message import produce_request
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

TOPIC = "events"
OLD_ID, NEW_ID = b"\x0a" * 16, b"\x0b" * 16
WAIT_S = 10


def test_the_request_carries_each_known_topic_id_as_the_generated_classes_would():
    batch = build_batch([b"a"])
    by_partition = {(TOPIC, 0): [batch], ("other", 1): [batch]}
    request = produce_request(1, 0, by_partition, topic_ids={TOPIC: NEW_ID})
    expected = broker_pb2.ProduceRequest(
        acks=1,
        topics=[
            broker_pb2.ProduceRequest.TopicData(
                name=TOPIC,
                topic_id=NEW_ID,
                partitions=[broker_pb2.ProduceRequest.PartitionData(partition=0, records=batch)],
            ),
            broker_pb2.ProduceRequest.TopicData(
                name="other",
                partitions=[broker_pb2.ProduceRequest.PartitionData(partition=1, records=batch)],
            ),
        ],
    )
    assert b"".join(request.parts) == expected.SerializeToString()


def test_unknown_topic_id_refreshes_the_metadata_and_retries_under_the_new_id(
    monkeypatch: pytest.MonkeyPatch,
):
    cluster = FakeCluster(TOPIC, partitions=1)
    cluster.topic_ids = {TOPIC: OLD_ID}
    cluster.install(monkeypatch)
    settings = {
        "bootstrap.servers": "fake:9092",
        "linger.ms": 0,
        "retry.backoff.ms": 10,
        "retry.backoff.max.ms": 10,
    }
    with Producer(settings) as producer:
        broker = cluster.brokers[1]
        # The topic is deleted and created again: the broker hosts the new one, the
        # producer's metadata (made with the producer) still shows the old id.
        broker.hosted_topic_ids = {TOPIC: NEW_ID}
        cluster.topic_ids = {TOPIC: NEW_ID}
        metadata = producer.send(TOPIC, b"new", partition=0).result(timeout=WAIT_S)
    assert metadata.offset == 0
    assert broker.logs[(TOPIC, 0)] == [b"new"]
    assert broker.topic_ids_received == [(TOPIC, OLD_ID), (TOPIC, NEW_ID)]
    assert cluster.metadata is not None and cluster.metadata.stale_marks >= 1
