"""Goal: a produce answer that does not match its request never strands a batch nor crashes the
driver. A partition the request carried and the answer leaves out fails as retriable (Kafka fails
a batch its response omits): it is retried in order, with the sequence it was sent with, as after
a lost answer, and its records are acknowledged once. A partition the answer names but the
request never carried, or names twice, is ignored (before, a second answer for one partition
hit the accumulator's "fed twice" assertion on the stream's reader, which then hung every request
waiting on that stream). An error code the client does not know (a newer broker's) fails its
batch as UNKNOWN_SERVER_ERROR, the number in the message, as Kafka's clients read it (before, a
ValueError on the stream's reader left the request's batches in flight for ever: their futures
never settled, and every flush and close timed out).

Method: the sync Producer (idempotent, the default) against the in-memory brokers
(fake_produce_cluster.py), whose `rewrite_answer` edits the first answer; the fake broker, like
a leader, answers a repeat of its last sequenced batch with the first write's offset.
"""

from __future__ import annotations

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import Producer
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2

TOPIC = "events"
WAIT_S = 10
SETTINGS = {"bootstrap.servers": "fake:9092", "linger.ms": 60_000, "retry.backoff.ms": 1}

PartitionResponse = broker_pb2.ProduceResponse.PartitionResponse


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=2, brokers=1)  # one request carries both partitions
    fake.install(monkeypatch)
    return fake


def rewrite_first_answer(cluster: FakeCluster, rewrite) -> None:  # type: ignore[no-untyped-def]
    """Apply `rewrite` to the broker's first answer only."""
    rewritten: list[bool] = []

    def hook(answer: broker_pb2.ProduceResponse) -> broker_pb2.ProduceResponse:
        if rewritten:
            return answer
        rewritten.append(True)
        rewrite(answer)
        return answer

    cluster.brokers[1].rewrite_answer = hook


def send_to_both_partitions(cluster: FakeCluster) -> list[tuple[int, int]]:
    """Two records per partition in one request (a flush); (partition, offset) of each."""
    with Producer(SETTINGS) as producer:
        futures = [producer.send(TOPIC, b"p%d-%d" % (n % 2, n), partition=n % 2) for n in range(4)]
        producer.flush(timeout=WAIT_S)
        results = [future.result(timeout=WAIT_S) for future in futures]
    return [(metadata.partition, metadata.offset) for metadata in results]


def sequences(cluster: FakeCluster, partition: int) -> list[tuple[int, int, int]]:
    return [
        (b.header.producer_id, b.header.producer_epoch, b.header.base_sequence)
        for _, p, b in cluster.brokers[1].received
        if p == partition
    ]


def test_a_partition_left_out_of_the_answer_is_retried_with_its_sequence(cluster: FakeCluster):
    def leave_out_partition_1(answer: broker_pb2.ProduceResponse) -> None:
        kept = [r for r in answer.topics[0].partitions if r.partition != 1]
        del answer.topics[0].partitions[:]
        answer.topics[0].partitions.extend(kept)

    rewrite_first_answer(cluster, leave_out_partition_1)
    assert send_to_both_partitions(cluster) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    # Partition 1's batch was written, its answer lost: the retry carried the same sequence and
    # the broker answered it with the first write's offset, storing nothing twice.
    assert sequences(cluster, 1) == [(101, 0, 0), (101, 0, 0)]
    assert cluster.log(TOPIC, 1) == [b"p1-1", b"p1-3"]
    assert cluster.log(TOPIC, 0) == [b"p0-0", b"p0-2"]


def test_a_partition_never_asked_for_in_the_answer_is_ignored(cluster: FakeCluster):
    def add_an_unasked_partition(answer: broker_pb2.ProduceResponse) -> None:
        # Errors that would mark the metadata stale, or fence the producer, were they taken
        # for answers.
        answer.topics[0].partitions.append(
            PartitionResponse(partition=7, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        )
        answer.topics.add(name="other").partitions.append(
            PartitionResponse(partition=0, error_code=ErrorCode.INVALID_PRODUCER_EPOCH)
        )

    rewrite_first_answer(cluster, add_an_unasked_partition)
    assert send_to_both_partitions(cluster) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert cluster.metadata is not None and cluster.metadata.stale_marks == 0
    assert cluster.init_producer_id_calls == 1


def test_a_partition_answered_twice_takes_the_first_answer(cluster: FakeCluster):
    def answer_partition_0_twice(answer: broker_pb2.ProduceResponse) -> None:
        answer.topics[0].partitions.append(
            PartitionResponse(partition=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        )

    rewrite_first_answer(cluster, answer_partition_0_twice)
    assert send_to_both_partitions(cluster) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert len(cluster.brokers[1].received) == 2  # nothing re-sent


def test_an_unknown_error_code_fails_its_batch_and_settles_the_others(cluster: FakeCluster):
    def unknown_code_for_partition_0(answer: broker_pb2.ProduceResponse) -> None:
        for result in answer.topics[0].partitions:
            if result.partition == 0:
                result.error_code, result.error_message = 999, "added since"

    rewrite_first_answer(cluster, unknown_code_for_partition_0)
    producer = Producer(SETTINGS)
    try:
        refused = producer.send(TOPIC, b"p0", partition=0)
        acked = producer.send(TOPIC, b"p1", partition=1)
        producer.flush(timeout=WAIT_S)  # one request, one answer for both partitions
        error = refused.exception(timeout=0)
        assert error is not None and error.code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert "error code 999: added since" in str(error)
        assert acked.result(timeout=0).offset == 0
        assert producer._driver.accumulator.buffered_bytes == 0
    finally:
        producer.close(timeout=WAIT_S)  # bounded: it waited for ever for the stranded batch
    assert len(cluster.brokers[1].received) == 2  # not retried
