"""Goal: CreateTopics with replicas placed by hand (Kafka's `--replica-assignment`) writes exactly
the given replica lists, in order, the first live replica leading and the live ones in sync,
and refuses each malformed plan with INVALID_REQUEST or INVALID_REPLICA_ASSIGNMENT and a message
saying what to change, creating nothing.

Method: the pure control plane over cluster images of registered brokers (some fenced); each
refusal is one parametrized case; the records are read back through replay.
"""

from __future__ import annotations

import pytest
from topic_creation import create_topics_decided

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from tests.unit.controller.test_control_plane import DEFAULTS, cluster, commit, register

Topic = c.CreateTopicsRequest.Topic


def planned(name: str, plan: dict[int, list[int]], **fields: object) -> Topic:
    fields = {"num_partitions": -1, "replication_factor": -1, **fields}
    topic = Topic(name=name, **fields)  # type: ignore[arg-type]
    for index, brokers in plan.items():
        topic.assignments.add(partition_index=index, broker_ids=brokers)
    return topic


def decide(image: MetadataImage, *topics: Topic, validate_only: bool = False) -> cp.ControlResult:
    request = c.CreateTopicsRequest(topics=topics, validate_only=validate_only)
    return create_topics_decided(image, request, DEFAULTS)


def test_the_given_replicas_are_written_in_order_the_first_leading_all_in_sync() -> None:
    image = cluster(3)
    result = decide(image, planned("t", {0: [1, 2], 1: [2, 3], 2: [3, 1]}))
    answer = result.response.topics[0]
    assert answer.error_code == ErrorCode.NONE
    assert (answer.num_partitions, answer.replication_factor) == (3, 2)
    after = commit(image, result).topics["t"].partitions
    assert {p: s.replicas for p, s in after.items()} == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert {p: s.leader for p, s in after.items()} == {0: 1, 1: 2, 2: 3}
    assert {p: s.isr for p, s in after.items()} == {0: (1, 2), 1: (2, 3), 2: (3, 1)}


def test_the_order_of_the_assignments_in_the_request_does_not_matter() -> None:
    image = cluster(3)
    result = decide(image, planned("t", {1: [3, 2], 0: [2, 1]}))
    after = commit(image, result).topics["t"].partitions
    assert {p: (s.replicas, s.leader) for p, s in after.items()} == {
        0: ((2, 1), 2),
        1: ((3, 2), 3),
    }


def test_a_fenced_replica_is_accepted_out_of_the_isr_and_the_first_live_one_leads() -> None:
    image, _ = register(cluster(3), 4)  # registered, never caught up: fenced
    assert image.brokers[4].fenced
    result = decide(image, planned("t", {0: [4, 1, 2], 1: [1, 4, 3]}))
    assert result.response.topics[0].error_code == ErrorCode.NONE
    after = commit(image, result).topics["t"].partitions
    assert (after[0].replicas, after[0].leader, after[0].isr) == ((4, 1, 2), 1, (1, 2))
    assert (after[1].replicas, after[1].leader, after[1].isr) == ((1, 4, 3), 1, (1, 3))


def test_validate_only_answers_as_if_created_and_writes_nothing() -> None:
    result = decide(cluster(3), planned("t", {0: [1, 2], 1: [2, 3]}), validate_only=True)
    answer = result.response.topics[0]
    assert answer.error_code == ErrorCode.NONE and answer.topic_id
    assert (answer.num_partitions, answer.replication_factor) == (2, 2)
    assert result.records == []


def test_configs_are_checked_against_the_assignments_replication_factor() -> None:
    ok = decide(cluster(3), planned("t", {0: [1, 2]}, configs={"min.insync.replicas": "2"}))
    assert ok.response.topics[0].error_code == ErrorCode.NONE
    high = decide(cluster(3), planned("u", {0: [1, 2]}, configs={"min.insync.replicas": "3"}))
    assert high.response.topics[0].error_code == ErrorCode.INVALID_CONFIG


TOO_MANY = {i: [1] for i in range(limits.topic_partitions_max + 1)}
TOO_LONG = {0: list(range(1, limits.replication_factor_max + 2))}


@pytest.mark.parametrize(
    ("topic", "code", "words"),
    [
        (planned("t", {0: [1]}, num_partitions=1), ErrorCode.INVALID_REQUEST, "leave them at -1"),
        (
            planned("t", {0: [1]}, replication_factor=1),
            ErrorCode.INVALID_REQUEST,
            "leave them at -1",
        ),
        (planned("t", {0: [1], 2: [2]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions [2]"),
        (planned("t", {1: [1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions [1]"),
        (planned("t", {0: [1], -1: [2]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "[-1]"),
        (planned("t", {0: [1], 1: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "is empty"),
        (planned("t", {0: [1, 2, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "more than once"),
        (planned("t", {0: [1, 9]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "brokers [9]"),
        (
            planned("t", {0: [1, 2], 1: [3]}),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "same replication factor",
        ),
        (planned("t", TOO_MANY), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "topic_partitions_max"),
        (planned("t", TOO_LONG), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "replication_factor_max"),
        (planned("t", {0: [4]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "fenced"),
        (planned("__consumer_offsets", {0: [1]}), ErrorCode.INVALID_TOPIC_EXCEPTION, "internal"),
    ],
)
def test_a_plan_that_cannot_be_placed_is_refused_with_what_to_change(
    topic: Topic, code: ErrorCode, words: str
) -> None:
    image, _ = register(cluster(3), 4)  # broker 4 registered but fenced
    result = decide(image, topic)
    answer = result.response.topics[0]
    assert answer.error_code == code, answer.error_message
    assert words in answer.error_message
    assert result.records == [] and not answer.topic_id


def test_a_partition_assigned_twice_is_refused() -> None:
    topic = planned("t", {0: [1]})
    topic.assignments.add(partition_index=0, broker_ids=[2])
    answer = decide(cluster(3), topic).response.topics[0]
    assert answer.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "partition 0 is assigned more than once" in answer.error_message


def test_a_refused_plan_leaves_the_other_topics_of_the_request_created() -> None:
    image = cluster(3)
    result = decide(image, planned("bad", {0: [9]}), planned("good", {0: [3]}))
    codes = [(t.name, t.error_code) for t in result.response.topics]
    assert codes == [("bad", ErrorCode.INVALID_REPLICA_ASSIGNMENT), ("good", ErrorCode.NONE)]
    assert set(commit(image, result).topics) == {"good"}
