"""Goal: no acknowledged record is lost to one broker's power loss while min.insync.replicas > 1
(KIP-966). Replicas that leave the ISR by a change taking it below min.insync.replicas become
eligible leader replicas (the high watermark stands still from then on, so they hold every
committed record); one of them leads, alone in the ISR, when no ISR member is live; reaching
min.insync.replicas again clears them; a broker registering after an unclean shutdown leaves
them, and leaves an ISR it is the last member of when another replica is eligible. Single
copies (one replica, or min.insync.replicas 1) come back with their broker as before.

Method: the pure control plane with the real replay (test_control_plane's helpers); restarts
register under a new incarnation, with the previous broker epoch (a clean shutdown) or without
it (a crash). Each test builds the partition state the rule is about and checks leader, ISR and
eligible leader replicas after the decision.
"""

from __future__ import annotations

from test_control_plane import alter, alter_config, cluster, commit, create, heartbeat

from samsa.common.errors import ErrorCode
from samsa.metadata.image import NO_LEADER, MetadataImage, PartitionState
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c

MIN_ISR_2 = {"min.insync.replicas": "2"}


def restart(image: MetadataImage, broker_id: int, *, clean: bool) -> MetadataImage:
    """Broker `broker_id` registers as a new process; `clean`: its clean-shutdown file named
    its previous registration's epoch."""
    request = c.RegisterBrokerRequest(
        broker_id=broker_id, incarnation_id=f"after-{image.end_offset}", endpoint="h:1"
    )
    if clean:
        request.previous_broker_epoch = image.brokers[broker_id].broker_epoch
    result = cp.register_broker(
        image, request, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=1
    )
    return commit(image, result)


def fence(image: MetadataImage, *brokers: int) -> MetadataImage:
    for broker in brokers:
        image = commit(image, cp.fence_brokers(image, [broker]))
    return image


def state(image: MetadataImage) -> PartitionState:
    return image.topics["t"].partitions[0]


def report_corrupt(image: MetadataImage, broker_id: int):  # type: ignore[no-untyped-def]
    """`broker_id` reports its replica of t-0 corrupt from offset 7; the control plane's result."""
    request = c.ReportCorruptReplicaRequest(
        broker_id=broker_id,
        broker_epoch=image.brokers[broker_id].broker_epoch,
        topic="t",
        partition=0,
        first_corrupt_offset=7,
    )
    return cp.report_corrupt_replica(image, request)


def three_replicas(**configs: str) -> tuple[MetadataImage, int, list[int]]:
    """t-0 on brokers 1-3, all in sync; its leader and the two followers."""
    image, _ = create(cluster(3), "t", partitions=1, factor=3, **configs)
    leader = state(image).leader
    return image, leader, [r for r in state(image).replicas if r != leader]


def leader_alone(**configs: str) -> tuple[MetadataImage, int, list[int]]:
    """Both followers fenced at once for a moment (session expiry found both silent; they keep
    running, and every record): ISR (leader), both eligible."""
    image, leader, followers = three_replicas(**(MIN_ISR_2 | configs))
    return commit(image, cp.fence_brokers(image, followers)), leader, followers


def test_replicas_taken_below_min_isr_become_eligible_and_only_those() -> None:
    image, leader, (f1, f2) = three_replicas(**MIN_ISR_2)
    image = fence(image, f1)
    assert (state(image).isr, state(image).elr) == ((leader, f2), ()), "still at min ISR"
    image = fence(image, f2)
    assert state(image).isr == (leader,) and state(image).elr == (f2,), (
        "f1 left while the high watermark could still move: it is not eligible"
    )
    image, leader, (f1, f2) = leader_alone()
    assert set(state(image).elr) == {f1, f2}, "fenced together: both held the frozen watermark"


def test_a_leader_shrinking_the_isr_below_min_isr_keeps_the_dropped_replicas_eligible() -> None:
    image, leader, followers = three_replicas(**MIN_ISR_2)
    image, answer = alter(image, leader, [leader])
    assert answer.error_code == ErrorCode.NONE
    assert state(image).isr == (leader,)
    assert state(image).elr == tuple(r for r in state(image).replicas if r in followers)


def test_with_min_isr_1_there_are_never_eligible_leader_replicas() -> None:
    image, leader, followers = three_replicas()
    image = fence(image, *followers)
    assert state(image).isr == (leader,) and state(image).elr == ()


