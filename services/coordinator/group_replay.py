"""Replay: the only way a GroupShard changes.

Theory of operation. Loading a partition of `__consumer_offsets` is replaying its records in log
order; the handlers build records and apply them through `replay` as they go, so a shard is always
the replay of every record it emitted, and a coordinator that takes the partition over rebuilds the
same shard from the log.

Replay tolerates what log compaction does to a log: compaction keeps the last record of each key
(and, for a while, tombstones), in their original relative order. So a member's current
assignment may come before its metadata, and a group's records before its group_metadata; any
non-tombstone record therefore creates its group and member on demand (group epoch 0, empty
metadata). A tombstone of something that is not there is a no-op (its original was compacted
away). A member disappears at its member_metadata tombstone, a group at its group_metadata
tombstone, whose log offset the shard keeps (`GroupShard.deleted_positions`): a transaction's
offsets written before it must not bring the group back at their COMMIT marker.

Replay refuses, with ValueError, what no coordinator writes: a record that would give a partition
two owners, or a group deleted while it still has members or offsets. Records come already checked
by group_records.check/decode (matching kinds, no writer-epoch tombstone).

Member order: a member_metadata record moves its member to the end of `ConsumerGroup.members`,
so the dict's order is the order of each member's last metadata record — which compaction keeps —
and the same on every coordinator. (Nothing decides by it: the assignor is the one most members
name, group_assignment.assignor_name_of, and the assignors sort their members.)
"""

from __future__ import annotations

from samsa.services.coordinator.group_model import (
    IN_FLIGHT,
    STABLE,
    ConsumerGroup,
    GroupShard,
    Member,
    from_topic_partitions,
    pairs,
)
from samsa.services.coordinator.group_records import GroupRecord, check, key_kind
from samsa.v1 import group_records_pb2 as g


def replay(shard: GroupShard, record: GroupRecord, offset: int) -> None:
    """Apply one record to the shard: read from the log at `offset`, or IN_FLIGHT for a
    record a handler applies as it writes it (see `mark_durable`)."""
    key, value = check(record)
    kind = key_kind(key)
    if kind == "writer_epoch":
        assert value is not None
        shard.writer_coordinator_id = value.writer_epoch.coordinator_id
        shard.writer_assignment_epoch = value.writer_epoch.assignment_epoch
    elif kind == "offset_commit":
        _replay_offset_commit(shard, key.offset_commit, value, offset)
    elif kind == "group_metadata":
        _replay_group_metadata(shard, key.group_metadata.group_id, value, offset)
    elif kind == "target_assignment_metadata":
        group_id = key.target_assignment_metadata.group_id
        if value is not None:
            group = _group(shard, group_id)
            group.assignment_epoch = value.target_assignment_metadata.assignment_epoch
        elif group_id in shard.groups:
            shard.groups[group_id].assignment_epoch = 0
    elif kind == "member_metadata":
        _replay_member_metadata(shard, key.member_metadata, value)
    elif kind == "target_assignment_member":
        member_key = key.target_assignment_member
        if value is not None:
            group = _group(shard, member_key.group_id)
            partitions = from_topic_partitions(value.target_assignment_member.partitions)
            group.target[member_key.member_id] = partitions
        elif member_key.group_id in shard.groups:
            shard.groups[member_key.group_id].target.pop(member_key.member_id, None)
    else:
        assert kind == "current_assignment", kind
        _replay_current_assignment(shard, key.current_assignment, value)


def _group(shard: GroupShard, group_id: str) -> ConsumerGroup:
    group = shard.groups.get(group_id)
    if group is None:
        group = shard.groups[group_id] = ConsumerGroup(group_id)
    return group


def _member(group: ConsumerGroup, member_id: str) -> Member:
    member = group.members.get(member_id)
    if member is None:
        member = group.members[member_id] = Member(member_id)
    return member


def mark_durable(shard: GroupShard, records: list[GroupRecord], first_offset: int) -> None:
    """Records applied live (at IN_FLIGHT) are durable, the first at `first_offset`, the rest
    after it: each offset-commit record's partition takes its log offset as its position, unless
    a later record of the partition is still in flight (writes become durable in order)."""
    in_flight = shard.offsets_in_flight
    for index, (key, value) in enumerate(records):
        if key_kind(key) == "group_metadata" and value is None:
            _mark_deletion_durable(shard, key.group_metadata.group_id, first_offset + index)
        if key_kind(key) != "offset_commit":
            continue
        commit = key.offset_commit
        topic_partition = (commit.topic, commit.partition)
        counted = (commit.group_id, topic_partition)
        left = in_flight[counted] - 1
        if left:
            in_flight[counted] = left
            continue
        del in_flight[counted]
        group = shard.groups.get(commit.group_id)
        if group is not None and topic_partition in group.offset_positions:
            group.offset_positions[topic_partition] = first_offset + index


