"""How handlers write: records applied through replay as they are built, and the writes that
several handlers share (bumping the group epoch, removing a member, deleting a group).

Theory of operation. A mutating handler first validates against the shard as it is, answering an
error with no record; then it builds its records one at a time through `RecordCollector.write`,
which replays each into the shard before the next is built (so later decisions see earlier ones) and
keeps them for the log. The handler returns `GroupResult(records, response)`. The runtime appends
the records to `__consumer_offsets` and answers only once they are durable; should the append
fail, the shard is ahead of the log and the runtime must rebuild it from the log (or give the
partition up) — the same recovery as a failover.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from typing import Generic, TypeVar

from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.group_model import (
    IN_FLIGHT,
    ConsumerGroup,
    GroupShard,
    TopicPartition,
)
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_replay import replay
from samsa.v1 import group_records_pb2 as g

R = TypeVar("R")


@dataclass(frozen=True)
class GroupResult(Generic[R]):
    """Records to append as one batch (maybe none; already applied to the shard) and the answer
    to send once they are durable."""

    records: list[GroupRecord]
    response: R


class RecordCollector:
    """Replays each record into the shard as it is written, and keeps the records in order."""

    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.records: list[GroupRecord] = []

    def write(self, record: GroupRecord) -> None:
        replay(self.shard, record, IN_FLIGHT)  # durable later: group_replay.mark_durable
        self.records.append(record)

    def result(self, response: R) -> GroupResult[R]:
        return GroupResult(self.records, response)


def bump_group_epoch(
    writer: RecordCollector, group: ConsumerGroup, digest: bytes | None, empty_since_ms: int = 0
) -> None:
    """group_epoch + 1 (and a new subscription digest when given; when the group was left
    empty, if it just was)."""
    value = g.GroupMetadataValue(
        group_epoch=group.group_epoch + 1,
        subscription_digest=group.subscription_digest if digest is None else digest,
        empty_since_ms=empty_since_ms,
    )
    writer.write(records.group_metadata(group.group_id, value))


def remove_member(
    writer: RecordCollector, group: ConsumerGroup, member_id: str, now_ms: int
) -> None:
    """A leave with epoch -1 (or an expiry): the member's records go, the group epoch moves so
    that the others get its partitions; the last member's removal records when the group was
    left empty (offset retention counts from it)."""
    assert member_id in group.members
    for record in records.member_tombstones(group.group_id, member_id):
        writer.write(record)
    bump_group_epoch(writer, group, None, 0 if group.members else now_ms)


def delete_group(
    writer: RecordCollector, group: ConsumerGroup, pending: Set[TopicPartition] = frozenset()
) -> None:
    """Tombstones for everything a group without members still has: its offsets, and the
    partitions `pending` in an open transaction (a COMMIT marker already in the log would apply
    them, on a load, before the group's tombstone), then the group. The caller checks that it
    has no members."""
    assert not group.members, group.group_id
    for topic, partition in sorted(set(group.offsets) | set(pending)):
        writer.write(records.offset_commit(group.group_id, topic, partition, None))
    for member_id in sorted(group.target):  # targets outliving members: none, but be total
        writer.write(records.target_assignment_member(group.group_id, member_id, None))
    writer.write(records.target_assignment_metadata(group.group_id, None))
    writer.write(records.group_metadata(group.group_id, None))
