"""Goal: auto-commit commits a partition's position once the partition came back to the consumer,
even at the very offset it auto-committed before the partition left (revoked, lost, left the
group, or unassigned with assign()). Its memory of what it last committed skipped positions that
had not moved since, and was never reset: after the member left, the group's offsets were reset
to 0 while it was empty, the member rejoined and consumed back to 15, and 15 was never
auto-committed ("committed already"), so a restart read 0..14 again. Kafka's auto-commit commits
every consumed position each interval; here the memory of a partition goes when the partition
leaves the consumer, and only positions that did not move while it stayed are skipped.

Method: a GroupDriver over a real FetchState and a pure GroupMember whose heartbeat answers the
test feeds; listener steps run as the facades run them (rebalance.begin_step / end_step); the
auto-commit is made due by moving the driver's due time. No cluster, no network.
"""

from __future__ import annotations

import threading

from rebalance_helpers import T, answer

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_driver import GroupDriver
from samsa.client.group_member import MemberState, Subscription
from samsa.client.rebalance import begin_step, end_step
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

P0 = (T, 0)
CONFIG = {"bootstrap.servers": "x:1", "group.id": "g", "auto.commit.interval.ms": 10}


def driver() -> GroupDriver:
    config = ConsumerConfig.from_dict(CONFIG)
    state = FetchState(config)
    return GroupDriver(config, threading.Lock(), state, ["x:1"], AioChannels(), lambda: None)


def due(group: GroupDriver) -> dict[tuple[str, int], int]:
    """What the auto-commit due now commits (offset by partition)."""
    offsets = group.auto_commit_due(group._auto_commit_due_ms)
    return {tp: at.offset for tp, at in (offsets or {}).items()}


def steps(group: GroupDriver, now: int) -> None:
    """Every listener step pending, as poll() runs them."""
    while (step := begin_step(group.member, group.state, auto_commit=True)) is not None:
        end_step(group.member, group.state, step, now)


def heartbeat(group: GroupDriver, reply: c.ConsumerGroupHeartbeatResponse, now: int) -> None:
    """The pending steps, one heartbeat and its answer, then the steps it calls for."""
    steps(group, now)
    m = group.member
    assert m.heartbeat_request(now) is not None
    m.on_heartbeat_answer(reply, now)
    steps(group, now)


def joined(group: GroupDriver, epoch: int, now: int) -> None:
    group.member.subscribe(Subscription(topics=frozenset({T})), now)
    heartbeat(group, answer(epoch, 0), now)
    heartbeat(group, answer(epoch, 0), now)
    assert group.member.state is MemberState.STABLE and group.state.assignment() == [P0]


def test_a_position_is_auto_committed_again_after_leaving_and_rejoining() -> None:
    group = driver()
    joined(group, 5, 0)
    group.state.seek(P0, 15)  # as if polled up to 15
    assert due(group) == {P0: 15}
    assert due(group) == {}, "nothing moved: nothing to commit"
    group.member.unsubscribe(10_000)  # leave: partition 0 is revoked
    heartbeat(group, c.ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=-1), 10_000)
    assert group.state.assignment() == [] and group.member.state is MemberState.UNSUBSCRIBED
    # Offsets reset to 0 while the group was empty; the member rejoins, reads 0..14 again.
    joined(group, 7, 20_000)
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}, "position 15 was never auto-committed (the group has 0)"


def test_a_position_is_auto_committed_again_after_a_revocation_and_reassignment() -> None:
    group = driver()
    joined(group, 5, 0)
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}
    heartbeat(group, answer(6), 10_000)  # revoked; another member may commit meanwhile
    assert group.state.assignment() == []
    heartbeat(group, answer(8, 0), 20_000)  # given back
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}


def test_a_position_is_auto_committed_again_after_the_partition_was_lost() -> None:
    group = driver()
    joined(group, 5, 0)
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}
    fenced = c.ConsumerGroupHeartbeatResponse(
        error_code=ErrorCode.FENCED_MEMBER_EPOCH, error_message="fenced"
    )
    heartbeat(group, fenced, 10_000)  # on_partitions_lost
    assert group.state.assignment() == []
    heartbeat(group, answer(9, 0), 20_000)
    heartbeat(group, answer(9, 0), 20_000)
    assert group.member.state is MemberState.STABLE
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}


def test_an_assigned_partition_is_auto_committed_again_after_assign_dropped_it() -> None:
    group = driver()
    group.state.assign([P0])
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}
    group.state.assign([])
    group.state.assign([P0])
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}
