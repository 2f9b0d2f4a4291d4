"""Goal: a commit refused with STALE_MEMBER_EPOCH is sent again with the member's new epoch only
for partitions the member still owns. KIP-848 checks a commit against the member epoch alone, so
a retry that carried an offset of a partition revoked since (and maybe already reassigned and
committed further by its new owner) would pass the check and move that partition's committed
offset back under its new owner. Such a commit fails with CommitFailedError instead; a retry for
partitions still owned goes on with the new epoch.

Method: a GroupDriver whose coordinator calls are a fake that records each OffsetCommit and
answers STALE_MEMBER_EPOCH first; between the two attempts the member moves on as a heartbeat
answer and the end of on_partitions_revoked would move it (epoch bumped, partition 0 given up).
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
from samsa.client.group_member import MemberState
from samsa.v1 import coordinator_pb2 as c

T = "orders"


def driver() -> GroupDriver:
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": "x:1", "group.id": "g", "retry.backoff.ms": 1}
    )
    lock = threading.Lock()
    group = GroupDriver(config, lock, FetchState(config), ["x:1"], AioChannels(), lambda: None)
    member = group.member
    member.state = MemberState.STABLE
    member.member_epoch = 5
    member.owned = frozenset({(T, 0), (T, 1)})
    return group


def revoke_partition_0(group: GroupDriver) -> None:
    group.member.member_epoch = 6
    group.member.owned = frozenset({(T, 1)})


def committed_partitions(request: c.OffsetCommitRequest) -> set[tuple[str, int]]:
    return {(t.name, p.partition) for t in request.topics for p in t.partitions}


def test_a_stale_commit_is_not_retried_for_a_partition_revoked_meanwhile() -> None:
    group = driver()
    fake = StaleOnceCoordinator(lambda: revoke_partition_0(group))
    group._coordinator = fake  # type: ignore[assignment]
    offsets = {(T, 0): OffsetAndMetadata(100), (T, 1): OffsetAndMetadata(200)}
    with pytest.raises(CommitFailedError, match="orders-0"):
        asyncio.run(group.commit(offsets))
    assert [r.member_epoch for r in fake.requests] == [5], "nothing sent at the new epoch"


def test_a_stale_commit_of_partitions_still_owned_is_retried_with_the_new_epoch() -> None:
    group = driver()
    fake = StaleOnceCoordinator(lambda: revoke_partition_0(group))
    group._coordinator = fake  # type: ignore[assignment]
    asyncio.run(group.commit({(T, 1): OffsetAndMetadata(200)}))
    assert [r.member_epoch for r in fake.requests] == [5, 6]
    assert committed_partitions(fake.requests[1]) == {(T, 1)}
