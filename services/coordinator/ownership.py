"""Which partitions of the coordinator topics (`__consumer_offsets`, `__transaction_state`) this
coordinator owns, and what changed.

Theory of operation (DESIGN §5, §6). The controller gives each partition of each coordinator
topic to one live coordinator (CoordinatorAssignmentRecord). This process owns a partition only
while its own image says so under the registration it holds now: the assignment names this
coordinator id *and* this process's coordinator epoch, and the registration is unfenced
(`valid_assignment`). `owned_partitions` answers for one topic at a time, by partition number.
A restarted process (new epoch) therefore owns nothing its previous incarnation was given until
the controller reassigns it — with assignment_epoch + 1, the producer epoch that fences the old
incarnation's writer.

`ownership_changes` turns two such views into partitions to load and to drop. A partition whose
assignment epoch or producer id changed is dropped and loaded again: its writer identity changed.

Also here, since the servicer and the loader need them from the same image: the leader endpoint
of a partition, the topics a group may subscribe to (and their ids), and the topics an image change
deleted (whose committed offsets go with them). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.metadata.coordinators import COORDINATOR_TOPICS, INTERNAL_TOPICS, valid_assignment
from samsa.metadata.image import CoordinatorAssignment, MetadataImage


def owned_partitions(
    image: MetadataImage, topic: str, coordinator_id: int, coordinator_epoch: int
) -> dict[int, CoordinatorAssignment]:
    """The partitions of the coordinator topic `topic` that `image` says this process (id and
    epoch) owns now, by partition number."""
    assert topic in COORDINATOR_TOPICS, topic
    if coordinator_epoch < 0:
        return {}
    owned: dict[int, CoordinatorAssignment] = {}
    for (name, partition), assignment in image.coordinator_assignments.items():
        if (
            name == topic
            and assignment.coordinator_id == coordinator_id
            and assignment.coordinator_epoch == coordinator_epoch
            and valid_assignment(image, topic, partition) is not None
        ):
            owned[partition] = assignment
    return owned


@dataclass(frozen=True)
class OwnershipChanges:
    """Partitions to load (with the assignment to write under) and to drop, both sorted."""

    load: list[CoordinatorAssignment]
    drop: list[int]


def ownership_changes(
    before: Mapping[int, CoordinatorAssignment], after: Mapping[int, CoordinatorAssignment]
) -> OwnershipChanges:
    """What to do when the owned partitions go from `before` to `after`."""
    drop = sorted(
        partition
        for partition, old in before.items()
        if partition not in after or not _same_writer(old, after[partition])
    )
    load = [
        after[partition]
        for partition in sorted(after)
        if partition not in before or not _same_writer(before[partition], after[partition])
    ]
    return OwnershipChanges(load, drop)


def _same_writer(a: CoordinatorAssignment, b: CoordinatorAssignment) -> bool:
    return a.assignment_epoch == b.assignment_epoch and a.producer_id == b.producer_id


def leader_endpoint(image: MetadataImage, topic: str, partition: int) -> str | None:
    """The endpoint the partition's leader serves members on (its internal listener when it has
    one: runtime/listeners.py), or None when it has no live leader in `image`."""
    topic_image = image.topics.get(topic)
    state = topic_image.partitions.get(partition) if topic_image else None
    if state is None or state.leader < 0:
        return None
    broker = image.brokers.get(state.leader)
    if broker is None or broker.fenced:
        return None
    return broker.member_endpoint


def deleted_topics(old: MetadataImage, new: MetadataImage) -> frozenset[str]:
    """The topics `old` has and `new` no longer has under the same topic id: deleted, or
    deleted and created again under their name (a new topic, whose offsets start again)."""
    if old.topics is new.topics:
        return frozenset()
    gone = []
    for name, topic in old.topics.items():
        now = new.topics.get(name)
        if now is None or now.topic_id != topic.topic_id:
            gone.append(name)
    return frozenset(gone)


def subscribable_topic_ids(image: MetadataImage) -> dict[str, bytes]:
    """Topic name -> topic id (KIP-516), for every topic a group may subscribe to: recorded with
    each committed offset (group_records.proto's OffsetCommitValue.topic_id)."""
    return {
        name: topic.topic_id for name, topic in image.topics.items() if name not in INTERNAL_TOPICS
    }


def subscribable_topics(image: MetadataImage) -> dict[str, int]:
    """Topic name -> partition count, for every topic a group may subscribe to."""
    return {
        name: len(topic.partitions)
        for name, topic in image.topics.items()
        if name not in INTERNAL_TOPICS
    }