def test_rejoining_the_isr_leaves_the_elr_and_reaching_min_isr_clears_it() -> None:
    image, leader, (f1, f2) = three_replicas(**{"min.insync.replicas": "3"})
    image = fence(image, f1, f2)
    assert set(state(image).elr) == {f1, f2}
    image, _ = heartbeat(image, f1)
    image, answer = alter(image, leader, [leader, f1])
    assert answer.error_code == ErrorCode.NONE
    assert state(image).elr == (f2,), "f1 is back in the ISR; f2 still holds every record"
    image, _ = heartbeat(image, f2)
    image, _ = alter(image, leader, [leader, f1, f2])
    assert state(image).elr == ()
    image, _ = alter(image, leader, [leader, f1])
    assert state(image).elr == (f2,)
    image, _ = alter(image, leader, [leader, f1, f2])
    image, _ = alter_config(image, "t", ("min.insync.replicas", c.ALTER_CONFIG_OP_SET, "2"))
    image, _ = alter(image, leader, [leader, f1])
    assert state(image).elr == (), "at min ISR (2) the high watermark moves on without f2"


def test_lowering_min_isr_to_the_isr_clears_the_elr_and_raising_it_keeps_it() -> None:
    image, _, _ = leader_alone()
    elr = state(image).elr
    image, _ = alter_config(image, "t", ("min.insync.replicas", c.ALTER_CONFIG_OP_SET, "3"))
    assert state(image).elr == elr, "the high watermark stays frozen: they still hold it all"
    image, _ = alter_config(image, "t", ("min.insync.replicas", c.ALTER_CONFIG_OP_DELETE, ""))
    assert state(image).elr == (), "min ISR 1: the high watermark moves past them"


def test_an_eligible_replica_leads_alone_when_no_isr_member_is_live() -> None:
    image, leader, (f1, f2) = leader_alone()
    image, _ = heartbeat(image, f1)  # back in session; the leader has not re-added it yet
    image = fence(image, leader)
    assert state(image).leader == f1 and state(image).isr == (f1,)
    assert state(image).elr == tuple(r for r in state(image).replicas if r in (leader, f2)), (
        "the fenced leader held every record too; f2 stays eligible"
    )


def test_a_returning_eligible_replica_leads_an_offline_partition() -> None:
    image, leader, (_, f2) = leader_alone()
    image = fence(image, leader)
    assert state(image).leader == NO_LEADER and state(image).isr == (leader,)
    image, _ = heartbeat(image, f2)
    assert state(image).leader == f2 and state(image).isr == (f2,)


def test_the_last_isr_member_back_from_a_crash_is_not_elected_while_others_are_eligible() -> None:
    """The defect: it restarted without its unflushed tail and led; f1 and f2 truncated."""
    image, leader, followers = leader_alone()
    image = fence(image, leader)  # its session expired: power loss
    image = restart(image, leader, clean=False)
    assert state(image).isr == () and state(image).leader == NO_LEADER
    assert leader not in state(image).elr
    image, _ = heartbeat(image, leader)
    assert state(image).leader == NO_LEADER, "it may have lost acknowledged records"
    image, _ = heartbeat(image, followers[0])
    assert state(image).leader == followers[0]


def test_the_last_isr_member_back_from_a_crash_with_eligible_replicas_live_is_not_elected() -> None:
    """The replication review's scenario: the followers fenced one after the other (only the
    second is eligible), back in session while the leader is down."""
    image, leader, followers = three_replicas(**MIN_ISR_2)
    image = fence(image, *followers, leader)
    for follower in followers:
        image, _ = heartbeat(image, follower)  # back in session, data intact
    image = restart(image, leader, clean=False)
    image, _ = heartbeat(image, leader)
    assert state(image).leader in followers


def test_the_last_isr_member_back_from_a_clean_shutdown_stays_and_leads() -> None:
    image, leader, followers = leader_alone()
    image = fence(image, leader)
    image = restart(image, leader, clean=True)
    assert state(image).isr == (leader,) and set(state(image).elr) == set(followers)
    image, _ = heartbeat(image, leader)
    assert state(image).leader == leader


def test_a_crashed_eligible_replica_is_no_longer_eligible() -> None:
    image, leader, (f1, f2) = leader_alone()
    image = fence(image, leader)
    image = restart(image, f1, clean=False)
    assert state(image).elr == (f2,) and state(image).isr == (leader,)
    image, _ = heartbeat(image, f1)
    assert state(image).leader == NO_LEADER, "f1 may have lost records: not elected"
    image = restart(image, f2, clean=True)
    assert state(image).elr == (f2,), "a clean restart keeps it eligible"


def test_a_retried_registration_of_the_same_process_is_clean() -> None:
    image, leader, _ = leader_alone()
    image = fence(image, leader)
    request = c.RegisterBrokerRequest(
        broker_id=leader, incarnation_id=image.brokers[leader].incarnation_id, endpoint="h:1"
    )
    result = cp.register_broker(
        image, request, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=1
    )
    image = commit(image, result)
    assert state(image).isr == (leader,), "its page cache never went away"


