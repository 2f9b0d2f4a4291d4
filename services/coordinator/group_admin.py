"""Group administration: ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

Theory of operation. A group's state is derived, never stored:

- EMPTY: no members (it may still hold committed offsets);
- ASSIGNING: group_epoch > assignment_epoch — the target has not been computed for the last change
  yet (the next heartbeat of any member computes it);
- RECONCILING: some member is not STABLE at the assignment epoch (a member at -2, gone for a
  while, counts as not reconciled);
- STABLE: every member owns its target at the assignment epoch.

DeleteGroups deletes only groups without members (NON_EMPTY_GROUP otherwise), writing tombstones
for everything the group still has (group_writer.delete_group): also, before the group's, one
for each partition an open transaction committed for it, which cancels that pending offset live
and on a load alike (Kafka's deleteAllOffsets). Without it, a COMMIT marker already in the log
but not yet read when the group is deleted applies the offset, on a load, before the group
tombstone, which replay then refuses: the group would come back after a failover. The group
tombstone's log offset outlives the group (GroupShard.deleted_positions), so a transaction's
offset that landed before it, not yet pending when it was written, is not applied either.

A deleted topic's offsets go with it, in every group (Kafka's onPartitionsDeleted): a topic
created again under the name is another topic, whose consumers must not start at the old one's
offsets. `delete_topic_offsets` tombstones them, the committed ones and those an open
transaction committed (whose marker would set them on the new topic); subscriptions stay. Which
they are is the caller's test of each offset: of a topic the image deleted, or recorded under a
topic id (OffsetCommitValue.topic_id) the image no longer shows for its topic.

OffsetDelete (KIP-496) writes a tombstone for each committed offset it names, and for each it
names that an open transaction committed, cancelling it as Kafka's removeOffsets does (else its
marker would set the offset the admin was told is deleted), except for the partitions of topics
a member subscribes to, by name or by regex (GROUP_SUBSCRIBED_TO_TOPIC): their owner may commit
again at any moment, and a deleted offset would send a newly assigned member to
auto.offset.reset instead. An empty group subscribes to nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set

from samsa.common.errors import ErrorCode
from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.group_assignment import assignor_name_of, resolve
from samsa.services.coordinator.group_model import (
    STABLE,
    ConsumerGroup,
    GroupConfig,
    GroupShard,
    TopicPartition,
    members_counted,
    to_topic_partitions,
)
from samsa.services.coordinator.group_writer import GroupResult, RecordCollector, delete_group
from samsa.services.runtime.caller import Visible, everything
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g

# Whether an offset (its partition, its value) is of a deleted topic; an open transaction's
# offset, by its partition and value.
OffsetTest = Callable[[TopicPartition, g.OffsetCommitValue], bool]
PendingOffset = tuple[TopicPartition, g.OffsetCommitValue]

EMPTY = c.CONSUMER_GROUP_STATE_EMPTY
ASSIGNING = c.CONSUMER_GROUP_STATE_ASSIGNING
RECONCILING = c.CONSUMER_GROUP_STATE_RECONCILING
STABLE_GROUP = c.CONSUMER_GROUP_STATE_STABLE
DEAD = c.CONSUMER_GROUP_STATE_DEAD


def group_state(group: ConsumerGroup) -> int:
    if not group.members:
        return EMPTY
    if group.group_epoch > group.assignment_epoch:
        return ASSIGNING
    for member in group.members.values():
        if member.state != STABLE or member.member_epoch != group.assignment_epoch:
            return RECONCILING
    return STABLE_GROUP


def list_groups(
    shard: GroupShard, states_filter: Iterable[int], visible: Visible = everything
) -> c.ListGroupsResponse:
    """The shard's groups in the wanted states that `visible` admits (the caller may DESCRIBE:
    caller.listing_filter)."""
    wanted = set(states_filter)
    response = c.ListGroupsResponse()
    for group_id in sorted(shard.groups):
        if not visible(group_id):
            continue
        group = shard.groups[group_id]
        state = group_state(group)
        if not wanted or state in wanted:
            response.groups.add(
                group_id=group_id,
                state=state,  # type: ignore[arg-type]
                member_count=len(group.members),
            )
    return response


def describe_groups(
    shard: GroupShard, group_ids: Iterable[str], config: GroupConfig
) -> c.DescribeGroupsResponse:
    response = c.DescribeGroupsResponse()
    for group_id in group_ids:
        group = shard.groups.get(group_id)
        if group is None:
            response.groups.add(
                group_id=group_id,
                error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),  # type: ignore[arg-type]
                error_message=f"group {group_id!r} does not exist",
                state=DEAD,
            )
            continue
        described = response.groups.add(
            group_id=group_id,
            state=group_state(group),  # type: ignore[arg-type]
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=assignor_name_of(group, config.default_assignor),
        )
        for member_id in sorted(group.members):
            member = group.members[member_id]
            described.members.add(
                member_id=member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                member_epoch=member.member_epoch,
                subscription=member.subscription(),
                assignment=to_topic_partitions(member.assigned),
                target_assignment=to_topic_partitions(group.target.get(member_id, {})),
            )
    return response


def delete_groups(
    shard: GroupShard, group_ids: Iterable[str], pending: Callable[[str], Set[TopicPartition]]
) -> GroupResult[c.DeleteGroupsResponse]:
    """DeleteGroups; `pending(group_id)`: the group's partitions an open transaction committed
    (tombstoned too: see the module docstring)."""
    writer = RecordCollector(shard)
    response = c.DeleteGroupsResponse()
    for group_id in group_ids:
        group = shard.groups.get(group_id)
        if group is None:
            code, message = ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist"
        elif group.members:
            code, message = (
                ErrorCode.NON_EMPTY_GROUP,
                f"group {group_id!r} has {members_counted(len(group.members))}: they must leave "
                "first",
            )
        else:
            delete_group(writer, group, pending(group_id))
            code, message = ErrorCode.NONE, ""
        response.groups.add(
            group_id=group_id,
            error_code=int(code),  # type: ignore[arg-type]
            error_message=message,
        )
    return writer.result(response)


def delete_offsets(
    shard: GroupShard,
    group_id: str,
    partitions: Iterable[TopicPartition],
    pending: Set[TopicPartition],
) -> GroupResult[c.OffsetDeleteResponse]:
    """OffsetDelete: tombstones for the named offsets, committed or `pending` in an open
    transaction, that no member's subscription covers (see the module docstring); a partition
    with neither succeeds as it is."""
    group = shard.groups.get(group_id)
    if group is None:
        return GroupResult(
            [],
            c.OffsetDeleteResponse(
                error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),  # type: ignore[arg-type]
                error_message=f"group {group_id!r} does not exist",
            ),
        )
    writer = RecordCollector(shard)
    response = c.OffsetDeleteResponse()
    subscribed: dict[str, bool] = {}
    for topic, partition in sorted(set(partitions)):
        if topic not in subscribed:
            subscribed[topic] = any(
                topic in resolve(m.topic_names, m.topic_regex, {topic: 0})
                for m in group.members.values()
            )
        code, message = ErrorCode.NONE, ""
        if subscribed[topic]:
            code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            message = (
                f"a member of group {group_id!r} subscribes to {topic!r}: its offsets stay while "
                "it does (stop the group's consumers first)"
            )
        elif (topic, partition) in group.offsets or (topic, partition) in pending:
            writer.write(records.offset_commit(group_id, topic, partition, None))
        response.partitions.add(
            topic=topic,
            partition=partition,
            error_code=int(code),  # type: ignore[arg-type]
            error_message=message,
        )
    return writer.result(response)


def delete_topic_offsets(
    shard: GroupShard, doomed: OffsetTest, pending: Mapping[str, Iterable[PendingOffset]]
) -> GroupResult[None]:
    """Tombstones for every group's offsets of deleted topics, those `doomed` says are (by
    partition and value): committed, or in `pending` (group id -> the partitions and values an
    open transaction committed for it)."""
    writer = RecordCollector(shard)
    for group_id in sorted(set(shard.groups) | set(pending)):
        group = shard.groups.get(group_id)
        named = {tp for tp, value in pending.get(group_id, ()) if doomed(tp, value)}
        if group is not None:
            named |= {tp for tp, value in group.offsets.items() if doomed(tp, value)}
        for topic, partition in sorted(named):
            writer.write(records.offset_commit(group_id, topic, partition, None))
    return writer.result(None)