def _mark_deletion_durable(shard: GroupShard, group_id: str, position: int) -> None:
    """A group's deletion landed at `position`; it dates the group's deletion unless a later
    one is still in flight. A tombstone of a group already gone counted nothing."""
    left = shard.deletions_in_flight.get(group_id, 0) - 1
    if left < 0:
        return
    if left:
        shard.deletions_in_flight[group_id] = left
        return
    del shard.deletions_in_flight[group_id]
    shard.deleted_positions[group_id] = position


def _replay_offset_commit(
    shard: GroupShard, key: g.OffsetCommitKey, value: g.GroupRecordValue | None, position: int
) -> None:
    topic_partition = (key.topic, key.partition)
    if position == IN_FLIGHT:
        counted = (key.group_id, topic_partition)
        shard.offsets_in_flight[counted] = shard.offsets_in_flight.get(counted, 0) + 1
    if value is not None:
        offset = g.OffsetCommitValue()
        offset.CopyFrom(value.offset_commit)
        group = _group(shard, key.group_id)
        group.offsets[topic_partition] = offset
        group.offset_positions[topic_partition] = position
    elif key.group_id in shard.groups:
        group = shard.groups[key.group_id]
        group.offsets.pop(topic_partition, None)
        group.offset_positions[topic_partition] = position


def _replay_group_metadata(
    shard: GroupShard, group_id: str, value: g.GroupRecordValue | None, position: int
) -> None:
    if value is not None:
        group = _group(shard, group_id)
        group.group_epoch = value.group_metadata.group_epoch
        group.subscription_digest = value.group_metadata.subscription_digest
        if value.group_metadata.empty_since_ms:  # a timer (compare=False): see group_model
            group.empty_since_ms = value.group_metadata.empty_since_ms
        return
    group = shard.groups.get(group_id)
    if group is None:
        return
    if group.members or group.offsets or group.target:
        raise ValueError(
            f"group {group_id!r} deleted while it still has {len(group.members)} members, "
            f"{len(group.offsets)} offsets and {len(group.target)} target entries"
        )
    del shard.groups[group_id]
    shard.deleted_positions[group_id] = position
    if position == IN_FLIGHT:
        shard.deletions_in_flight[group_id] = shard.deletions_in_flight.get(group_id, 0) + 1


def _replay_member_metadata(
    shard: GroupShard, key: g.GroupMemberKey, value: g.GroupRecordValue | None
) -> None:
    if value is None:
        group = shard.groups.get(key.group_id)
        if group is None or key.member_id not in group.members:
            return
        member = group.members[key.member_id]
        if member.assigned or member.pending_revocation:
            raise ValueError(
                f"member {key.member_id!r} of group {key.group_id!r} removed while it still "
                "owns partitions (its current_assignment tombstone must come first)"
            )
        del group.members[key.member_id]
        return
    metadata = value.member_metadata
    group = _group(shard, key.group_id)
    member = group.members.pop(key.member_id, None) or Member(key.member_id)
    group.members[key.member_id] = member  # moved to the end: see "Member order" above
    member.instance_id = metadata.group_instance_id
    member.client_id = metadata.client_id
    member.topic_names = frozenset(metadata.subscription.topic_names)
    member.topic_regex = metadata.subscription.topic_regex
    member.rebalance_timeout_ms = metadata.rebalance_timeout_ms
    member.server_assignor = metadata.server_assignor
    member.principal = metadata.principal
    member.host = metadata.host


def _replay_current_assignment(
    shard: GroupShard, key: g.GroupMemberKey, value: g.GroupRecordValue | None
) -> None:
    if value is None:
        group = shard.groups.get(key.group_id)
        if group is None or key.member_id not in group.members:
            return
        member = group.members[key.member_id]
        _release(group, member)
        member.member_epoch = member.previous_member_epoch = 0
        member.state = STABLE
        member.assigned, member.pending_revocation = {}, {}
        return
    current = value.current_assignment
    group = _group(shard, key.group_id)
    member = _member(group, key.member_id)
    assigned = from_topic_partitions(current.assigned_partitions)
    pending = from_topic_partitions(current.partitions_pending_revocation)
    claimed = pairs(assigned)
    pending_pairs = pairs(pending)
    if claimed & pending_pairs:
        raise ValueError(
            f"member {key.member_id!r} of group {key.group_id!r}: partitions both assigned and "
            f"pending revocation: {sorted(claimed & pending_pairs)}"
        )
    claimed |= pending_pairs
    taken = sorted(tp for tp in claimed if group.owners.get(tp, key.member_id) != key.member_id)
    if taken:
        raise ValueError(
            f"member {key.member_id!r} of group {key.group_id!r} would own partitions another "
            f"member owns: {taken[:10]}"
        )
    _release(group, member)
    for topic_partition in claimed:
        group.owners[topic_partition] = key.member_id
    member.member_epoch = current.member_epoch
    member.previous_member_epoch = current.previous_member_epoch
    member.state = current.state
    member.assigned, member.pending_revocation = assigned, pending


def _release(group: ConsumerGroup, member: Member) -> None:
    """Drop the member's entries from the owners map."""
    for topic_partition in pairs(member.assigned) | pairs(member.pending_revocation):
        owner = group.owners.pop(topic_partition, None)
        assert owner == member.member_id, (topic_partition, owner, member.member_id)
