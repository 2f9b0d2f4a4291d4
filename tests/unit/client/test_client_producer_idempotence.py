"""Goal: the driver's half of idempotence (KIP-98, KIP-360). The first batch waits for a producer
id from InitProducerId (retried while a broker answers a retriable error); a reset of sequences
(OUT_OF_ORDER_SEQUENCE_NUMBER at a partition's head) bumps the epoch locally without asking a
broker; InitProducerId is asked again only when the epoch would pass int16 or after
INVALID_PRODUCER_EPOCH; a non-retriable InitProducerId answer fails the records at once.

Method: the sync Producer with enable.idempotence=true (the default, said explicitly)
against the in-memory brokers (fake_produce_cluster.py), whose `answer_hook` refuses chosen
batches once and whose InitProducerId answers are scripted; the batches that reached the broker
are decoded to read their producer id, epoch and base sequence.
"""

from __future__ import annotations

import grpc
import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import KafkaError, Producer
from samsa.client.producer_sequences import PRODUCER_EPOCH_MAX
from samsa.common.errors import ErrorCode
from samsa.common.record import codec
from samsa.v1 import broker_pb2

TOPIC = "events"
WAIT_S = 10
SETTINGS = {
    "bootstrap.servers": "fake:9092",  # never dialled: the metadata is fake
    "enable.idempotence": True,
    "linger.ms": 0,
    "retry.backoff.ms": 1,
}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=1)
    fake.install(monkeypatch)
    return fake


def identities(cluster: FakeCluster) -> list[tuple[int, int, int]]:
    """(producer id, epoch, base sequence) of every batch the broker received, in order."""
    return [
        (b.header.producer_id, b.header.producer_epoch, b.header.base_sequence)
        for _, _, b in cluster.brokers[1].received
    ]


def refuse_once(cluster: FakeCluster, code: ErrorCode) -> None:
    """The broker answers `code` to the first batch it receives, then appends as usual."""
    refused: list[codec.RecordBatch] = []

    def hook(topic: str, partition: int, batch: codec.RecordBatch):
        if refused:
            return None
        refused.append(batch)
        return broker_pb2.ProduceResponse.PartitionResponse(error_code=code)

    cluster.brokers[1].answer_hook = hook


def send_three(cluster: FakeCluster) -> list[int]:
    with Producer(SETTINGS) as producer:
        offsets = [
            producer.send(TOPIC, b"r%d" % n, partition=0).result(timeout=WAIT_S).offset
            for n in range(3)
        ]
    assert cluster.log(TOPIC, 0) == [b"r0", b"r1", b"r2"]
    return offsets


def test_the_first_batch_waits_for_a_producer_id_then_sequences_run_on(cluster: FakeCluster):
    assert send_three(cluster) == [0, 1, 2]
    assert cluster.init_producer_id_calls == 1
    assert identities(cluster) == [(101, 0, 0), (101, 0, 1), (101, 0, 2)]


def test_init_producer_id_is_retried_while_the_broker_says_retriable(cluster: FakeCluster):
    busy = broker_pb2.InitProducerIdResponse(
        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
    )
    cluster.init_producer_id_answers += [busy, busy]
    send_three(cluster)
    assert cluster.init_producer_id_calls == 3
    assert identities(cluster)[0] == (103, 0, 0)


def test_a_sequence_reset_bumps_the_epoch_without_asking_a_broker(cluster: FakeCluster):
    refuse_once(cluster, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    send_three(cluster)
    assert cluster.init_producer_id_calls == 1
    assert identities(cluster) == [(101, 0, 0), (101, 1, 0), (101, 1, 1), (101, 1, 2)]


def test_an_epoch_that_would_pass_int16_asks_for_a_new_producer_id(cluster: FakeCluster):
    cluster.init_producer_id_answers.append(
        broker_pb2.InitProducerIdResponse(producer_id=7, producer_epoch=PRODUCER_EPOCH_MAX)
    )
    refuse_once(cluster, ErrorCode.UNKNOWN_PRODUCER_ID)
    send_three(cluster)
    assert cluster.init_producer_id_calls == 2
    assert identities(cluster)[:2] == [(7, PRODUCER_EPOCH_MAX, 0), (102, 0, 0)]


def test_invalid_producer_epoch_asks_for_a_new_producer_id(cluster: FakeCluster):
    refuse_once(cluster, ErrorCode.INVALID_PRODUCER_EPOCH)
    with Producer(SETTINGS) as producer:
        with pytest.raises(KafkaError) as fenced:
            producer.send(TOPIC, b"fenced", partition=0).result(timeout=WAIT_S)
        assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert producer.send(TOPIC, b"after", partition=0).result(timeout=WAIT_S).offset == 0
    assert cluster.init_producer_id_calls == 2
    assert identities(cluster) == [(101, 0, 0), (102, 0, 0)]


def test_a_non_retriable_init_producer_id_answer_fails_the_records(cluster: FakeCluster):
    cluster.init_producer_id_answers.append(
        broker_pb2.InitProducerIdResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="no", producer_id=-1
        )
    )
    with (
        Producer(SETTINGS) as producer,
        pytest.raises(KafkaError) as failed,
    ):
        producer.send(TOPIC, b"x", partition=0).result(timeout=WAIT_S)
    assert failed.value.code == ErrorCode.INVALID_REQUEST
    assert cluster.brokers[1].received == []


def test_an_init_producer_id_answer_with_an_unknown_code_fails_the_records(cluster: FakeCluster):
    """A newer broker's code this client does not know reads as UNKNOWN_SERVER_ERROR, as Kafka's
    clients read it: not retried (before, a ValueError in every turn of the driver, which asked
    again for ever while the records waited for delivery.timeout.ms)."""
    cluster.init_producer_id_answers += [
        broker_pb2.InitProducerIdResponse(error_code=999, error_message="new", producer_id=-1)
        for _ in range(1_000)
    ]
    producer = Producer(SETTINGS)
    try:
        with pytest.raises(KafkaError) as failed:
            producer.send(TOPIC, b"x", partition=0).result(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)
    assert failed.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "error code 999: new" in str(failed.value)
    assert cluster.init_producer_id_calls == 1
    assert cluster.brokers[1].received == []


@pytest.mark.parametrize("status", [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN])
def test_init_producer_id_cut_off_by_a_dying_broker_is_retried(
    cluster: FakeCluster, status: grpc.StatusCode
):
    """A broker killed mid-call ends it with INTERNAL ("Internal error from Core") or UNKNOWN,
    not an answer: the call is asked again, as a produce on a broken stream is, rather than
    failing every buffered record as UNSUPPORTED_VERSION."""
    answer = cluster.init_producer_id

    def cut_off_once() -> broker_pb2.InitProducerIdResponse:
        if cluster.init_producer_id_calls == 0:
            cluster.init_producer_id_calls += 1
            metadata = grpc.aio.Metadata()
            raise grpc.aio.AioRpcError(status, metadata, metadata, "the broker went away")
        return answer()

    cluster.init_producer_id = cut_off_once  # type: ignore[method-assign]
    assert send_three(cluster) == [0, 1, 2]
    assert cluster.init_producer_id_calls == 2
