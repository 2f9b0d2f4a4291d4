"""Goal: a commit made before this member was fenced is never sent again under the epoch of the
member's next incarnation. A commit refused with STALE_MEMBER_EPOCH is retried with the member's
new epoch when it still owns the partitions it owned when the commit began
(test_client_group_commit_retry.py); but when the member was fenced (or expired) meanwhile, lost
everything and rejoined under the same member id, it may own the same partitions again while the
offsets in hand are from before: another member owned them in between and committed further.
The retry passes the coordinator's epoch check (KIP-848 checks the epoch alone) and moves the
committed offset back, so the partitions' next owner processes again what was already done.

The same holds for a commit made from on_partitions_revoked as the member leaves: once the leave
was answered, the member is outside the group protocol, and the retry must not be sent as a
commit from outside the group (no member id), which the coordinator takes once the group is
empty.

Method: a GroupDriver whose coordinator calls are a fake answering the first OffsetCommit
STALE_MEMBER_EPOCH; before it answers, the real member state machine is fenced, runs on_lost,
rejoins and is given the same partition at a new epoch (or finishes leaving), as heartbeats and
poll() would do.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from stale_once_coordinator import StaleOnceCoordinator

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import CommitFailedError, GroupDriver
from samsa.client.group_member import GroupMember, MemberState, Subscription
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

T = "orders"
NOW = 1_000


def answered(member: GroupMember, epoch: int, partitions: list[int]) -> None:
    """The member sends its heartbeat, which is answered `epoch` with `partitions` of T, and
    runs the listener calls that follow (as poll() does)."""
    assert member.heartbeat_request(NOW) is not None
    answer = c.ConsumerGroupHeartbeatResponse(member_epoch=epoch, heartbeat_interval_ms=1)
    answer.assignment.topics.add(topic=T, partitions=partitions)
    member.on_heartbeat_answer(answer, NOW)
    while member.begin_callback() is not None:
        member.on_callback_done(NOW)


def fenced_and_rejoined(member: GroupMember) -> None:
    """The member is fenced (its session expired), runs on_partitions_lost, rejoins under the
    same member id and is given partition 0 again at a later epoch."""
    assert member.heartbeat_request(NOW) is not None
    member.on_heartbeat_failed(ErrorCode.UNKNOWN_MEMBER_ID, "expired", NOW)
    assert member.state is MemberState.FENCED
    while member.begin_callback() is not None:
        member.on_callback_done(NOW)
    assert member.state is MemberState.JOINING
    answered(member, 9, [0])
    assert member.owned == frozenset({(T, 0)}) and member.member_epoch == 9


def member_at_epoch_5() -> GroupDriver:
    """A group driver whose member owns partition 0 of T at epoch 5."""
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": "x:1", "group.id": "g", "retry.backoff.ms": 1}
    )
    group = GroupDriver(
        config, threading.Lock(), FetchState(config), ["x:1"], AioChannels(), lambda: None
    )
    group.member.subscribe(Subscription(topics=frozenset({T})), NOW)
    answered(group.member, 5, [0])
    assert group.member.owned == frozenset({(T, 0)}) and group.member.member_epoch == 5
    return group


def test_a_commit_from_before_a_fencing_is_not_sent_under_the_next_incarnation() -> None:
    group = member_at_epoch_5()
    fake = StaleOnceCoordinator(lambda: fenced_and_rejoined(group.member))
    group._coordinator = fake  # type: ignore[assignment]
    with pytest.raises(CommitFailedError, match="lost its partitions"):
        asyncio.run(group.commit({(T, 0): OffsetAndMetadata(100)}))
    assert [r.member_epoch for r in fake.requests] == [5], "nothing sent at the new incarnation"


def test_a_commit_from_on_revoked_is_not_sent_from_outside_the_group_once_left() -> None:
    group = member_at_epoch_5()
    member = group.member
    member.unsubscribe(NOW)
    assert member.state is MemberState.LEAVING and member.begin_callback() is not None

    def revoked_and_left() -> None:
        """on_partitions_revoked returns, and the leave heartbeat is answered."""
        member.on_callback_done(NOW)
        assert member.heartbeat_request(NOW) is not None
        member.on_heartbeat_answer(c.ConsumerGroupHeartbeatResponse(member_epoch=-1), NOW)
        assert member.state is MemberState.UNSUBSCRIBED

    fake = StaleOnceCoordinator(revoked_and_left)
    group._coordinator = fake  # type: ignore[assignment]
    with pytest.raises(CommitFailedError):
        asyncio.run(group.commit({(T, 0): OffsetAndMetadata(100)}))
    assert [r.member_id for r in fake.requests] == [member.settings.member_id]
