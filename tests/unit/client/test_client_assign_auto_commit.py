"""Goal: a consumer that assign()s partitions with a group.id auto-commits its positions, every
auto.commit.interval.ms from poll() and once more at close(), from outside the group protocol
(member id "", epoch -1), as Kafka's consumer does: without it every restart re-read what had
been processed. With enable.auto.commit=false nothing is committed; a subscribed member's
close-time commit is its revocation's, not this one.

Method: a GroupDriver over a real FetchState whose coordinator calls are a fake that records
each OffsetCommit and answers NONE; time is the driver's own monotonic clock, moved past the
interval by resetting its due time.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_driver import GroupDriver
from samsa.client.group_member import MemberState
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

T = "orders"


class RecordingCoordinator:
    """Keeps every OffsetCommit and answers each partition `code` (NONE unless told)."""

    def __init__(self, code: ErrorCode = ErrorCode.NONE) -> None:
        self.requests: list[c.OffsetCommitRequest] = []
        self.code = code

    async def ask(self, method: str, request: Any, error_of: Any) -> c.OffsetCommitResponse:
        assert method == "OffsetCommit"
        self.requests.append(c.OffsetCommitRequest.FromString(request.SerializeToString()))
        response = c.OffsetCommitResponse()
        for topic in request.topics:
            result = response.topics.add(name=topic.name)
            for partition in topic.partitions:
                result.partitions.add(partition=partition.partition, error_code=self.code)
        return response


def assigned_driver(**settings: object) -> tuple[GroupDriver, RecordingCoordinator]:
    config = ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "group.id": "g", **settings})
    state = FetchState(config)
    group = GroupDriver(config, threading.Lock(), state, ["x:1"], AioChannels(), lambda: None)
    fake = RecordingCoordinator()
    group._coordinator = fake  # type: ignore[assignment]
    state.assign([(T, 0), (T, 1)])
    state.seek((T, 0), 40)
    state.seek((T, 1), 7)
    return group, fake


def committed(request: c.OffsetCommitRequest) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition): p.committed_offset for t in request.topics for p in t.partitions}


def test_assigned_positions_are_auto_committed_when_due_and_at_close() -> None:
    group, fake = assigned_driver()
    assert group.member.state is MemberState.UNSUBSCRIBED
    assert group.auto_commit_due(0) is None, "not due before auto.commit.interval.ms"
    due = group.auto_commit_due(group._auto_commit_due_ms)
    assert due is not None and {tp: at.offset for tp, at in due.items()} == {
        (T, 0): 40,
        (T, 1): 7,
    }
    asyncio.run(group.commit_in_background(due))
    assert (fake.requests[0].member_id, fake.requests[0].member_epoch) == ("", -1)

    group.state.seek((T, 1), 9)  # only partition 1 moved since
    asyncio.run(group.commit_at_close())
    assert [committed(r) for r in fake.requests] == [{(T, 0): 40, (T, 1): 7}, {(T, 1): 9}]
    asyncio.run(group.commit_at_close())
    assert len(fake.requests) == 2, "nothing moved: nothing sent"


def test_nothing_is_committed_without_auto_commit() -> None:
    group, fake = assigned_driver(**{"enable.auto.commit": False})
    assert group.auto_commit_due(group._auto_commit_due_ms + 10**9) is None
    asyncio.run(group.commit_at_close())
    assert fake.requests == []


def test_a_subscribed_member_commits_at_close_through_its_revocation_only() -> None:
    group, fake = assigned_driver()
    group.member.state = MemberState.STABLE
    group.member.member_epoch = 3
    asyncio.run(group.commit_at_close())
    assert fake.requests == []
