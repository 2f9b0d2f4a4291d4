"""Goal: a metadata refresh never takes a partition back to an older leader epoch than the client
knows for the same topic (Kafka's KIP-320 rule in Metadata.updateLatestMetadata). A produce or
fetch answer names the new leader at a newer epoch (KIP-951, `update_leader`); a refresh answered
by a server behind that (a broker cut off from the controllers answers from its last image, for
as long as it runs) put the old leader and epoch back, so the client went to the old leader again
after every refresh, and a consumer, which refreshes after each such refusal, alternated for good.
A topic deleted and created again (another topic id) starts its epochs over and is taken as is.

Method: `ClusterMetadata.refresh` over a fake `read` that answers DescribeTopics from a list
(no server is called).
"""

from __future__ import annotations

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.v1 import controller_pb2 as c

TOPIC = "orders"
PARTITION = (TOPIC, 0)
OLD_ID, NEW_ID = b"o" * 16, b"n" * 16


def answer(leader: int, epoch: int, topic_id: bytes = OLD_ID) -> c.DescribeTopicsResponse:
    response = c.DescribeTopicsResponse()
    response.broker_endpoints.update({1: "host-1:9092", 2: "host-2:9092"})
    response.status.metadata_offset = 10
    topic = response.topics.add(name=TOPIC, topic_id=topic_id)
    topic.partitions.add(partition=0, leader=leader, leader_epoch=epoch, replicas=[1, 2])
    topic.partitions.add(partition=1, leader=2, leader_epoch=3, replicas=[1, 2])
    return response


def metadata_answering(*answers: c.DescribeTopicsResponse) -> ClusterMetadata:
    metadata = ClusterMetadata(["localhost:9092"], Channels())
    metadata.keep(lambda: [TOPIC])  # as a consumer assigned it: every refresh describes it
    queue = list(answers)
    metadata.read = lambda method, request, timeout_s=5.0: queue.pop(0)  # type: ignore[method-assign]
    metadata.refresh([TOPIC])
    return metadata


def test_a_refresh_from_a_lagging_server_keeps_the_leader_a_broker_named() -> None:
    metadata = metadata_answering(answer(1, 5), answer(1, 5))
    assert metadata.update_leader(PARTITION, 2, 6)
    metadata.refresh()
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (2, 6)
    assert metadata.leaders[(TOPIC, 1)] == 2, "the other partitions are taken as answered"


def test_a_newer_or_equal_epoch_is_taken() -> None:
    metadata = metadata_answering(answer(1, 5), answer(2, 7))
    assert metadata.update_leader(PARTITION, 2, 6)
    metadata.refresh()
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (2, 7)


def test_an_offline_partition_known_at_a_newer_epoch_stays_leaderless() -> None:
    metadata = metadata_answering(answer(1, 5), answer(-1, 6), answer(1, 5))
    metadata.refresh()
    assert PARTITION not in metadata.leaders
    metadata.refresh()  # a lagging server's older view: the leader it names is gone
    assert PARTITION not in metadata.leaders and metadata.leader_epochs[PARTITION] == 6


def test_a_topic_created_again_starts_its_epochs_over() -> None:
    metadata = metadata_answering(answer(1, 5), answer(2, 0, topic_id=NEW_ID))
    metadata.refresh()
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (2, 0)
    assert metadata.topic_ids[TOPIC] == NEW_ID


class MergedWhileALeaderMoves:
    """A DescribeTopics answer whose topics, when the refresh's merge loop reads them (the
    second read of each merge), first let `update_leader` run, as the sender thread may between
    the merge's reads of the view and its swap."""

    def __init__(self, response: c.DescribeTopicsResponse, metadata: ClusterMetadata) -> None:
        self.response, self.metadata = response, metadata
        self.status, self.broker_endpoints = response.status, response.broker_endpoints
        self.reads = 0

    @property
    def topics(self) -> object:
        self.reads += 1
        if self.reads == 2:
            assert self.metadata.update_leader(PARTITION, 2, 6)
        return self.response.topics


def test_a_leader_named_while_a_refresh_merges_is_kept() -> None:
    # The refresh's merge had copied the epochs (5) before the new leader was named, and its
    # swap put leader 2 back at epoch 5: the next lagging answer at 5 then restored leader 1.
    metadata = metadata_answering(answer(1, 5))
    racing = MergedWhileALeaderMoves(answer(1, 5), metadata)
    metadata.describe_topics = lambda names, offset, timeout_s=5.0: racing  # type: ignore[method-assign,assignment,return-value]
    metadata.refresh()
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (2, 6)
    metadata.describe_topics = lambda names, offset, timeout_s=5.0: answer(1, 5)  # type: ignore[method-assign]
    metadata.refresh()
    assert (metadata.leaders[PARTITION], metadata.leader_epochs[PARTITION]) == (2, 6)
