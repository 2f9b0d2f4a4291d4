"""Goal: while a leader's proposal to add a replica to the ISR is unsettled, its high watermark
waits for that replica too (Kafka's maximal ISR). The controller may commit the expansion and
elect the added replica before the leader applies the change; a record acknowledged in that
window must already be on it. The replication simulation found the window: the leader
acknowledged records up to offset 29 from its applied ISR while the controller's ISR already
held a replica whose log ended at 18.

Method: a PartitionHost (broker 1, the leader) over a real log in tmp_path, driven by images the
controller's own decisions build; followers 2 and 3 are only their fetches, read by the
leader's PartitionReader as a real fetch is. Proposals go through the ISR manager's
`proposal_requests`, `settle_proposals` and `decide_proposals`.
"""

from __future__ import annotations

import random
from pathlib import Path

from samsa.common.fetch_session_client import FetchParts, FetchPosition, fetch_request
from samsa.common.record.codec import build_batch
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.isr_manager import (
    Proposal,
    decide_proposals,
    proposal_requests,
    settle_proposals,
)
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.services.broker.requests.produce import produce
from samsa.services.controller import control_plane as cp
from samsa.v1 import broker_pb2
from samsa.v1 import controller_pb2 as c
from tests.unit.broker.replication_cluster import KEY, TOPIC, cluster_with_topic, commit

LEADER, IN_SYNC, ADDED = 1, 2, 3
NOW_MS = 1_000


def cluster() -> MetadataImage:
    """Brokers 1-3 and the topic with replicas (1, 2, 3) led by 1; min.insync.replicas=2."""
    image = cluster_with_topic({"min.insync.replicas": "2"}, random.Random(1))
    # The placement is the controller's (seeded): this seed puts the replicas in the order the
    # test names them.
    assert state_of(image).replicas == (LEADER, IN_SYNC, ADDED)
    return image


def state_of(image: MetadataImage) -> PartitionState:
    return image.topics[TOPIC].partitions[0]


def alter(image: MetadataImage, isr: tuple[int, ...], **fields: int) -> cp.ControlResult:  # type: ignore[type-arg]
    state = state_of(image)
    request = c.AlterPartitionRequest(
        broker_id=state.leader, broker_epoch=image.brokers[state.leader].broker_epoch
    )
    request.partitions.add(
        topic=TOPIC,
        partition=0,
        leader_epoch=fields.get("leader_epoch", state.leader_epoch),
        partition_epoch=fields.get("partition_epoch", state.partition_epoch),
        new_isr=isr,
    )
    return cp.alter_partition(image, request)


class Leader:
    """Broker 1's host, following the images the test commits."""

    def __init__(self, data_dir: Path) -> None:
        self.host = PartitionHost(data_dir, LEADER)
        self.image = MetadataImage.empty()

    def apply(self, image: MetadataImage) -> None:
        self.host.apply(image, partition_changes(self.host.image, image, LEADER), now_ms=NOW_MS)
        self.image = image

    @property
    def hosted(self) -> HostedPartition:
        hosted = self.host.get(*KEY)
        assert hosted is not None
        return hosted

    def produce(self, count: int) -> None:
        request = broker_pb2.ProduceRequest(acks=1)
        values = [b"r%d" % i for i in range(count)]
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=build_batch(values))
        response, _ = produce(self.host, request, NOW_MS, internal_write_refusal=None)
        assert response.topics[0].partitions[0].error_code == 0

    def fetched_by(self, replica: int, offset: int) -> None:
        """Follower `replica` fetches from `offset` (it holds everything before it)."""
        position = FetchPosition(offset, self.hosted.leader_epoch, -1, 1 << 20)
        parts = FetchParts(0, -1, True, {KEY: position}, ())
        request = fetch_request(parts, replica_id=replica, max_wait_ms=0, min_bytes=1)
        answer = broker_pb2.FetchResponse.PartitionResponse(partition=0)
        PartitionReader(self.host, request, NOW_MS).read(
            TOPIC, request.topics[0].partitions[0], answer
        )
        assert answer.error_code == 0, answer


