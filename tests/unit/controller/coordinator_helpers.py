"""Shared steps for coordinator-control tests: decisions committed with the real replay, and the
invariants every image must keep about the ownership of the coordinator topics
(__consumer_offsets, __transaction_state)."""

from __future__ import annotations

import random
from collections import Counter

from samsa.common import limits
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    COORDINATOR_TOPICS,
    NO_COORDINATOR,
    valid_assignment,
)
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c

DEFAULTS = cp.ClusterDefaults(
    offsets_topic_num_partitions=10,
    offsets_topic_replication_factor=2,
    coordinator_session_timeout_ms=1000,
    transaction_state_log_num_partitions=6,
    transaction_state_log_replication_factor=2,
)


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:
    if not result.records:
        return image
    return replay(image, make_batch(image, result.records, 1))


def with_brokers(count: int, image: MetadataImage | None = None) -> MetadataImage:
    """`count` registered, caught-up (unfenced) brokers, ids from 1."""
    image = image or MetadataImage.empty()
    for broker_id in range(1, count + 1):
        registered = cp.register_broker(
            image,
            c.RegisterBrokerRequest(
                broker_id=broker_id, incarnation_id="b", endpoint=f"b:{broker_id}"
            ),
            liveness=BrokerLiveness(),
            now_ms=0,
            session_timeout_ms=1000,
        )
        image = commit(image, registered)
        heartbeat = c.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=image.brokers[broker_id].broker_epoch,
            metadata_offset=image.end_offset,
        )
        image = commit(image, cp.broker_heartbeat(image, heartbeat))
    return image


def register(
    image: MetadataImage,
    coordinator_id: int,
    incarnation: str = "a",
    *,
    liveness: BrokerLiveness | None = None,
    now_ms: int = 0,
) -> tuple[MetadataImage, c.RegisterCoordinatorResponse]:
    result = cp.register_coordinator(
        image,
        c.RegisterCoordinatorRequest(
            coordinator_id=coordinator_id,
            incarnation_id=incarnation,
            endpoint=f"co:{coordinator_id}",
        ),
        liveness=liveness or BrokerLiveness(),
        now_ms=now_ms,
        session_timeout_ms=DEFAULTS.coordinator_session_timeout_ms,
    )
    return commit(image, result), result.response


def heartbeat(
    image: MetadataImage, coordinator_id: int, **fields: object
) -> tuple[MetadataImage, c.CoordinatorHeartbeatResponse]:
    coordinator = image.coordinators[coordinator_id]
    request = c.CoordinatorHeartbeatRequest(
        coordinator_id=coordinator_id,
        coordinator_epoch=fields.pop("epoch", coordinator.coordinator_epoch),  # type: ignore[arg-type]
        metadata_offset=image.end_offset,
        **fields,  # type: ignore[arg-type]
    )
    result = cp.coordinator_heartbeat(image, request)
    return commit(image, result), result.response


def create_coordinator_topics(image: MetadataImage, defaults: cp.ClusterDefaults = DEFAULTS):
    """Both coordinator topics, when they can be created (cp.plan_coordinator_topics)."""
    unused_ids = (
        topic_id
        for topic_id in (number.to_bytes(16, "big") for number in range(1, 1000))
        if topic_id not in image.topic_names
    )
    result = cp.plan_coordinator_topics(
        image, defaults, rng=random.Random(3), new_topic_id=lambda: next(unused_ids)
    )
    return commit(image, result), result


def plan(image: MetadataImage) -> MetadataImage:
    return commit(image, cp.plan_coordinator_assignments(image))


def owners(image: MetadataImage, topic: str = CONSUMER_OFFSETS_TOPIC) -> dict[int, int]:
    """Partition -> coordinator id of each assignment (valid or not) of one coordinator topic."""
    return {
        number: assignment.coordinator_id
        for (name, number), assignment in image.coordinator_assignments.items()
        if name == topic
    }


def check_invariants(before: MetadataImage, after: MetadataImage) -> None:
    """What every planned image keeps, relative to the image before the step."""
    live = {coordinator.coordinator_id for coordinator in after.live_coordinators()}
    for name in COORDINATOR_TOPICS:
        topic = after.topics.get(name)
        if topic is None or not live:
            continue
        for number in topic.partitions:
            assert valid_assignment(after, name, number) is not None, f"{name}-{number} unowned"
        counts = Counter(owners(after, name).values())
        loads = [counts.get(coordinator_id, 0) for coordinator_id in live]
        assert max(loads) - min(loads) <= 1, f"{name} unbalanced: {dict(counts)}"
    if not live:
        for assignment in after.coordinator_assignments.values():
            assert assignment.coordinator_id == NO_COORDINATOR or (
                valid_assignment(after, assignment.topic, assignment.partition) is None
            )
    for key, old in before.coordinator_assignments.items():
        new = after.coordinator_assignments[key]
        if new.producer_id != old.producer_id:  # rotated: a fresh id, the old one retired
            assert new.producer_id >= before.next_producer_id, f"{key} reused a producer id"
            assert new.retired_producer_id == old.producer_id, f"{key} lost its retired id"
            assert old.assignment_epoch + 1 >= limits.producer_epoch_max, f"{key} rotated early"
            continue
        assert new.retired_producer_id == old.retired_producer_id, f"{key} changed retired id"
        assert new.assignment_epoch >= old.assignment_epoch, f"partition {key} went back"
        if (new.coordinator_id, new.coordinator_epoch) != (
            old.coordinator_id,
            old.coordinator_epoch,
        ):
            assert new.assignment_epoch > old.assignment_epoch, f"{key} moved, same epoch"
            assert new.assignment_epoch < limits.producer_epoch_max, f"{key} epoch exhausted"
    assignments = after.coordinator_assignments.values()
    producer_ids = [a.producer_id for a in assignments]
    producer_ids += [a.retired_producer_id for a in assignments if a.retired_producer_id >= 0]
    assert len(set(producer_ids)) == len(producer_ids), "two partitions share a producer id"
    assert all(0 <= pid < after.next_producer_id for pid in producer_ids)
