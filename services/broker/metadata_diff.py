"""What a broker must do to its partitions when the metadata image changes: pure.

Theory of operation. The broker follows the metadata log (KRaft-style: it replays the same
records the controllers commit) and, after each step, compares the image it had with the one it
has now. `partition_changes(old, new, broker_id)` turns that comparison into a list of actions for
the partitions this broker hosts — become leader, become follower, stop hosting, new configs —
that the partition host carries out. A broker that starts (or reloads a snapshot) diffs against
the empty image, so recovery and steady state take the same path (STYLE habit 2).

Rules (Kafka's, for a broker with replicas of a partition):
- the broker is the leader in `new` and was not, or the leader epoch changed: BecomeLeader;
- it is a replica but not the leader, and the leader or its epoch changed: BecomeFollower
  (leader_id -1 when the partition is offline);
- it was a replica and is not any more, or the topic is gone: StopReplica(delete=True) — also when
  the topic was deleted and re-created under the same name (a new topic id), so the old data never
  mixes with the new topic's;
- the topic's dynamic configs changed and the broker keeps hosting it: UpdateConfig.

Invariant: actions on one partition come in a safe order — a StopReplica comes before a
BecomeLeader/BecomeFollower of the same directory — and partitions are sorted so the output is
deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.metadata.image import MetadataImage, PartitionState, TopicImage

TOPIC_RESOURCE = 1  # ConfigResourceType.CONFIG_RESOURCE_TYPE_TOPIC


@dataclass(frozen=True)
class BecomeLeader:
    topic: str
    partition: int
    topic_id: bytes
    leader_epoch: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class BecomeFollower:
    topic: str
    partition: int
    topic_id: bytes
    leader_id: int
    leader_epoch: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class StopReplica:
    topic: str
    partition: int
    delete: bool


@dataclass(frozen=True)
class UpdateConfig:
    topic: str
    partition: int
    configs: Mapping[str, str]


PartitionAction = BecomeLeader | BecomeFollower | StopReplica | UpdateConfig


def topic_configs(image: MetadataImage, topic: str) -> Mapping[str, str]:
    """The topic's dynamic configs (Kafka names → values); empty when none are set."""
    return image.configs.get((TOPIC_RESOURCE, topic), {})


def hosted_partitions(
    image: MetadataImage, broker_id: int
) -> dict[tuple[str, int], PartitionState]:
    """Every partition of which `broker_id` holds a replica, by (topic, partition)."""
    return {
        (topic.name, state.partition): state
        for topic in image.topics.values()
        for state in topic.partitions.values()
        if broker_id in state.replicas
    }


def partition_changes(
    old: MetadataImage, new: MetadataImage, broker_id: int
) -> list[PartitionAction]:
    """The actions that take this broker's partitions from `old` to `new` (see module doc)."""
    before = hosted_partitions(old, broker_id)
    after = hosted_partitions(new, broker_id)
    stops: list[PartitionAction] = []
    starts: list[PartitionAction] = []
    for key in sorted(before.keys() | after.keys()):
        topic_name, partition = key
        old_topic = old.topics.get(topic_name)
        new_topic = new.topics.get(topic_name)
        old_state, new_state = before.get(key), after.get(key)
        same_topic = (
            old_topic is not None
            and new_topic is not None
            and old_topic.topic_id == new_topic.topic_id
        )
        if old_state is not None and (new_state is None or not same_topic):
            stops.append(StopReplica(topic_name, partition, delete=True))
            old_state = None
        if new_state is None:
            continue
        assert new_topic is not None
        starts.extend(_hosted_changes(old, new, old_state, new_state, new_topic, broker_id))
    return stops + starts


def _hosted_changes(
    old: MetadataImage,
    new: MetadataImage,
    old_state: PartitionState | None,
    new_state: PartitionState,
    topic: TopicImage,
    broker_id: int,
) -> list[PartitionAction]:
    configs = topic_configs(new, topic.name)
    leadership_changed = (
        old_state is None
        or old_state.leader != new_state.leader
        or old_state.leader_epoch != new_state.leader_epoch
    )
    if leadership_changed:
        if new_state.leader == broker_id:
            return [
                BecomeLeader(
                    topic.name, new_state.partition, topic.topic_id, new_state.leader_epoch, configs
                )
            ]
        return [
            BecomeFollower(
                topic.name,
                new_state.partition,
                topic.topic_id,
                new_state.leader,
                new_state.leader_epoch,
                configs,
            )
        ]
    if topic_configs(old, topic.name) != configs:
        return [UpdateConfig(topic.name, new_state.partition, configs)]
    return []