def started(tmp_path: Path) -> tuple[Leader, MetadataImage]:
    """The leader with 6 records; 2 and 3 both hold the first 2; ISR (1, 2)."""
    image = cluster()
    image = commit(image, alter(image, (LEADER, IN_SYNC)))
    leader = Leader(tmp_path)
    leader.apply(image)
    assert leader.hosted.is_leader and leader.hosted.isr == (LEADER, IN_SYNC)
    leader.produce(2)
    leader.fetched_by(IN_SYNC, 2)
    leader.fetched_by(ADDED, 2)
    leader.produce(4)
    assert leader.hosted.high_watermark == 2
    return leader, image


def propose_adding(leader: Leader, image: MetadataImage) -> c.AlterPartitionRequest:
    state = state_of(image)
    isr = (LEADER, IN_SYNC, ADDED)
    epochs = leader.hosted.replica.isr_broker_epochs(isr)  # as 2 and 3 fetched (KIP-903)
    proposal = Proposal(
        TOPIC, 0, state.leader_epoch, state.partition_epoch, isr, broker_epochs=epochs
    )
    (request,) = proposal_requests(leader.host, image.brokers[LEADER].broker_epoch, [proposal])
    return request


def test_a_proposed_replica_holds_back_the_high_watermark_until_the_change_is_committed(
    tmp_path: Path,
) -> None:
    leader, image = started(tmp_path)
    request = propose_adding(leader, image)
    leader.fetched_by(IN_SYNC, 6)
    # The old ISR alone would allow 6; replica 3, which the controller may already have put in
    # the ISR (and could elect), holds 2.
    assert leader.hosted.high_watermark == 2

    committed = cp.alter_partition(image, request)
    image = commit(image, committed)
    assert state_of(image).isr == (LEADER, IN_SYNC, ADDED)
    accepted, refused = settle_proposals(leader.host, [KEY], committed.response)
    assert (accepted, refused) == ([KEY], [])
    leader.fetched_by(IN_SYNC, 6)
    assert leader.hosted.high_watermark == 2, "accepted is not yet applied: still waiting for 3"

    leader.apply(image)
    assert leader.hosted.replica.proposed_isr is None, "the metadata settled it"
    assert leader.hosted.isr == (LEADER, IN_SYNC, ADDED)
    leader.fetched_by(ADDED, 6)
    assert leader.hosted.high_watermark == 6


def test_a_refused_proposal_stops_holding_the_high_watermark(tmp_path: Path) -> None:
    leader, image = started(tmp_path)
    request = propose_adding(leader, image)
    # The controller refuses it at the same partition epoch (here: a leader epoch it does not
    # know), so it was not committed and never will be.
    request.partitions[0].leader_epoch += 1
    refusal = cp.alter_partition(image, request)
    assert refusal.response.partitions[0].error_code != 0 and not refusal.records
    settle_proposals(leader.host, [KEY], refusal.response)
    assert leader.hosted.replica.proposed_isr is None
    leader.fetched_by(IN_SYNC, 6)
    assert leader.hosted.high_watermark == 6


def test_an_unsettled_expansion_is_proposed_again_as_it_was(tmp_path: Path) -> None:
    leader, image = started(tmp_path)
    propose_adding(leader, image)
    # The request failed on the way (no answer): the next pass sends the same ISR, whatever
    # replica 3 did since, until the controller or the metadata log settles it.
    (again,) = decide_proposals(leader.host, {KEY}, now_ms=NOW_MS, lag_max_ms=10_000)
    assert again.isr == (LEADER, IN_SYNC, ADDED)
    assert again.partition_epoch == state_of(image).partition_epoch


def test_a_partition_change_from_elsewhere_settles_the_proposal(tmp_path: Path) -> None:
    leader, image = started(tmp_path)
    propose_adding(leader, image)
    # The controller changes the partition for another reason first (broker 2 fenced): the
    # proposal's partition epoch is gone, so it can never be committed.
    image = commit(image, cp.fence_brokers(image, [IN_SYNC]))
    leader.apply(image)
    assert leader.hosted.replica.proposed_isr is None
    assert leader.hosted.isr == (LEADER,)
