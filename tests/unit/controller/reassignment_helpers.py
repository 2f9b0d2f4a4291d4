"""Helpers for the reassignment tests: a partition placed by hand, and one-line requests."""

from __future__ import annotations

from test_control_plane import alter, cluster, commit

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

T = b"\x05" * 16


def placed(replicas: list[int], brokers: int = 5, **configs: str) -> MetadataImage:
    """Brokers 1..`brokers` live; topic "t" with one partition on `replicas` (all in sync, the
    first leading), placed by hand so that each test knows who holds what."""
    records = [
        m.MetadataRecord(topic=m.TopicRecord(name="t", topic_id=T)),
        m.MetadataRecord(
            partition=m.PartitionRecord(
                topic_id=T, partition=0, replicas=replicas, isr=replicas, leader=replicas[0]
            )
        ),
    ]
    records += [
        m.MetadataRecord(
            config=m.ConfigRecord(resource_type=1, resource_name="t", name=key, value=value)
        )
        for key, value in configs.items()
    ]
    return commit(cluster(brokers), cp.ControlResult(records, None))


def state(image: MetadataImage) -> PartitionState:
    return image.topics["t"].partitions[0]


def reassign(
    image: MetadataImage, *items: tuple[str, int, list[int] | None]
) -> tuple[MetadataImage, list[tuple[int, str]], int]:
    """Send (topic, partition, target or None for a cancel) items; the image after the
    commit, each item's (error code, message) and how many records were written."""
    request = c.AlterPartitionReassignmentsRequest()
    for topic, number, target in items:
        request.partitions.add(
            topic=topic, partition=number, replicas=target or [], cancel=target is None
        )
    result = cp.alter_partition_reassignments(image, request)
    answers = [(r.error_code, r.error_message) for r in result.response.partitions]
    return commit(image, result), answers, len(result.records)


def reassign_ok(image: MetadataImage, target: list[int] | None) -> MetadataImage:
    image, answers, _ = reassign(image, ("t", 0, target))
    assert answers == [(ErrorCode.NONE, "")]
    return image


def complete(image: MetadataImage) -> MetadataImage:
    return commit(image, cp.complete_reassignments(image))


def join(image: MetadataImage, *joiners: int) -> MetadataImage:
    """The leader proposes `joiners` into t-0's ISR (they caught up), then the controller's
    completion check runs, as after every commit."""
    now = state(image)
    image, answer = alter(image, now.leader, [*now.isr, *joiners])
    assert answer.error_code == ErrorCode.NONE, answer.error_message
    return complete(image)


def listed(image: MetadataImage, **topics: list[int]) -> list[tuple[str, int, tuple, tuple, tuple]]:
    request = c.ListPartitionReassignmentsRequest()
    for name, partitions in topics.items():
        request.topics.add(name=name, partitions=partitions)
    answer = cp.list_partition_reassignments(image, request)
    return [
        (
            r.topic,
            r.partition,
            tuple(r.replicas),
            tuple(r.adding_replicas),
            tuple(r.removing_replicas),
        )
        for r in answer.reassignments
    ]