def test_a_crashed_single_copy_comes_back_with_its_broker() -> None:
    image, _ = create(cluster(3), "t", partitions=1, factor=1)
    (only,) = state(image).replicas
    image = fence(image, only)
    image = restart(image, only, clean=False)
    assert state(image).isr == (only,)
    image, _ = heartbeat(image, only)
    assert state(image).leader == only, "nobody else holds anything: as before"


def test_the_last_eligible_replica_crashing_too_leaves_the_last_ones_known_in_the_isr() -> None:
    image, leader, (f1, f2) = leader_alone()
    image = restart(fence(image, leader), leader, clean=False)
    image = restart(image, f1, clean=False)
    image = restart(image, f2, clean=False)
    assert (state(image).isr, state(image).elr) == ((f2,), ()), (
        "every copy may have lost records: the last one known leads, not nobody"
    )


def test_an_eligible_replica_in_controlled_shutdown_is_not_elected() -> None:
    image, leader, (f1, f2) = three_replicas(**MIN_ISR_2)
    for follower in (f1, f2):
        image, answer = heartbeat(image, follower, want_shutdown=True)
        assert answer.should_shut_down
    assert state(image).elr == (f2,), "a controlled shutdown taking the ISR below min ISR"
    image = fence(image, leader)
    image, _ = heartbeat(image, f2)  # a routine heartbeat overtaken by the shutdown
    assert state(image).leader == NO_LEADER
    image = restart(image, f2, clean=True)
    image, _ = heartbeat(image, f2)
    assert state(image).leader == f2


def test_an_unclean_election_prefers_a_live_eligible_replica_and_clears_the_elr() -> None:
    configs = MIN_ISR_2 | {"unclean.leader.election.enable": "true"}
    image, leader, (f1, f2) = three_replicas(**configs)
    image, _ = alter(image, leader, [leader, f1])  # f2 out while at min ISR: not eligible
    image = fence(image, f1)
    assert state(image).elr == (f1,)
    image, _ = heartbeat(image, f1)
    image = fence(image, leader)
    assert state(image).leader == f1, "eligible, so elected before the out-of-sync f2"
    image = fence(image, f1)
    assert state(image).leader == f2 and state(image).isr == (f2,)
    assert state(image).elr == (), "its log now defines what is committed"


def test_a_corrupt_eligible_replica_leaves_the_elr_before_it_truncates() -> None:
    image, _, (f1, f2) = leader_alone()
    result = report_corrupt(image, f1)
    assert result.response.error_code == ErrorCode.NONE
    image = commit(image, result)
    assert state(image).elr == (f2,)
    assert result.response.partition_epoch == state(image).partition_epoch


def test_a_returning_eligible_replica_is_elected_cleanly_where_unclean_election_is_allowed() -> (
    None
):
    image, leader, (f1, f2) = leader_alone(**{"unclean.leader.election.enable": "true"})
    image = fence(image, leader)  # no replica live: offline
    epoch = state(image).leader_epoch
    image, _ = heartbeat(image, f1)
    assert state(image).leader == f1 and state(image).leader_epoch == epoch + 1
    assert set(state(image).elr) == {leader, f2}, "a clean election: the others stay eligible"


def test_turning_unclean_election_on_elects_an_out_of_sync_replica_and_clears_the_elr() -> None:
    image, leader, (f1, f2) = three_replicas(**MIN_ISR_2)
    image, _ = alter(image, leader, [leader, f1])  # f2 out while at min ISR: not eligible
    image = fence(image, f1, leader)
    assert (state(image).leader, state(image).elr) == (NO_LEADER, (f1,))
    on = ("unclean.leader.election.enable", c.ALTER_CONFIG_OP_SET, "true")
    image, _ = alter_config(image, "t", on)
    assert state(image).leader == f2 and state(image).isr == (f2,) and state(image).elr == ()


def test_describe_topics_shows_the_eligible_leader_replicas() -> None:
    image, _, followers = leader_alone()
    response = cp.describe_topics(image, c.DescribeTopicsRequest(names=["t"]))
    (described,) = response.topics[0].partitions
    assert set(described.eligible_leader_replicas) == set(followers)


def test_the_only_eligible_replica_of_an_empty_isr_is_refused_and_stays_eligible() -> None:
    image, leader, (f1, _) = three_replicas(**MIN_ISR_2)
    image, _ = alter(image, leader, [leader, f1])  # f2 out while at min ISR: not eligible
    image = fence(image, f1, leader)
    image = restart(image, leader, clean=False)  # it may have lost records: leaves the ISR
    assert (state(image).isr, state(image).elr) == ((), (f1,))
    result = report_corrupt(image, f1)
    assert result.response.error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert "best copy" in result.response.error_message and not result.records
    image, _ = heartbeat(image, f1)
    assert state(image).leader == f1, "still the clean copy to elect when it comes back"
