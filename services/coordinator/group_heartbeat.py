"""ConsumerGroupHeartbeat: joining, leaving, metadata changes, assignment and reconciliation.

Theory of operation (KIP-848). One heartbeat runs these steps, each writing its records through
the RecordCollector (so the next step sees them):

1. Validate the request alone (ids, epochs, subscription, assignor); an error writes nothing.
2. Leaves answer at once: -1 removes the member (tombstones) and bumps the group epoch; -2 keeps a
   static member's assigned partitions under epoch -2 until its session expires or its instance
   id rejoins (those it was revoking are free at once). Leaving twice is not an error: the
   first answer may have been lost. A -2 is strict as Kafka's: the instance id must be held
   by the request's member id (UNKNOWN_MEMBER_ID when no member holds it, FENCED_INSTANCE_ID
   when another does).
3. Find the member. Epoch 0 with a new id joins (a static instance id held by a member at -2 is
   taken over, keeping its epoch, assignment and target so that no partition moves; held by an
   active member: UNRELEASED_INSTANCE_ID); epoch 0 with a known id is a retried join. Any other
   epoch must be the member's epoch, or its previous epoch with owned partitions within what the
   coordinator believes it owns (the last answer was lost); else FENCED_MEMBER_EPOCH. An unknown
   member id whose instance id another member holds is FENCED_INSTANCE_ID (it was replaced).
4. Metadata: a changed member writes member_metadata; a changed subscription, a new member, or a
   subscription digest that moved with the topics bumps the group epoch.
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

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.topic_regex import TOPIC_REGEX_LENGTH_MAX, pattern_error
from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.assignors import ASSIGNORS
from samsa.services.coordinator.group_assignment import (
    TARGET_RECORD_BYTES_MAX,
    bounded_target,
    subscribed_topics,
    subscription_digest,
)
from samsa.services.coordinator.group_model import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STABLE,
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    GroupConfig,
    GroupShard,
    Member,
    Partitions,
    from_topic_partitions,
    pairs,
    to_topic_partitions,
    union,
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

# The longest member id (coordinator.proto: 1 to 64 characters); a UUID is 36.
MEMBER_ID_LENGTH_MAX = 64

Error = tuple[ErrorCode, str]
HeartbeatResult = GroupResult[c.ConsumerGroupHeartbeatResponse]


def heartbeat(
    shard: GroupShard,
    config: GroupConfig,
    request: c.ConsumerGroupHeartbeatRequest,
    now_ms: int,
    topics: Mapping[str, int],
) -> HeartbeatResult:
    error = validate(request)
    if error is not None:
        return _refused(request, error)
    writer = RecordCollector(shard)
    group = shard.groups.get(request.group_id)
    if request.member_epoch == LEAVE_EPOCH:
        if group is not None and request.member_id in group.members:
            remove_member(writer, group, request.member_id, now_ms)
        return writer.result(_answer(request, LEAVE_EPOCH, None, config))
    if request.member_epoch == STATIC_LEAVE_EPOCH:
        return _static_leave(writer, group, request, now_ms, config)
    member = None if group is None else group.members.get(request.member_id)
    joined = False
    if request.member_epoch == JOIN_EPOCH:
        error, joined = _join(writer, group, member, request, config)
    else:
        error = _check_member_epoch(group, member, request)
    if error is not None:
        return _refused(request, error)
    group = shard.groups[request.group_id]
    member = group.members[request.member_id]
    _update_metadata(writer, group, member, request, topics, joined)
    if group.group_epoch > group.assignment_epoch:
        _write_target(writer, group, topics, config)
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
        return GroupResult(writer.records, _refused(request, error).response)
    return writer.result(_answer(request, member.member_epoch, member.assigned, config))


def _set_timers(member: Member, now_ms: int, config: GroupConfig) -> None:
    """A fresh session; a revocation deadline from the moment revocation starts."""
    member.session_deadline_ms = now_ms + config.session_timeout_ms
    if member.state != UNREVOKED_PARTITIONS:
        member.revocation_deadline_ms = None
    elif member.revocation_deadline_ms is None:
        member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms


def validate(request: c.ConsumerGroupHeartbeatRequest) -> Error | None:
    """What is wrong with the request on its own, or None."""
    if not 1 <= len(request.group_id) <= limits.group_id_length_max:
        return ErrorCode.INVALID_GROUP_ID, (
            f"group_id must be 1 to {limits.group_id_length_max} characters, "
            f"got {len(request.group_id)}"
        )
    if not 1 <= len(request.member_id) <= MEMBER_ID_LENGTH_MAX:
        return ErrorCode.INVALID_REQUEST, (
            f"member_id must be 1 to {MEMBER_ID_LENGTH_MAX} characters (a UUID the client makes "
            f"once), got {len(request.member_id)}"
        )
    if request.member_epoch < STATIC_LEAVE_EPOCH:
        return ErrorCode.INVALID_REQUEST, (
            f"member_epoch {request.member_epoch} is invalid: send 0 to join, -1 to leave, -2 for "
            "a static member's temporary leave, else the epoch of the last answer"
        )
    if request.member_epoch == STATIC_LEAVE_EPOCH and not request.group_instance_id:
        return ErrorCode.INVALID_REQUEST, (
            "member_epoch -2 is a static member's leave and needs group_instance_id; "
            "a dynamic member leaves with -1"
        )
    if request.rebalance_timeout_ms < 0:
        return ErrorCode.INVALID_REQUEST, "rebalance_timeout_ms must not be negative"
    if request.member_epoch == JOIN_EPOCH:
        if not request.HasField("subscription"):
            return ErrorCode.INVALID_REQUEST, "a join (member_epoch 0) needs a subscription"
        if request.rebalance_timeout_ms <= 0:
            return ErrorCode.INVALID_REQUEST, (
                "a join (member_epoch 0) needs rebalance_timeout_ms > 0"
            )
    if request.HasField("subscription"):
        error = _subscription_error(request.subscription)
        if error is not None:
            return error
    if request.server_assignor and request.server_assignor not in ASSIGNORS:
        return ErrorCode.UNSUPPORTED_ASSIGNOR, (
            f"server_assignor {request.server_assignor!r} is not one of {sorted(ASSIGNORS)}"
        )
    return None


def _subscription_error(subscription: c.ConsumerGroupSubscription) -> Error | None:
    names, regex = list(subscription.topic_names), subscription.topic_regex
    if bool(names) == bool(regex):
        return ErrorCode.INVALID_REQUEST, (
            "subscription needs exactly one of topic_names and topic_regex"
        )
    if any(not name for name in names):
        return ErrorCode.INVALID_REQUEST, "subscription.topic_names holds an empty name"
    if len(regex) > TOPIC_REGEX_LENGTH_MAX:
        return ErrorCode.INVALID_REQUEST, (
            f"subscription.topic_regex is over {TOPIC_REGEX_LENGTH_MAX} characters"
        )
    if regex:
        error = pattern_error(regex)
        if error is not None:
            # Kafka's answer (INVALID_REGULAR_EXPRESSION) to what RE2/J does not compile.
            return ErrorCode.INVALID_REGULAR_EXPRESSION, (
                f"subscription.topic_regex {regex!r} is not a valid regular expression: {error}"
            )
    return None


def _static_leave(
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
        return _refused(
            request,
            (
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"instance id {instance_id!r} is unknown in group {request.group_id!r}: "
                "its member left or its session expired",
            ),
        )
    if member.member_id != request.member_id:
        return _refused(
            request,
            (
                ErrorCode.FENCED_INSTANCE_ID,
                f"instance id {instance_id!r} is held by member {member.member_id!r}, not "
                f"{request.member_id!r}: another consumer with this group.instance.id took "
                "it over",
            ),
        )
    if member.member_epoch == STATIC_LEAVE_EPOCH:
        return writer.result(_answer(request, STATIC_LEAVE_EPOCH, None, config))
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
    return writer.result(_answer(request, STATIC_LEAVE_EPOCH, None, config))


def _join(
    writer: RecordCollector,
    group: ConsumerGroup | None,
    member: Member | None,
    request: c.ConsumerGroupHeartbeatRequest,
    config: GroupConfig,
) -> tuple[Error | None, bool]:
    """Create the member (or take over a static one). Returns the error, if any, and whether a
    new member was created (which bumps the group epoch)."""
    if member is not None:
        if member.member_epoch == STATIC_LEAVE_EPOCH:
            assert group is not None
            _take_over(writer, group, member, request)
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
        _take_over(writer, group, holder, request)
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
    )
    writer.write(records.member_metadata(request.group_id, request.member_id, value))
    return None, True


def _take_over(
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


def _check_member_epoch(
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


def _update_metadata(
    writer: RecordCollector,
    group: ConsumerGroup,
    member: Member,
    request: c.ConsumerGroupHeartbeatRequest,
    topics: Mapping[str, int],
    joined: bool,
) -> None:
    """Write what changed of the member's metadata; bump the group epoch (once) when a member
    joined, its subscription changed, or the subscribed topics' partitions changed."""
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
    subscription_changed = value.subscription != member.subscription()
    if value != member.metadata_value():
        writer.write(records.member_metadata(group.group_id, member.member_id, value))
    digest = subscription_digest(subscribed_topics(group.members.values(), topics))
    if joined or subscription_changed or digest != group.subscription_digest:
        bump_group_epoch(writer, group, digest)


def _write_target(
    writer: RecordCollector, group: ConsumerGroup, topics: Mapping[str, int], config: GroupConfig
) -> None:
    """Write the new target (nothing for members whose target would be too large)."""
    target, group.oversized = bounded_target(group, topics, config.default_assignor)
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


def _answer(
    request: c.ConsumerGroupHeartbeatRequest,
    member_epoch: int,
    assigned: Partitions | None,
    config: GroupConfig,
) -> c.ConsumerGroupHeartbeatResponse:
    response = c.ConsumerGroupHeartbeatResponse(
        member_id=request.member_id,
        member_epoch=member_epoch,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
    )
    if assigned is not None:
        response.assignment.topics.extend(to_topic_partitions(assigned))
    return response


def _refused(request: c.ConsumerGroupHeartbeatRequest, error: Error) -> HeartbeatResult:
    code, message = error
    response = c.ConsumerGroupHeartbeatResponse(
        error_code=int(code),  # type: ignore[arg-type]
        error_message=message,
        member_id=request.member_id,
    )
    return GroupResult([], response)
