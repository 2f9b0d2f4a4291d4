"""Goal: a commit the application makes (commit(), commit_async()) counts for auto-commit as the
group's offset. Auto-commit leaves out positions that did not move since its own last commit
(auto_commit_memory.py); it did not hear of the application's. A consumer that auto-committed
15, sought back to 10 and committed 10 by hand, then read on to 15 again, never auto-committed
15: the group kept 10, and a restart read 10..14 again. A commit that fails is forgotten, so
the next auto-commit sends the position whatever it is.

Method: a GroupDriver over a real FetchState, joined through a pure GroupMember fed heartbeat
answers (as in test_client_auto_commit_after_reassignment.py); its coordinator calls go to a
stand-in that answers every OffsetCommit with the code the test chooses (RecordingCoordinator).
No cluster, no network.
"""

from __future__ import annotations

import asyncio

import pytest
from test_client_assign_auto_commit import RecordingCoordinator
from test_client_auto_commit_after_reassignment import P0, driver, due, joined

from samsa.client.errors import KafkaError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver
from samsa.common.errors import ErrorCode


def joined_driver(code: ErrorCode = ErrorCode.NONE) -> GroupDriver:
    """A member owning P0 at epoch 5, whose commits are answered `code`."""
    group = driver()
    joined(group, 5, 0)
    group._coordinator = RecordingCoordinator(code)  # type: ignore[assignment]
    return group


def test_a_position_committed_by_hand_below_the_auto_committed_one_is_auto_committed_again() -> (
    None
):
    group = joined_driver()
    group.state.seek(P0, 15)  # as if polled up to 15
    assert due(group) == {P0: 15}
    group.state.seek(P0, 10)
    asyncio.run(group.commit({P0: OffsetAndMetadata(10)}))  # the group now has 10
    group.state.seek(P0, 15)  # read on to 15 again
    assert due(group) == {P0: 15}, "the group has 10: position 15 must be committed again"


def test_a_position_committed_by_hand_is_not_auto_committed_again() -> None:
    group = joined_driver()
    group.state.seek(P0, 15)
    asyncio.run(group.commit({P0: OffsetAndMetadata(15)}))
    assert due(group) == {}, "the group has 15 already"


def test_a_failed_commit_by_hand_leaves_the_position_to_the_next_auto_commit() -> None:
    group = joined_driver()
    group.state.seek(P0, 15)
    assert due(group) == {P0: 15}
    group._coordinator = RecordingCoordinator(ErrorCode.UNKNOWN_MEMBER_ID)  # type: ignore[assignment]
    group.state.seek(P0, 20)
    with pytest.raises(KafkaError):
        asyncio.run(group.commit({P0: OffsetAndMetadata(20)}))
    assert due(group) == {P0: 20}, "the commit of 20 failed: the group may still have 15"


def test_a_failed_auto_commit_leaves_the_position_to_the_next_one() -> None:
    group = joined_driver(ErrorCode.UNKNOWN_MEMBER_ID)
    group.state.seek(P0, 15)
    offsets = group.auto_commit_due(group._auto_commit_due_ms)
    assert offsets is not None
    asyncio.run(group.commit_in_background(offsets))  # logged, not raised
    assert due(group) == {P0: 15}


def test_a_commit_of_a_partition_not_assigned_is_not_remembered() -> None:
    group = driver()  # assign() with a group.id: auto-commit covers every assigned partition
    group._coordinator = RecordingCoordinator()  # type: ignore[assignment]
    group.state.assign([P0])
    other = ("other", 3)
    asyncio.run(group.commit({other: OffsetAndMetadata(7), P0: OffsetAndMetadata(4)}))
    group.state.assign([P0, other])  # assigned later: the group's offset may have moved since
    group.state.seek(other, 7)
    group.state.seek(P0, 4)
    assert due(group) == {other: 7}, "only the partition assigned at the commit is remembered"
