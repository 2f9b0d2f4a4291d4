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
- the topic's dynamic configs changed and the broker keeps hosting it: UpdateConfig. The configs
  are the effective ones: the cluster-wide defaults below the topic's own
  (metadata/topic_defaults.py), so a change of a default reaches every topic without its own
  value of that key, at run time.

Invariant: actions on one partition come in a safe order — a StopReplica comes before a
BecomeLeader/BecomeFollower of the same directory — and partitions are sorted so the output is
deterministic.

Cost. Replay shares every unchanged `TopicImage` between images, so a topic whose image is the
same object in both and whose configs are the same (or equal) has nothing to do: only the topics
that changed (`changed_topics`) are walked, after one cheap pass over the topic names. A metadata
batch that fences a broker or changes one ISR costs the size of the topics it touched, not of the
cluster (10,000 partitions per broker is the target). A change of the cluster-wide defaults
walks every topic once (rare: an operator's command).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.metadata.image import MetadataImage, PartitionState, TopicImage
from samsa.metadata.topic_defaults import cluster_defaults, effective_topic_configs


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
    """The topic's configs as they apply (Kafka names → values): its own over the cluster-wide
    defaults; empty when neither sets any."""
    return effective_topic_configs(image, topic)


def changed_topics(old: MetadataImage, new: MetadataImage) -> set[str]:
    """Names of the topics whose image or dynamic configs differ between `old` and `new`
    (created, deleted, re-created, partitions or configs changed). Any other topic is the very
    same `TopicImage` in both, so nothing about its partitions can have changed."""
    changed = old.topics.keys() - new.topics.keys()
    defaults_changed = cluster_defaults(old) != cluster_defaults(new)
    for name, topic in new.topics.items():
        same = old.topics.get(name) is topic and _same_configs(old, new, name)
        if not same or (defaults_changed and topic_configs(old, name) != topic_configs(new, name)):
            changed.add(name)
    return changed


def _same_configs(old: MetadataImage, new: MetadataImage, topic: str) -> bool:
    """Replay replaces a config map only when a record touches it: identity is the usual answer,
    equality covers a record that set a value it already had."""
    before, after = old.topic_configs(topic), new.topic_configs(topic)
    return before is after or before == after


def _hosted(topic: TopicImage | None, broker_id: int) -> dict[int, PartitionState]:
    """The partitions of `topic` of which `broker_id` holds a replica, by number."""
    if topic is None:
        return {}
    return {
        state.partition: state for state in topic.partitions.values() if broker_id in state.replicas
    }


def partition_changes(
    old: MetadataImage, new: MetadataImage, broker_id: int
) -> list[PartitionAction]:
    """The actions that take this broker's partitions from `old` to `new` (see module doc)."""
    stops: list[PartitionAction] = []
    starts: list[PartitionAction] = []
    for topic_name in sorted(changed_topics(old, new)):
        old_topic = old.topics.get(topic_name)
        new_topic = new.topics.get(topic_name)
        before, after = _hosted(old_topic, broker_id), _hosted(new_topic, broker_id)
        same_topic = (
            old_topic is not None
            and new_topic is not None
            and old_topic.topic_id == new_topic.topic_id
        )
        configs = (topic_configs(old, topic_name), topic_configs(new, topic_name))
        for partition in sorted(before.keys() | after.keys()):
            old_state, new_state = before.get(partition), after.get(partition)
            if old_state is not None and (new_state is None or not same_topic):
                stops.append(StopReplica(topic_name, partition, delete=True))
                old_state = None
            if new_state is None:
                continue
            assert new_topic is not None
            starts.extend(_hosted_changes(configs, old_state, new_state, new_topic, broker_id))
    return stops + starts


def _hosted_changes(
    old_and_new_configs: tuple[Mapping[str, str], Mapping[str, str]],
    old_state: PartitionState | None,
    new_state: PartitionState,
    topic: TopicImage,
    broker_id: int,
) -> list[PartitionAction]:
    old_configs, configs = old_and_new_configs
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
    if old_configs != configs:
        return [UpdateConfig(topic.name, new_state.partition, configs)]
    return []
