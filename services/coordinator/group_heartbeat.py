"""ConsumerGroupHeartbeat: joining, leaving, metadata changes, assignment and reconciliation.

Theory of operation (KIP-848). One heartbeat runs these steps, each writing its records through
the RecordCollector (so the next step sees them):

1. Validate the request alone (ids, epochs, subscription, assignor: group_heartbeat_validation);
   an error writes nothing.
2. Leaves answer at once: -1 removes the member (tombstones) and bumps the group epoch; -2 keeps
   a static member's assigned partitions under epoch -2 until its session expires or its
   instance id rejoins (those it was revoking are free at once). Leaving twice is not an error:
   the first answer may have been lost. A -2 is strict as Kafka's: the instance id must be held
   by the request's member id (UNKNOWN_MEMBER_ID when no member holds it, FENCED_INSTANCE_ID
   when another does).
3. Find the member. Epoch 0 with a new id joins (a static instance id held by a member at -2 is
   taken over, keeping its epoch, assignment and target so that no partition moves; held by an
   active member: UNRELEASED_INSTANCE_ID); epoch 0 with a known id is a retried join. Any other
   epoch must be the member's epoch, or its previous epoch with owned partitions within what the
   coordinator believes it owns (the last answer was lost); else FENCED_MEMBER_EPOCH. An unknown
   member id whose instance id another member holds is FENCED_INSTANCE_ID (it was replaced).
   (Steps 2 and 3: group_membership_steps.)
4. Metadata: a changed member writes member_metadata (with the principal and host it heartbeats
   from); a changed subscription, a new member, a regex member's new principal, or a
   subscription digest that moved with the topics or with what the ACLs let a regex member
   DESCRIBE (group_assignment: per-member filtering) bumps the group epoch.
5. When group_epoch > assignment_epoch the assignor computes a new target: one
   target_assignment_member record per member whose target changed, then the
   target_assignment_metadata record. A member whose target would be over
   TARGET_RECORD_BYTES_MAX gets nothing, and its heartbeats MESSAGE_TOO_LARGE
   (group_assignment.bounded_target).
6. The member reconciles (reconciliation.next_assignment); its current_assignment record is
   written when that changed anything. The answer carries the full assigned set.

Timers: a good heartbeat sets the member's session deadline to now + session timeout; entering
UNREVOKED_PARTITIONS sets a revocation deadline of now + its rebalance timeout.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.common.errors import ErrorCode
from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.group_assignment import (
    TARGET_RECORD_BYTES_MAX,
    UNJUDGED,
    MemberAccess,
    bounded_target,
    group_digest,
)
from samsa.services.coordinator.group_heartbeat_validation import (
    HeartbeatResult,
    answer,
    refused,
    validate,
)
from samsa.services.coordinator.group_membership_steps import (
    check_member_epoch,
    join,
    static_leave,
)
from samsa.services.coordinator.group_model import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    GroupConfig,
    GroupShard,
    Member,
    Partitions,
    from_topic_partitions,
    to_topic_partitions,
)
from samsa.services.coordinator.group_writer import (
    GroupResult,
    RecordCollector,
    bump_group_epoch,
    remove_member,
)
from samsa.services.coordinator.reconciliation import MemberAssignment, next_assignment
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g


def heartbeat(
    shard: GroupShard,
    config: GroupConfig,
    request: c.ConsumerGroupHeartbeatRequest,
    now_ms: int,
    topics: Mapping[str, int],
    access: MemberAccess = UNJUDGED,
) -> HeartbeatResult:
    """One heartbeat; `access` names its sender and judges what each member's regex may show
    (group_assignment's per-member filtering)."""
    error = validate(request)
    if error is not None:
        return refused(request, error)
    writer = RecordCollector(shard)
    group = shard.groups.get(request.group_id)
    if request.member_epoch == LEAVE_EPOCH:
        if group is not None and request.member_id in group.members:
            remove_member(writer, group, request.member_id, now_ms)
        return writer.result(answer(request, LEAVE_EPOCH, None, config))
    if request.member_epoch == STATIC_LEAVE_EPOCH:
        return static_leave(writer, group, request, now_ms, config)
    member = None if group is None else group.members.get(request.member_id)
    joined = False
    if request.member_epoch == JOIN_EPOCH:
        error, joined = join(writer, group, member, request, config, access)
    else:
        error = check_member_epoch(group, member, request)
    if error is not None:
        return refused(request, error)
    group = shard.groups[request.group_id]
    member = group.members[request.member_id]
    _update_metadata(writer, group, member, request, topics, joined, access)
    if group.group_epoch > group.assignment_epoch:
        _write_target(writer, group, topics, config, access)
    reported = None
    if request.HasField("owned_partitions"):
        reported = from_topic_partitions(request.owned_partitions.topics)
    _reconcile(writer, group, member, reported)
    _set_timers(member, now_ms, config)
    if (size := group.oversized.get(member.member_id)) is not None:
        message = (
            f"member {member.member_id!r} would be assigned {size} bytes of partitions, over the "
            f"{TARGET_RECORD_BYTES_MAX} a member may own (and report in its heartbeats), so it is "
            "assigned nothing: subscribe to fewer topics (or ones with shorter names), or add "
            "members"
        )  # what was written stays written
        error = ErrorCode.MESSAGE_TOO_LARGE, message
        return GroupResult(writer.records, refused(request, error).response)
    return writer.result(answer(request, member.member_epoch, member.assigned, config))


def _set_timers(member: Member, now_ms: int, config: GroupConfig) -> None:
    """A fresh session; a revocation deadline from the moment revocation starts."""
    member.session_deadline_ms = now_ms + config.session_timeout_ms
    if member.state != UNREVOKED_PARTITIONS:
        member.revocation_deadline_ms = None
    elif member.revocation_deadline_ms is None:
        member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms


def _update_metadata(
    writer: RecordCollector,
    group: ConsumerGroup,
    member: Member,
    request: c.ConsumerGroupHeartbeatRequest,
    topics: Mapping[str, int],
    joined: bool,
    access: MemberAccess,
) -> None:
    """Write what changed of the member's metadata (its principal and host too); bump the group
    epoch (once) when a member joined, its subscription changed, a regex member's principal or
    host changed, or the digest moved: the subscribed topics' partitions, or what the ACLs hide
    of a regex."""
    value = member.metadata_value()
    if request.HasField("subscription"):
        value.subscription.CopyFrom(request.subscription)
        del value.subscription.topic_names[:]
        value.subscription.topic_names.extend(sorted(set(request.subscription.topic_names)))
    if request.server_assignor:
        value.server_assignor = request.server_assignor
    if request.rebalance_timeout_ms > 0:
        value.rebalance_timeout_ms = request.rebalance_timeout_ms
    if request.client_id:
        value.client_id = request.client_id
    value.principal = access.principal
    value.host = access.host if access.principal else ""
    subscription_changed = value.subscription != member.subscription()
    if value.subscription.topic_regex and (value.principal, value.host) != (
        member.principal,
        member.host,
    ):
        subscription_changed = True  # what its regex resolves to is judged for another caller
    if value != member.metadata_value():
        writer.write(records.member_metadata(group.group_id, member.member_id, value))
    digest = group_digest(group.members.values(), topics, access.may_describe)
    if joined or subscription_changed or digest != group.subscription_digest:
        bump_group_epoch(writer, group, digest)


def _write_target(
    writer: RecordCollector,
    group: ConsumerGroup,
    topics: Mapping[str, int],
    config: GroupConfig,
    access: MemberAccess,
) -> None:
    """Write the new target (nothing for members whose target would be too large)."""
    target, group.oversized = bounded_target(
        group, topics, config.default_assignor, access.may_describe
    )
    for member_id in sorted(target):
        if target[member_id] != group.target.get(member_id, {}):
            value = g.TargetAssignmentMemberValue(partitions=to_topic_partitions(target[member_id]))
            writer.write(records.target_assignment_member(group.group_id, member_id, value))
    value = g.TargetAssignmentMetadataValue(assignment_epoch=group.group_epoch)
    writer.write(records.target_assignment_metadata(group.group_id, value))


def _reconcile(
    writer: RecordCollector,
    group: ConsumerGroup,
    member: Member,
    reported: Partitions | None,
) -> None:
    current = MemberAssignment(
        member.member_epoch,
        member.previous_member_epoch,
        member.state,
        member.assigned,
        member.pending_revocation,
    )
    following = next_assignment(
        current,
        group.target.get(member.member_id, {}),
        group.assignment_epoch,
        group.owners,
        member.member_id,
        reported,
    )
    if following == current:
        return
    value = g.CurrentAssignmentValue(
        member_epoch=following.member_epoch,
        previous_member_epoch=following.previous_member_epoch,
        state=following.state,  # type: ignore[arg-type]
        assigned_partitions=to_topic_partitions(following.assigned),
        partitions_pending_revocation=to_topic_partitions(following.pending_revocation),
    )
    writer.write(records.current_assignment(group.group_id, member.member_id, value))
    if following.pending_revocation != current.pending_revocation:
        member.revocation_deadline_ms = None  # a new revocation: _set_timers starts its clock
