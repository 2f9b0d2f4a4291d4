"""Goal: a produce answer that names the partition's new leader (KIP-951: `current_leader` with
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH) moves that partition's leader in the client's
metadata at once — only when its leader epoch is newer and the broker's endpoint is known — and
the batch is retried to it with no backoff and no metadata refresh; so is every other batch that
was in flight to the old leader and comes back naming the same one (a rolling restart measured
100 ms stalls, the retry backoff, when only the first answer counted).

Method: `ClusterMetadata.update_leader` on a hand-filled view (no controller is called), then the
sync Producer against two in-memory brokers (fake_produce_cluster.py) where the partition's old
leader answers NOT_LEADER_OR_FOLLOWER naming the other broker, with a retry backoff far longer
than the test's wait: only the no-backoff retry can deliver the record in time.
"""

from __future__ import annotations

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import Producer
from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.common.errors import ErrorCode
from samsa.common.record import codec
from samsa.v1 import broker_pb2

TOPIC = "events"
PARTITION = (TOPIC, 0)
WAIT_S = 10


def not_the_leader(topic: str, partition: int, batch: codec.RecordBatch):  # type: ignore[no-untyped-def]
    """Broker 1's answer to everything: broker 2 leads now, at epoch 1."""
    return broker_pb2.ProduceResponse.PartitionResponse(
        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
        current_leader=broker_pb2.LeaderIdAndEpoch(leader_id=2, leader_epoch=1),
    )


def metadata_view() -> ClusterMetadata:
    metadata = ClusterMetadata(["localhost:9092"], Channels())
    metadata.endpoints = {1: "host-1:9092", 2: "host-2:9092"}
    metadata.leaders = {PARTITION: 1}
    metadata.leader_epochs = {PARTITION: 4}
    return metadata


def test_a_newer_leader_with_a_known_endpoint_is_taken_at_once():
    metadata = metadata_view()
    leaders_before = metadata.leaders
    assert metadata.update_leader(PARTITION, 2, 5)
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (2, 5)
    assert leaders_before == {PARTITION: 1}, (
        "readers keep the dict they hold: a new one is swapped in"
    )


def test_the_same_leader_named_again_is_still_a_retry_at_once():
    metadata = metadata_view()
    assert metadata.update_leader(PARTITION, 2, 5)
    assert metadata.update_leader(PARTITION, 2, 5), "a second batch's answer: the same leader"
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (2, 5)


@pytest.mark.parametrize(
    ("leader_id", "leader_epoch"),
    [(2, 4), (2, 3), (3, 9), (-1, 9)],
    ids=["same epoch", "older epoch", "unknown broker", "no leader"],
)
def test_a_stale_or_unreachable_leader_is_ignored(leader_id: int, leader_epoch: int):
    metadata = metadata_view()
    assert not metadata.update_leader(PARTITION, leader_id, leader_epoch)
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (1, 4)


def test_the_producer_retries_to_the_named_leader_without_backoff(monkeypatch: pytest.MonkeyPatch):
    cluster = FakeCluster(TOPIC, partitions=1, brokers=2)
    cluster.install(monkeypatch)

    cluster.brokers[1].answer_hook = not_the_leader
    settings = {
        "bootstrap.servers": "fake:9092",  # never dialled: the metadata is fake
        "linger.ms": 0,
        "retry.backoff.ms": 60_000,  # a backed-off retry would not arrive within WAIT_S
        "retry.backoff.max.ms": 60_000,
    }
    with Producer(settings) as producer:
        metadata = producer.send(TOPIC, b"moved", partition=0).result(timeout=WAIT_S)
    assert metadata.offset == 0
    assert cluster.brokers[2].logs[PARTITION] == [b"moved"]
    assert len(cluster.brokers[1].received) == 1
    assert cluster.metadata is not None
    assert cluster.metadata.leaders[PARTITION] == 2 and cluster.metadata.stale_marks == 0


def test_every_batch_in_flight_to_the_old_leader_is_retried_without_backoff(
    monkeypatch: pytest.MonkeyPatch,
):
    cluster = FakeCluster(TOPIC, partitions=1, brokers=2)
    cluster.install(monkeypatch)

    cluster.brokers[1].answer_hook = not_the_leader
    cluster.brokers[1].answer_in_groups_of = 3  # all three in flight, then three answers
    settings = {
        "bootstrap.servers": "fake:9092",
        "linger.ms": 50,  # the three records wait together, then go at once
        "batch.size": 1,  # a batch of its own each (~100 bytes)
        "max.request.size": 150,  # and a request of its own each: three answers
        "retry.backoff.ms": 60_000,
        "retry.backoff.max.ms": 60_000,
    }
    with Producer(settings) as producer:
        futures = [producer.send(TOPIC, b"moved-%d" % i, partition=0) for i in range(3)]
        offsets = [future.result(timeout=WAIT_S).offset for future in futures]
    assert offsets == [0, 1, 2]
    assert cluster.brokers[2].logs[PARTITION] == [b"moved-0", b"moved-1", b"moved-2"]
    assert cluster.brokers[1].requests == 3, "each batch was in flight to the old leader on its own"
    assert cluster.metadata is not None and cluster.metadata.stale_marks == 0
