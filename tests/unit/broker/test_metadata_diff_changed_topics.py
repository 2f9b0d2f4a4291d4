"""Goal: `partition_changes`, which walks only the topics that changed between two images, gives
exactly the actions of the full walk over every partition it replaced, and `changed_topics`
names every topic whose partitions or configs changed and no topic the batch did not touch.

Method: the full walk is kept below as a deliberately dumb reference (etcd's quick_test.go). A
seeded loop builds images through real `replay` of random batches (metadata_batches.py: topics
created, partitions added, leaders, ISRs and replicas changed, topics deleted and re-created, also
within one batch, configs set to new or to the same values, brokers fenced) and compares both for
every broker after every batch. A failure names its seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from metadata_batches import BROKERS, named_topics, random_batch, record, start_image

from samsa.metadata.image import MetadataImage, PartitionState
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.metadata.metadata_diff import (
    BecomeFollower,
    BecomeLeader,
    PartitionAction,
    StopReplica,
    UpdateConfig,
    changed_topics,
    partition_changes,
    topic_configs,
)
from samsa.v1 import metadata_pb2 as m

# --- the reference: the full walk partition_changes did before it skipped unchanged topics ---


def reference_hosted(image: MetadataImage, broker_id: int) -> dict[tuple[str, int], PartitionState]:
    return {
        (topic.name, state.partition): state
        for topic in image.topics.values()
        for state in topic.partitions.values()
        if broker_id in state.replicas
    }


def reference_changes(
    old: MetadataImage, new: MetadataImage, broker_id: int
) -> list[PartitionAction]:
    before = reference_hosted(old, broker_id)
    after = reference_hosted(new, broker_id)
    stops: list[PartitionAction] = []
    starts: list[PartitionAction] = []
    for key in sorted(before.keys() | after.keys()):
        name, number = key
        old_topic, new_topic = old.topics.get(name), new.topics.get(name)
        old_state, new_state = before.get(key), after.get(key)
        same_topic = (
            old_topic is not None
            and new_topic is not None
            and old_topic.topic_id == new_topic.topic_id
        )
        if old_state is not None and (new_state is None or not same_topic):
            stops.append(StopReplica(name, number, delete=True))
            old_state = None
        if new_state is None:
            continue
        assert new_topic is not None
        configs = topic_configs(new, name)
        if old_state is None or (old_state.leader, old_state.leader_epoch) != (
            new_state.leader,
            new_state.leader_epoch,
        ):
            if new_state.leader == broker_id:
                starts.append(
                    BecomeLeader(name, number, new_topic.topic_id, new_state.leader_epoch, configs)
                )
            else:
                starts.append(
                    BecomeFollower(
                        name,
                        number,
                        new_topic.topic_id,
                        new_state.leader,
                        new_state.leader_epoch,
                        configs,
                    )
                )
        elif topic_configs(old, name) != configs:
            starts.append(UpdateConfig(name, number, configs))
    return stops + starts


def configs_of(image: MetadataImage, name: str) -> Mapping[str, str]:
    return dict(topic_configs(image, name))


# --- the tests -------------------------------------------------------------------------------


def test_partition_changes_equals_the_full_walk_on_random_batches() -> None:
    compared = 0
    for seed in range(300):
        rng = random.Random(seed)
        image = start_image()
        for _ in range(8):
            records = random_batch(rng, image)
            if not records:
                continue
            new = replay(image, make_batch(image, records, 0))
            for broker_id in BROKERS:
                expected = reference_changes(image, new, broker_id)
                assert partition_changes(image, new, broker_id) == expected, f"seed {seed}"
                compared += bool(expected)
            image = new
    assert compared > 1000, "the random batches must produce actions to compare"


def test_changed_topics_covers_every_change_and_only_topics_the_batch_named() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        image = start_image()
        for _ in range(8):
            records = random_batch(rng, image)
            if not records:
                continue
            new = replay(image, make_batch(image, records, 0))
            changed = changed_topics(image, new)
            differs = {
                name
                for name in image.topics.keys() | new.topics.keys()
                if image.topics.get(name) != new.topics.get(name)
                or configs_of(image, name) != configs_of(new, name)
            }
            assert differs <= changed, f"seed {seed}: a changed topic was missed"
            assert changed <= named_topics(image, records), f"seed {seed}: an untouched topic"
            image = new


def test_a_broker_fence_changes_no_topic_and_the_diff_is_empty() -> None:
    image = start_image()
    records = [
        record(topic=m.TopicRecord(name="a", topic_id=b"\x01" * 16)),
        record(
            partition=m.PartitionRecord(
                topic_id=b"\x01" * 16, partition=0, replicas=[1, 2], isr=[1, 2], leader=1
            )
        ),
    ]
    image = replay(image, make_batch(image, records, 0))
    fence = record(fence_broker=m.FenceBrokerRecord(broker_id=3, broker_epoch=2))
    fenced = replay(image, make_batch(image, [fence], 0))
    assert fenced.brokers[3].fenced
    assert changed_topics(image, fenced) == set()
    assert partition_changes(image, fenced, 1) == []
    assert partition_changes(MetadataImage.empty(), fenced, 1) == [
        BecomeLeader("a", 0, b"\x01" * 16, 0, {})
    ]
