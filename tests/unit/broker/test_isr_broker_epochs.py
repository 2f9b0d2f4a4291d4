"""Goal: the leader's half of KIP-903. Each AlterPartition names every proposed member's broker
epoch as the leader saw it fetch (its own: the request's), so that the controller can refuse a
joiner that registered again since (it may have lost what its previous incarnation fetched);
a proposal sent again carries the epochs it was decided on, not ones a restart brought since;
and an INELIGIBLE_REPLICA answer is a refusal like any other: the high watermark stops waiting
for the joiner, and the leader proposes again from fresh state once its metadata and the
joiner's fetches show the new registration.

Method: broker 1's `PartitionHost` over a real log, read by its own `PartitionReader` as the
followers' fetches are (test_replication_review.py's `Leader`), the ISR manager's
`decide_proposals`, `proposal_requests` and `settle_proposals`, and the controller's pure
`alter_partition` over images made by its own decisions. The leader applies the controller's
image only when a test says so: that is how its metadata falls behind.
"""

from __future__ import annotations

from pathlib import Path

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.broker.replica.isr_manager import (
    Proposal,
    decide_proposals,
    proposal_requests,
    settle_proposals,
)
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from tests.unit.broker.replication_cluster import KEY, TOPIC, commit, heartbeat, registered
from tests.unit.broker.test_replication_review import LAG_MS, Leader


def shrunk(tmp_path: Path) -> tuple[Leader, MetadataImage, int, int]:
    """The leader with ISR (leader, in_sync) and 5 records both hold, and `joiner` outside the
    ISR having fetched all 5 under its first registration. Returns the leader, the controller's
    image (applied by the leader), in_sync and joiner."""
    leader = Leader(tmp_path)
    in_sync, joiner = leader.followers
    image = leader.shrink_isr_to(in_sync)
    leader.produce(5, now_ms=0)
    leader.fetched_by(in_sync, 5, now_ms=10)
    leader.fetched_by(joiner, 5, now_ms=10)
    assert leader.hosted.high_watermark == 5
    return leader, image, in_sync, joiner


def restarted(image: MetadataImage, broker_id: int) -> MetadataImage:
    """The controller's image after `broker_id` lost power, registered again and was unfenced."""
    image = registered(image, broker_id, "after-power-loss", now_ms=20)
    image = heartbeat(image, broker_id, image.end_offset)
    assert not image.brokers[broker_id].fenced
    return image


def propose(leader: Leader, now_ms: int) -> tuple[Proposal, c.AlterPartitionRequest]:
    (decided,) = decide_proposals(leader.host, {KEY}, now_ms=now_ms, lag_max_ms=LAG_MS)
    own_epoch = leader.host.image.brokers[leader.state.leader].broker_epoch
    (request,) = proposal_requests(leader.host, own_epoch, [decided])
    return decided, request


def epochs_named(request: c.AlterPartitionRequest) -> dict[int, int]:
    (item,) = request.partitions
    named = {member.broker_id: member.broker_epoch for member in item.new_isr_with_epochs}
    assert list(named) == list(item.new_isr), "one entry per member, in new_isr's order"
    return named


def test_a_proposal_names_each_members_broker_epoch_as_seen_in_its_fetches(tmp_path: Path):
    leader, image, in_sync, joiner = shrunk(tmp_path)
    me = leader.state.leader
    _, request = propose(leader, now_ms=20)
    assert epochs_named(request) == {
        me: request.broker_epoch,
        in_sync: image.brokers[in_sync].broker_epoch,
        joiner: image.brokers[joiner].broker_epoch,
    }
    (answer,) = cp.alter_partition(image, request).response.partitions
    assert answer.error_code == ErrorCode.NONE


def test_a_leader_behind_on_metadata_is_refused_and_proposes_again_after_it(tmp_path: Path):
    """The joiner restarted (its log lost the 5 records) and is unfenced; the leader has not
    applied that, so its own check passes on the previous incarnation's fetches. The controller
    refuses; once the leader applies the new registration it proposes nothing on the old
    fetches, and the joiner gets in again by fetching everything under the new one."""
    leader, image, _, joiner = shrunk(tmp_path)
    old_epoch = image.brokers[joiner].broker_epoch
    image = restarted(image, joiner)

    decided, request = propose(leader, now_ms=30)
    assert joiner in decided.isr and epochs_named(request)[joiner] == old_epoch
    refusal = cp.alter_partition(image, request)
    (answer,) = refusal.response.partitions
    assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA and not refusal.records
    assert settle_proposals(leader.host, [KEY], refusal.response) == ([], [KEY])
    assert leader.hosted.replica.proposed_isr is None
    assert leader.hosted.replica.maximal_isr == leader.hosted.isr, "no longer waits for it"

    leader.apply(image)  # the next metadata: the new registration
    assert leader.proposal(now_ms=40) is None, "fetches under the old registration"
    leader.fetched_by(joiner, 0, now_ms=50)  # the new incarnation starts over
    assert leader.proposal(now_ms=50) is None, "behind the high watermark"
    leader.fetched_by(joiner, 5, now_ms=60)
    _, request = propose(leader, now_ms=60)
    assert epochs_named(request)[joiner] == image.brokers[joiner].broker_epoch
    accepted = cp.alter_partition(image, request)
    assert accepted.response.partitions[0].error_code == ErrorCode.NONE
    assert joiner in commit(image, accepted).topics[TOPIC].partitions[0].isr


def test_a_proposal_sent_again_carries_the_epochs_it_was_decided_on(tmp_path: Path):
    """An expansion whose request failed is sent again as it was (the controller may have
    committed it). If the joiner restarted meanwhile and its new incarnation's first fetch was
    read under the new registration, the epoch its old fetches qualified under is the one to
    send: the new one would let the controller add a replica holding nothing."""
    leader, image, _, joiner = shrunk(tmp_path)
    old_epoch = image.brokers[joiner].broker_epoch
    propose(leader, now_ms=30)  # its request fails on the way: no answer
    image = leader.apply(restarted(image, joiner))
    leader.fetched_by(joiner, 0, now_ms=40)

    decided, request = propose(leader, now_ms=40)

    assert joiner in decided.isr, "sent again as it was"
    assert epochs_named(request)[joiner] == old_epoch
    (answer,) = cp.alter_partition(image, request).response.partitions
    assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA
