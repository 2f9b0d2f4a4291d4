"""The pure partition-replica core: roles set by the metadata log, the high watermark on both sides
of replication, and the leader's ISR proposals (the maximal ISR). Offsets and times are numbers."""

from __future__ import annotations

from samsa.metadata.image import PartitionState
from samsa.services.broker.replica.partition_replica import PartitionReplica, Role

ME = 1
REPLICAS = (1, 2, 3)
PROPOSAL = {"eligible": {1, 2, 3}, "lag_max_ms": 1000, "replica_fetch_ms": {}}


def state(isr: tuple[int, ...] = REPLICAS, partition_epoch: int = 0) -> PartitionState:
    return PartitionState(0, REPLICAS, isr, ME, 0, partition_epoch)


def leader(isr: tuple[int, ...] = REPLICAS, log_end: int = 0) -> PartitionReplica:
    replica = PartitionReplica(ME)
    replica.become_leader(0, state(isr), log_end, now_ms=0)
    return replica


def test_the_metadata_log_sets_the_role():
    replica = PartitionReplica(ME)
    assert replica.role is Role.OFFLINE and not replica.is_leader
    replica.become_leader(4, state(), log_end_offset=7, now_ms=0)
    assert replica.role is Role.LEADER and replica.leader_id == ME and replica.leader_epoch == 4
    assert replica.epoch_start_offset == 7 and replica.leading is not None
    replica.become_follower(2, 5, state())
    assert replica.role is Role.FOLLOWER and replica.leader_id == 2 and replica.leading is None
    replica.become_follower(-1, 6, state())
    assert replica.role is Role.OFFLINE, "no leader: the partition is offline"


def test_the_high_watermark_is_the_smallest_isr_end_and_never_goes_back():
    replica = leader()
    assert not replica.advance_high_watermark(10, 1), "followers have not fetched"
    replica.follower_fetched(2, 10, 10, now_ms=1)
    replica.follower_fetched(3, 6, 10, now_ms=1)
    assert replica.advance_high_watermark(10, 1) and replica.high_watermark == 6
    replica.follower_fetched(3, 4, 10, now_ms=2)  # a follower that truncated
    assert not replica.advance_high_watermark(10, 1) and replica.high_watermark == 6
    replica.state_changed(state(isr=(1, 2), partition_epoch=1))
    assert replica.advance_high_watermark(10, 1) and replica.high_watermark == 10


def test_the_high_watermark_stands_still_below_min_insync_replicas():
    replica = leader(isr=(1,))
    assert not replica.advance_high_watermark(10, 2)
    assert replica.high_watermark == 0
    assert replica.advance_high_watermark(10, 1) and replica.high_watermark == 10


def test_a_follower_that_left_the_isr_counts_again_only_after_a_new_fetch():
    replica = leader()
    replica.follower_fetched(2, 5, 5, now_ms=0)
    replica.follower_fetched(3, 5, 5, now_ms=0)
    replica.state_changed(state(isr=(1, 3), partition_epoch=1))
    replica.state_changed(state(isr=(1, 2, 3), partition_epoch=2))
    assert not replica.advance_high_watermark(5, 1), "2's progress from before it left is gone"
    replica.follower_fetched(2, 5, 5, now_ms=1)
    assert replica.advance_high_watermark(5, 1) and replica.high_watermark == 5


def test_a_proposed_expansion_holds_the_high_watermark_back_until_settled():
    replica = leader(isr=(1, 2))
    replica.follower_fetched(2, 10, 10, now_ms=0)
    replica.follower_fetched(3, 6, 10, now_ms=0)
    replica.proposal_sent((1, 2, 3), partition_epoch=0)
    assert replica.maximal_isr == (1, 2, 3)
    assert replica.advance_high_watermark(10, 1) and replica.high_watermark == 6, "3 counts"
    replica.proposal_refused(partition_epoch=1)
    assert replica.proposed_isr is not None, "a refusal at another partition epoch settles nothing"
    replica.proposal_refused(partition_epoch=0)
    assert replica.proposed_isr is None and replica.maximal_isr == (1, 2)
    assert replica.advance_high_watermark(10, 1) and replica.high_watermark == 10


