"""ConsumerGroupHeartbeat's membership steps: a static member's leave, a join (or a static
member's take-over), and the check of a known member's epoch.

Theory of operation: these are steps 2 and 3 of a heartbeat (group_heartbeat.py, whose docstring
tells the whole flow). Each writes its records through the RecordCollector, so the steps after it
see them, or returns the error the request is refused with (nothing written). Pure.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.group_assignment import MemberAccess
from samsa.services.coordinator.group_heartbeat_validation import (
    Error,
    HeartbeatResult,
    answer,
    refused,
)
from samsa.services.coordinator.group_model import (
    STABLE,
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    GroupConfig,
    Member,
    from_topic_partitions,
    pairs,
    to_topic_partitions,
    union,
)
from samsa.services.coordinator.group_writer import RecordCollector
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g


def static_leave(
    writer: RecordCollector,
    group: ConsumerGroup | None,
    request: c.ConsumerGroupHeartbeatRequest,
    now_ms: int,
    config: GroupConfig,
) -> HeartbeatResult:
    """Kafka's consumerGroupLeave for a static member: the member is found by its instance id,
    which must be held (else UNKNOWN_MEMBER_ID) under the request's member id (else
    FENCED_INSTANCE_ID: a newer consumer took the instance id over). A member already at -2
    leaves again without a write (its first answer may have been lost)."""
    instance_id = request.group_instance_id
    member = None if group is None else group.member_with_instance(instance_id)
    if member is None:
        return refused(
            request,
            (
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"instance id {instance_id!r} is unknown in group {request.group_id!r}: "
                "its member left or its session expired",
            ),
        )
    if member.member_id != request.member_id:
        return refused(
            request,
            (
                ErrorCode.FENCED_INSTANCE_ID,
                f"instance id {instance_id!r} is held by member {member.member_id!r}, not "
                f"{request.member_id!r}: another consumer with this group.instance.id took "
                "it over",
            ),
        )
    if member.member_epoch == STATIC_LEAVE_EPOCH:
        return writer.result(answer(request, STATIC_LEAVE_EPOCH, None, config))
    assert group is not None
    value = member.current_value()
    value.previous_member_epoch = member.member_epoch
    value.member_epoch = STATIC_LEAVE_EPOCH
    # A closing consumer gave everything up before its -2: what it was revoking is free now (as
    # Kafka's consumerGroupStaticMemberGroupLeave); only its assigned partitions stay reserved.
    del value.partitions_pending_revocation[:]
    if value.state == UNREVOKED_PARTITIONS:
        value.state = STABLE  # type: ignore[assignment]
    writer.write(records.current_assignment(group.group_id, member.member_id, value))
    member.session_deadline_ms = now_ms + config.session_timeout_ms
    member.revocation_deadline_ms = None  # nothing left to revoke: only the session counts
    return writer.result(answer(request, STATIC_LEAVE_EPOCH, None, config))


def join(
    writer: RecordCollector,
    group: ConsumerGroup | None,
    member: Member | None,
    request: c.ConsumerGroupHeartbeatRequest,
    config: GroupConfig,
    access: MemberAccess,
) -> tuple[Error | None, bool]:
    """Create the member (or take over a static one). Returns the error, if any, and whether a
    new member was created (which bumps the group epoch). A new member's record names who it
    heartbeats as (`access`); a taken-over one is rewritten with it by the metadata step."""
    if member is not None:
        if member.member_epoch == STATIC_LEAVE_EPOCH:
            assert group is not None
            take_over(writer, group, member, request)
        return None, False  # a retried join: answer the member's current state
    holder = None
    if group is not None and request.group_instance_id:
        holder = group.member_with_instance(request.group_instance_id)
    if holder is not None:
        assert group is not None
        if holder.member_epoch != STATIC_LEAVE_EPOCH:
            return (
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"instance id {request.group_instance_id!r} is held by active member "
                f"{holder.member_id!r}: it must leave (-2) or expire first",
            ), False
        take_over(writer, group, holder, request)
        return None, False
    if group is not None and config.max_size is not None and len(group.members) >= config.max_size:
        return (
            ErrorCode.GROUP_MAX_SIZE_REACHED,
            f"group {request.group_id!r} has reached its maximum of {config.max_size} members",
        ), False
    value = g.MemberMetadataValue(
        group_instance_id=request.group_instance_id,
        client_id=request.client_id,
        subscription=request.subscription,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        server_assignor=request.server_assignor,
        principal=access.principal,
        host=access.host if access.principal else "",
    )
    writer.write(records.member_metadata(request.group_id, request.member_id, value))
    return None, True


def take_over(
    writer: RecordCollector,
    group: ConsumerGroup,
    old: Member,
    request: c.ConsumerGroupHeartbeatRequest,
) -> None:
    """The static member `old` (epoch -2) comes back as request.member_id: same epoch (the one
    before it left), assignment and target; metadata changes are then written as usual."""
    current = old.current_value()
    current.member_epoch = old.previous_member_epoch
    target = group.target.get(old.member_id, {})
    if old.member_id != request.member_id:
        metadata = old.metadata_value()
        for record in records.member_tombstones(group.group_id, old.member_id):
            writer.write(record)
        writer.write(records.member_metadata(group.group_id, request.member_id, metadata))
        if target:
            value = g.TargetAssignmentMemberValue(partitions=to_topic_partitions(target))
            writer.write(records.target_assignment_member(group.group_id, request.member_id, value))
    writer.write(records.current_assignment(group.group_id, request.member_id, current))


def check_member_epoch(
    group: ConsumerGroup | None, member: Member | None, request: c.ConsumerGroupHeartbeatRequest
) -> Error | None:
    if member is None and group is not None and request.group_instance_id:
        holder = group.member_with_instance(request.group_instance_id)
        if holder is not None:  # Kafka's answer: another consumer took the instance id over
            return ErrorCode.FENCED_INSTANCE_ID, (
                f"instance id {request.group_instance_id!r} is held by member "
                f"{holder.member_id!r}: another consumer with this group.instance.id replaced "
                "this one"
            )
    if group is None or member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID, (
            f"member {request.member_id!r} is not in group {request.group_id!r}: "
            "drop every partition and rejoin with member_epoch 0"
        )
    if request.member_epoch == member.member_epoch:
        return None
    if member.member_epoch != STATIC_LEAVE_EPOCH and request.member_epoch == (
        member.previous_member_epoch
    ):
        owned = pairs(from_topic_partitions(request.owned_partitions.topics))
        mine = pairs(union(member.assigned, member.pending_revocation))
        if request.HasField("owned_partitions") and owned <= mine:
            return None  # the answer that moved the epoch was lost
    return ErrorCode.FENCED_MEMBER_EPOCH, (
        f"member_epoch {request.member_epoch} is not member {request.member_id!r}'s epoch "
        f"{member.member_epoch}: drop every partition and rejoin with member_epoch 0"
    )
