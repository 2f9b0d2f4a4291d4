"""Random metadata batches that replay on a given image, for the broker's seeded tests: topics
created, partitions added, leaders, ISRs and replicas changed, topics deleted and re-created
(also within one batch), configs set to new or to the same values, brokers fenced and unfenced."""

from __future__ import annotations

import random

from samsa.metadata.image import NO_LEADER, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import InvalidBatchError, replay
from samsa.v1 import metadata_pb2 as m

BROKERS = (1, 2, 3, 4)
NAMES = ("a", "b", "c", "d", "e", "f")


def record(**kind: object) -> m.MetadataRecord:
    return m.MetadataRecord(**kind)  # type: ignore[arg-type]


def start_image() -> MetadataImage:
    image = MetadataImage.empty()
    registrations = [
        record(
            register_broker=m.RegisterBrokerRecord(broker_id=b, incarnation_id="i", endpoint="h")
        )
        for b in BROKERS
    ]
    image = replay(image, make_batch(image, registrations, 0))
    unfences = [
        record(unfence_broker=m.UnfenceBrokerRecord(broker_id=b, broker_epoch=b - 1))
        for b in BROKERS
    ]
    return replay(image, make_batch(image, unfences, 0))


def random_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    """One record meant to fit `image` (replay may still refuse it: the caller skips those)."""
    roll = rng.random()
    free = [name for name in NAMES if name not in image.topics]
    if (roll < 0.1 and free) or not image.topics:
        return record(topic=m.TopicRecord(name=rng.choice(free), topic_id=rng.randbytes(16)))
    if roll < 0.15:
        broker = image.brokers[rng.choice(BROKERS)]
        kind = "fence_broker" if rng.random() < 0.5 else "unfence_broker"
        record_type = m.FenceBrokerRecord if kind == "fence_broker" else m.UnfenceBrokerRecord
        return record(
            **{kind: record_type(broker_id=broker.broker_id, broker_epoch=broker.broker_epoch)}
        )
    name = rng.choice(sorted(image.topics))
    topic = image.topics[name]
    if roll < 0.2:
        return record(remove_topic=m.RemoveTopicRecord(topic_id=topic.topic_id))
    if roll < 0.35:
        value = rng.choice(["1", "2", None])  # "1" twice in a row: a new but equal map
        config = m.ConfigRecord(
            resource_type=TOPIC_RESOURCE, resource_name=name, name="retention.ms"
        )
        if value is not None:
            config.value = value
        return record(config=config)
    if roll < 0.55 or not topic.partitions:
        replicas = rng.sample(BROKERS, rng.randint(1, 3))
        return record(
            partition=m.PartitionRecord(
                topic_id=topic.topic_id,
                partition=len(topic.partitions),
                replicas=replicas,
                isr=replicas,
                leader=replicas[0],
            )
        )
    number = rng.choice(sorted(topic.partitions))
    return record(partition_change=random_change(rng, topic.topic_id, number))


def random_change(rng: random.Random, topic_id: bytes, number: int) -> m.PartitionChangeRecord:
    """A leader, ISR and/or replica change: new replicas come with an ISR and leader in them."""
    change = m.PartitionChangeRecord(topic_id=topic_id, partition=number)
    replicas = rng.sample(BROKERS, rng.randint(1, 3))
    if rng.random() < 0.3:
        change.replicas.ids.extend(replicas)
    if rng.random() < 0.6:
        change.isr.ids.extend(rng.sample(replicas, rng.randint(0, len(replicas))))
    if rng.random() < 0.6:
        change.leader = rng.choice([NO_LEADER, *replicas])
    return change


def random_batch(rng: random.Random, image: MetadataImage) -> list[m.MetadataRecord]:
    """Up to ten records that replay in order on `image` (refused candidates are dropped)."""
    records: list[m.MetadataRecord] = []
    current = image
    for _ in range(rng.randint(1, 10)):
        candidate = random_record(rng, current)
        try:
            current = replay(current, make_batch(current, [candidate], 0))
        except InvalidBatchError:
            continue
        records.append(candidate)
    return records


def named_topics(old: MetadataImage, records: list[m.MetadataRecord]) -> set[str]:
    """Names of the topics the records touch: by name, or by id in `old` or in the batch."""
    names_by_id = dict(old.topic_names)
    names: set[str] = set()
    for item in records:
        kind = item.WhichOneof("record")
        body = getattr(item, kind)
        if kind == "topic":
            names_by_id[body.topic_id] = body.name
            names.add(body.name)
        elif kind == "config":
            names.add(body.resource_name)
        elif kind in ("partition", "partition_change", "remove_topic"):
            names.add(names_by_id[body.topic_id])
    return names
