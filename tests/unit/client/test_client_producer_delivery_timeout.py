"""Goal: delivery.timeout.ms is Kafka's upper bound on the time to report success or failure after
send() returns, for a batch in flight too: an attempt sent shortly before its batch's deadline
(a retry after a backoff) whose answer never comes fails at the deadline with REQUEST_TIMED_OUT,
not request.timeout.ms after it was sent (Kafka's Sender expires in-flight batches, KIP-91).

Method: the sync Producer against the in-memory brokers (fake_produce_cluster.py). The broker
refuses the first attempt with a retriable error; the retry goes after retry.backoff.ms, close to
the delivery deadline, and its answer is held for good. The future must settle with
REQUEST_TIMED_OUT by the deadline plus the driver's turn (at most 0.5 s), well before
retry + request.timeout.ms.
"""

from __future__ import annotations

import time

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import KafkaError, Producer
from samsa.common.errors import ErrorCode
from samsa.common.record import codec
from samsa.v1 import broker_pb2

TOPIC = "events"
DELIVERY_TIMEOUT_MS = 2_000
REQUEST_TIMEOUT_MS = 1_900
BACKOFF_MS = 1_500  # the retry leaves at ~1.5 s; request.timeout.ms would end it at ~3.4 s


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=1)
    fake.install(monkeypatch)
    return fake


def test_an_attempt_in_flight_fails_at_the_delivery_deadline(cluster: FakeCluster):
    broker = cluster.brokers[1]
    seen: list[codec.RecordBatch] = []

    def refuse_then_hold(topic: str, partition: int, batch: codec.RecordBatch):
        seen.append(batch)
        if len(seen) == 1:
            return broker_pb2.ProduceResponse.PartitionResponse(
                error_code=ErrorCode.NOT_ENOUGH_REPLICAS
            )
        broker.answer_in_groups_of = 1_000  # written, but its answer never comes
        return None

    broker.answer_hook = refuse_then_hold
    config = {
        "bootstrap.servers": "fake:9092",
        "linger.ms": 0,
        "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "retry.backoff.ms": BACKOFF_MS,
        "retry.backoff.max.ms": BACKOFF_MS,
    }
    producer = Producer(config)
    try:
        started = time.monotonic()
        future = producer.send(TOPIC, b"late", partition=0)
        with pytest.raises(KafkaError) as failed:
            future.result(timeout=10)
        elapsed_s = time.monotonic() - started
        assert len(seen) == 2, "the retry reached the broker"
        assert failed.value.code == ErrorCode.REQUEST_TIMED_OUT
        assert "delivery.timeout.ms" in str(failed.value)
        # The deadline (2.0 s) plus at most one driver turn (0.5 s), with slack for a busy
        # machine; request.timeout.ms after the retry would be ~3.4 s.
        assert elapsed_s < 3.0, f"settled {elapsed_s:.2f} s after send(), past delivery.timeout.ms"
    finally:
        producer.close(timeout=0)


def test_a_leader_without_an_address_fails_as_a_retriable_error(cluster: FakeCluster):
    """A partition whose leader the metadata names but gives no address for fails, once its
    retries are spent, with an error that says it was retriable (what the producer treats it
    as): LEADER_NOT_AVAILABLE, not BROKER_NOT_AVAILABLE, which errors.proto calls not
    retriable. (With retries left it waits for new metadata until delivery.timeout.ms.)"""
    config = {
        "bootstrap.servers": "fake:9092",
        "linger.ms": 0,
        "acks": 1,
        "enable.idempotence": False,
        "retries": 0,
    }
    producer = Producer(config)
    try:
        assert cluster.metadata is not None
        cluster.metadata.endpoints.clear()  # the leader is known, its address is not
        with pytest.raises(KafkaError) as failed:
            producer.send(TOPIC, b"nowhere", partition=0).result(timeout=10)
        assert failed.value.code == ErrorCode.LEADER_NOT_AVAILABLE
        assert failed.value.retriable
        assert not cluster.brokers[1].received, "nothing reached a broker"
        assert cluster.metadata.stale_marks >= 1, "it asked for fresh metadata"
    finally:
        producer.close(timeout=0)
