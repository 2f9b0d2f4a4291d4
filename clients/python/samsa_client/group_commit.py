"""A group member's offset commit: what each try is sent as, and when none may be sent.

Theory of operation. The group driver (group_driver.py) sends a commit's OffsetCommit until it is
answered, and sends it again, with the epoch the next heartbeat brings, after STALE_MEMBER_EPOCH.
KIP-848's coordinator checks a commit against the member epoch alone, so a try sent at a newer
epoch is accepted for any partition: the offsets in hand must still be this member's own. Under
the driver's lock, before each try, `commit_request` makes sure of it against `CommitStart`, what
the member was when the commit was handed over:

- the member is in the group (or leaving it, until its leave heartbeat was answered:
  on_partitions_revoked commits then), or outside the group protocol altogether (assign() with a
  group.id: sent without member id and epoch);
- it has not been out of the group since (`GroupMember.memberships_ended`): fenced, expired or
  left, then rejoined under the same member id, it may own the same partitions again, but another
  member may have owned and committed them in between. As Kafka's consumer never commits the
  offsets of a generation that was lost (CommitFailedException), the commit fails;
- it still owns every partition of the commit it owned at the start: one revoked since may already
  have been committed further by its new owner.

Else CommitFailedError, and nothing is sent. `commit_refused` types a final refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.client.errors import KafkaError
from samsa.client.group_admin import OffsetAndMetadata, offset_commit_request
from samsa.client.group_member import GroupMember, MemberState
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

TopicPartition = tuple[str, int]

# The member states in which it owns partitions under its epoch (and auto-commits them).
IN_GROUP = frozenset({MemberState.STABLE, MemberState.RECONCILING, MemberState.ACKNOWLEDGING})
# ... and in which it may commit: also while leaving, until the leave heartbeat was answered
# (on_partitions_revoked commits then).
MAY_COMMIT = IN_GROUP | {MemberState.LEAVING}


class CommitFailedError(KafkaError):
    """The offsets were not committed because this member is no longer in the group (fenced,
    expired, or left), or was out of it since the commit began: its partitions may have moved
    to another member."""


@dataclass(frozen=True)
class CommitStart:
    """What the member was when a commit was handed over (taken under the driver's lock)."""

    owned: frozenset[TopicPartition]
    memberships_ended: int

    @staticmethod
    def of(member: GroupMember) -> CommitStart:
        return CommitStart(member.owned, member.memberships_ended)


def commit_request(
    member: GroupMember,
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    start: CommitStart,
) -> c.OffsetCommitRequest:
    """Under the lock, before each try: the OffsetCommit to send now, with the member's id and
    current epoch, or without them outside the group protocol. CommitFailedError when the
    offsets may no longer be this member's to commit (see the module docstring)."""
    if member.state is MemberState.UNSUBSCRIBED and start.memberships_ended == (
        member.memberships_ended
    ):
        return offset_commit_request(group_id, offsets)
    if member.state not in MAY_COMMIT or member.member_epoch <= 0:
        raise CommitFailedError(
            f"offsets not committed: this member is not in group {group_id!r} now "
            f"({member.state.value}); its partitions may belong to another member",
            ErrorCode.UNKNOWN_MEMBER_ID,
        )
    if member.memberships_ended != start.memberships_ended:
        raise CommitFailedError(
            f"offsets not committed: this member lost its partitions (fenced, expired or left "
            f"group {group_id!r}) since the commit began and rejoined; another member may have "
            "committed them meanwhile",
            ErrorCode.FENCED_MEMBER_EPOCH,
        )
    # A retry goes at the member's new epoch, which the coordinator accepts for any partition:
    # not for one given up since, which its new owner may have committed.
    given_up = sorted((start.owned & offsets.keys()) - member.owned)
    if given_up:
        names = ", ".join(f"{topic}-{number}" for topic, number in given_up)
        raise CommitFailedError(
            f"offsets not committed: {names} were revoked from this member while the "
            "commit waited for its new epoch (STALE_MEMBER_EPOCH)",
            ErrorCode.STALE_MEMBER_EPOCH,
        )
    return offset_commit_request(group_id, offsets, member.settings.member_id, member.member_epoch)


def commit_refused(code: int, message: str, subscribed: bool) -> KafkaError:
    """The error a commit's last refusal raises: UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH mean
    its partitions may already be someone else's (CommitFailedError)."""
    if code not in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
        return KafkaError.of(code, message)
    hint = (
        "this member was fenced; its partitions may belong to another member"
        if subscribed
        else "the group has members: assign() with a group.id commits only while the group is empty"
    )
    return CommitFailedError(f"offsets not committed: {message} ({hint})", code)
