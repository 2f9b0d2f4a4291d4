"""Goal: partitions added to a topic continue its leaders' round-robin, as if the topic had been
created with them (Kafka's addPartitions starts from partition 0's leader), so leadership stays
balanced, within one partition per broker, with and without racks.

Method: clusters of 6 unfenced brokers, racks given in id order (a, b, a, b, …), grouped by id
(a, a, a, b, b, b: rack-alternated order differs from id order) or not at all; a topic created
with CreateTopics and grown with CreatePartitions, both decided by the real control plane with a
seeded Random and committed with the real replay, for every count of first and added partitions
up to two rounds. Round-robin means partition p and p + 6 have the same leader; balance means
leader counts differ by at most one.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from metadata_helpers import apply, register, unfence

from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c

BROKERS = range(1, 7)
RACKS = {
    "alternating": ["a", "b", "a", "b", "a", "b"],
    "grouped": ["a", "a", "a", "b", "b", "b"],
    "none": ["", "", "", "", "", ""],
}


def cluster(racks: list[str]) -> MetadataImage:
    image = MetadataImage.empty()
    for broker_id, rack in zip(BROKERS, racks, strict=True):
        image = apply(image, register(broker_id, rack=rack))
        image = apply(image, unfence(broker_id, image.brokers[broker_id].broker_epoch))
    return image


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:
    assert result.records, result.response
    return apply(image, *result.records)


def grown_topic(image: MetadataImage, first: int, added: int, seed: int) -> dict[int, int]:
    """Partition -> leader of a topic created with `first` partitions, then grown by `added`."""
    rng = random.Random(seed)
    topic = c.CreateTopicsRequest.Topic(name="t", num_partitions=first, replication_factor=2)
    image = commit(
        image,
        cp.create_topics(
            image,
            c.CreateTopicsRequest(topics=[topic]),
            rng=rng,
            defaults=cp.ClusterDefaults(),
            new_topic_id=lambda: bytes(range(16)),
        ),
    )
    wanted = c.CreatePartitionsRequest.Topic(name="t", count=first + added)
    image = commit(
        image, cp.create_partitions(image, c.CreatePartitionsRequest(topics=[wanted]), rng=rng)
    )
    return {number: state.leader for number, state in image.topics["t"].partitions.items()}


@pytest.mark.parametrize("layout", sorted(RACKS))
def test_added_partitions_continue_the_leaders_round_robin(layout: str) -> None:
    image = cluster(RACKS[layout])
    count = len(BROKERS)
    for first in range(1, 2 * count + 1):
        for added in range(1, 2 * count + 1):
            seed = first * 100 + added
            leaders = grown_topic(image, first, added, seed)
            where = f"{layout} racks, {first} partitions + {added} (seed {seed}): {leaders}"
            for number in range(count, first + added):
                assert leaders[number] == leaders[number - count], f"round-robin broken: {where}"
            led = Counter(leaders.values())
            spread = max(led[b] for b in BROKERS) - min(led[b] for b in BROKERS)
            assert spread <= 1, f"leaders unbalanced: {where}"