def test_the_metadata_log_settles_a_proposal_and_min_isr_counts_the_committed_isr():
    replica = leader(isr=(1,))
    replica.follower_fetched(2, 3, 3, now_ms=0)
    replica.proposal_sent((1, 2), partition_epoch=0)
    assert not replica.advance_high_watermark(3, 2), "the proposal is not yet committed"
    replica.state_changed(state(isr=(1, 2), partition_epoch=1))
    assert replica.proposed_isr is None
    assert replica.advance_high_watermark(3, 2) and replica.high_watermark == 3


def test_an_accepted_change_is_not_proposed_again_until_the_metadata_log_shows_it():
    replica = leader(log_end=5)
    replica.follower_fetched(2, 5, 5, now_ms=1000)
    replica.advance_high_watermark(5, 1)
    proposal = replica.isr_to_propose(now_ms=1500, log_end_offset=5, **PROPOSAL)
    assert proposal == (1, 2), "3 has not fetched for longer than the lag allows"
    replica.proposal_sent(proposal, partition_epoch=0)
    replica.proposal_accepted(partition_epoch=1)
    assert replica.isr_to_propose(now_ms=1500, log_end_offset=5, **PROPOSAL) is None
    replica.state_changed(state(isr=(1, 2), partition_epoch=1))
    assert replica.isr_to_propose(now_ms=1500, log_end_offset=5, **PROPOSAL) is None
    replica.follower_fetched(3, 5, 5, now_ms=1501)
    assert replica.isr_to_propose(now_ms=1501, log_end_offset=5, **PROPOSAL) == (1, 2, 3)


def test_an_expansion_whose_request_failed_is_proposed_again_as_it_was():
    replica = leader(isr=(1, 2))
    replica.proposal_sent((1, 2, 3), partition_epoch=0)
    assert replica.isr_to_propose(now_ms=0, log_end_offset=0, **PROPOSAL) == (1, 2, 3)


def test_a_new_leadership_forgets_the_last_ones_proposal():
    replica = leader(isr=(1, 2))
    replica.proposal_sent((1, 2, 3), partition_epoch=0)
    replica.become_leader(1, state(isr=(1, 2), partition_epoch=1), 0, now_ms=0)
    assert replica.proposed_isr is None
    replica.proposal_sent((1, 2, 3), partition_epoch=1)
    replica.become_follower(2, 2, state())
    assert replica.proposed_isr is None


def test_only_a_leader_takes_follower_fetches_and_has_a_low_watermark():
    replica = PartitionReplica(ME)
    replica.become_follower(2, 0, state())
    assert not replica.follower_fetched(3, 5, 5, now_ms=0, log_start_offset=4)
    assert replica.low_watermark(0) == -1
    assert replica.isr_to_propose(now_ms=0, log_end_offset=5, **PROPOSAL) is None
    assert not replica.advance_high_watermark(5, 1)


def test_a_follower_takes_the_leaders_high_watermark_within_its_own_log():
    replica = PartitionReplica(ME)
    replica.become_follower(2, 0, state())
    assert replica.take_leader_high_watermark(10, 0, 7) and replica.high_watermark == 7
    assert not replica.take_leader_high_watermark(9, 0, 7), "still capped at 7: no move"
    assert replica.take_leader_high_watermark(54, 61, 63) and replica.high_watermark == 61


def test_a_truncated_log_keeps_the_high_watermark_within_it():
    replica = PartitionReplica(ME, high_watermark=9)
    assert replica.log_changed(0, 5) and replica.high_watermark == 5
    assert not replica.log_changed(0, 8)
    assert replica.log_changed(6, 8) and replica.high_watermark == 6, "a new log start"
