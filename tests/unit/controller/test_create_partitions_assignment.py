"""Goal: CreatePartitions with the new partitions' replicas placed by hand (Kafka's
`kafka-topics.sh --alter --partitions N --replica-assignment ...`) writes exactly the given
lists for partitions current..N-1, the first live replica leading, the live ones in sync; and
refuses, with INVALID_REPLICA_ASSIGNMENT and what to change, writing nothing, a plan with
another number of lists than new partitions, or a list that is empty, repeats a broker, names
an unregistered one, is not of the topic's replication factor, or has no live broker.

Method: the pure control plane over a cluster image of brokers 1..3 live and 4 registered but
fenced, with topic "t" of 2 partitions of 2 replicas placed by hand first.
"""

from __future__ import annotations

import random

import pytest
from topic_creation import create_topics_decided

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from tests.unit.controller.test_control_plane import DEFAULTS, cluster, commit, register


def two_partitions() -> MetadataImage:
    image, _ = register(cluster(3), 4)  # registered, never caught up: fenced
    topic = c.CreateTopicsRequest.Topic(name="t", num_partitions=-1, replication_factor=-1)
    topic.assignments.add(partition_index=0, broker_ids=[1, 2])
    topic.assignments.add(partition_index=1, broker_ids=[2, 3])
    result = create_topics_decided(image, c.CreateTopicsRequest(topics=[topic]), DEFAULTS)
    return commit(image, result)


def grow(
    image: MetadataImage, count: int, *lists: list[int], validate_only: bool = False
) -> cp.ControlResult:
    wanted = c.CreatePartitionsRequest.Topic(name="t", count=count)
    for brokers in lists:
        wanted.assignments.add(broker_ids=brokers)
    request = c.CreatePartitionsRequest(topics=[wanted], validate_only=validate_only)
    return cp.create_partitions(image, request, rng=random.Random(1))


def test_the_new_partitions_get_the_given_replicas_in_order() -> None:
    image = two_partitions()
    result = grow(image, 4, [3, 1], [4, 2])
    assert result.response.topics[0].error_code == ErrorCode.NONE
    after = commit(image, result).topics["t"].partitions
    assert {p: (s.replicas, s.leader, s.isr) for p, s in after.items() if p >= 2} == {
        2: ((3, 1), 3, (3, 1)),
        3: ((4, 2), 2, (2,)),  # broker 4 is fenced: out of the ISR, the next replica leads
    }
    assert (after[0].replicas, after[1].replicas) == ((1, 2), (2, 3)), "the others unchanged"


def test_validate_only_writes_nothing() -> None:
    result = grow(two_partitions(), 3, [3, 1], validate_only=True)
    assert result.response.topics[0].error_code == ErrorCode.NONE and result.records == []


@pytest.mark.parametrize(
    ("count", "lists", "words"),
    [
        (4, [[3, 1]], "1 replica lists for the 2 partitions added to 't' (2 -> 4)"),
        (3, [[3, 1], [1, 2]], "2 replica lists for the 1 partitions added"),
        (3, [[]], "partition 2 is empty"),
        (3, [[1, 1]], "names a broker more than once"),
        (3, [[1, 9]], "brokers [9] that are not registered"),
        (3, [[1, 2, 3]], "has 3 replicas but partition 0 has 2"),
        (4, [[1, 2], [3]], "replica list [3] of partition 3 has 1 replicas"),
        (3, [[4]], "has 1 replicas"),
    ],
)
def test_a_plan_that_cannot_be_placed_is_refused_and_writes_nothing(
    count: int, lists: list[list[int]], words: str
) -> None:
    result = grow(two_partitions(), count, *lists)
    answer = result.response.topics[0]
    assert answer.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT, answer.error_message
    assert words in answer.error_message
    assert result.records == []


def test_a_new_partition_only_on_fenced_brokers_is_refused() -> None:
    image, _ = register(two_partitions(), 5)  # a second fenced broker
    answer = grow(image, 3, [4, 5]).response.topics[0]
    assert answer.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "partition 2 ([4, 5]) is on a fenced broker" in answer.error_message


def test_the_count_is_checked_before_the_plan() -> None:
    answer = grow(two_partitions(), 2, [3, 1]).response.topics[0]
    assert answer.error_code == ErrorCode.INVALID_PARTITIONS
