"""Goal: replaying a batch copies a topic's partition map at most once (ImageBuilder keeps its own
copy for the rest of the batch), yet the result is the same image as replaying record by record,
and the image the batch started from never changes.

Method: the same records replayed as one batch and as one batch per record must give equal
topics; an image's values are captured (as plain data) before a batch that changes, removes and
re-creates its topics, and compared afterwards; a seeded loop of random batches checks both
properties on every step.
"""

from __future__ import annotations

import random

from metadata_helpers import apply, change, config, partition, register, remove, topic, unfence

from samsa.metadata.image import NO_LEADER, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.replay import InvalidBatchError
from samsa.v1 import metadata_pb2 as m

T1 = b"\x01" * 16
T2 = b"\x02" * 16
T3 = b"\x03" * 16


def cluster() -> MetadataImage:
    image = apply(MetadataImage.empty(), register(1), register(2), register(3))
    return apply(image, unfence(1, 0), unfence(2, 1), unfence(3, 2))


def frozen(image: MetadataImage) -> tuple[object, ...]:
    """The image's values as plain data, so that a later in-place change of a map shows."""
    return (
        image.end_offset,
        image.hash,
        sorted(image.brokers.items()),
        sorted(
            (name, t.topic_id, sorted(t.partitions.items())) for name, t in image.topics.items()
        ),
        sorted(image.topic_names.items()),
        sorted((key, sorted(values.items())) for key, values in image.configs.items()),
    )


def replicas_of(number: int) -> list[int]:
    return [number % 3 + 1, (number + 1) % 3 + 1, (number + 2) % 3 + 1]


def test_one_batch_creating_a_large_topic_equals_record_by_record_replay() -> None:
    records = [topic("big", T1)] + [partition(T1, n, replicas_of(n)) for n in range(2000)]
    in_one = apply(cluster(), *records)
    one_by_one = cluster()
    for record in records:
        one_by_one = apply(one_by_one, record)
    assert in_one.topics == one_by_one.topics
    partitions = in_one.topics["big"].partitions
    assert len(partitions) == 2000
    for number in (0, 1, 1000, 1999):
        state = partitions[number]
        assert state.replicas == tuple(replicas_of(number)) and state.isr == state.replicas
        assert state.leader == replicas_of(number)[0] and state.partition_epoch == 0


def test_a_batch_changing_many_partitions_leaves_the_old_image_unchanged() -> None:
    before = apply(
        cluster(),
        topic("a", T1),
        *[partition(T1, n, replicas_of(n)) for n in range(50)],
        topic("b", T2),
        partition(T2, 0, [1, 2]),
    )
    untouched = before.topics["b"]
    captured = frozen(before)
    after = apply(
        before,
        *[change(T1, n, isr=replicas_of(n)[:2]) for n in range(0, 50, 2)],
        change(T1, 1, leader=NO_LEADER),
        change(T1, 1, isr=[2]),
        partition(T1, 50, [1, 2, 3]),
        remove(T2),
        topic("b", T3),
        partition(T3, 0, [3]),
        config(TOPIC_RESOURCE, "a", "retention.ms", "1000"),
    )
    assert frozen(before) == captured, "replay changed the image it started from"
    assert before.topics["a"].partitions is not after.topics["a"].partitions
    assert before.topics["b"] is untouched and after.topics["b"].topic_id == T3
    assert after.topics["a"].partitions[0].isr == (1, 2)
    assert after.topics["a"].partitions[1].isr == (2,)
    assert after.topics["a"].partitions[1].partition_epoch == 2, "two changes in one batch"
    assert len(after.topics["a"].partitions) == 51


def random_records(rng: random.Random, image: MetadataImage) -> list[m.MetadataRecord]:
    """A few records that fit `image` when applied in order (each is checked against the image
    the previous ones make, so a batch may touch a topic it created or removed itself)."""
    records: list[m.MetadataRecord] = []
    current = image
    for _ in range(rng.randint(1, 12)):
        candidate = random_record(rng, current)
        try:
            current = apply(current, candidate)
        except InvalidBatchError:  # e.g. a change that changes nothing: pick another
            continue
        records.append(candidate)
    return records


def random_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    names = sorted(image.topics)
    if not names or rng.random() < 0.15:
        free = [n for n in "abcde" if n not in image.topics]
        if free:
            topic_id = rng.randbytes(16)
            return topic(rng.choice(free), topic_id)
    name = rng.choice(names)
    current = image.topics[name]
    roll = rng.random()
    if roll < 0.05:
        return remove(current.topic_id)
    if roll < 0.15:
        return config(TOPIC_RESOURCE, name, "retention.ms", rng.choice(["1", "2", None]))
    if roll < 0.45 or not current.partitions:
        replicas = rng.sample([1, 2, 3], rng.randint(1, 3))
        return partition(current.topic_id, len(current.partitions), replicas)
    number = rng.choice(sorted(current.partitions))
    replicas = list(current.partitions[number].replicas)
    isr = rng.sample(replicas, rng.randint(0, len(replicas)))
    return change(current.topic_id, number, isr=isr, leader=rng.choice([NO_LEADER, *replicas]))


def test_random_batches_match_record_by_record_replay_and_never_touch_the_old_image() -> None:
    for seed in range(200):
        rng = random.Random(seed)
        image = cluster()
        for _ in range(6):
            records = random_records(rng, image)
            if not records:
                continue
            captured = frozen(image)
            in_one = apply(image, *records)
            one_by_one = image
            for record in records:
                one_by_one = apply(one_by_one, record)
            assert frozen(image) == captured, f"seed {seed}: the old image changed"
            assert in_one.topics == one_by_one.topics, f"seed {seed}"
            assert in_one.configs == one_by_one.configs, f"seed {seed}"
            image = in_one
