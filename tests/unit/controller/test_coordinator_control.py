"""Goal: the controller's coordinator decisions keep exactly one live owner per partition of each
coordinator topic (__consumer_offsets, __transaction_state): coordinators register live (a second
live process with the same id is refused), heartbeats check the epoch, fencing and controlled
shutdown move a coordinator's partitions of both topics (and only those, plus balancing), a
restarted coordinator never keeps an old assignment under its new epoch, each internal topic
appears (compacted, with its own partition count and replication factor) only once a coordinator
and enough brokers are live, and clients cannot create, delete or resize either.

Method: each decision (pure control-plane functions) is committed with the real replay, as the
active controller would; the resulting images are checked record by record and with the shared
invariants of coordinator_helpers.check_invariants.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from coordinator_helpers import (
    DEFAULTS,
    check_invariants,
    commit,
    create_coordinator_topics,
    heartbeat,
    owners,
    plan,
    register,
    with_brokers,
)

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    COORDINATOR_TOPICS,
    NO_COORDINATOR,
    TRANSACTION_STATE_TOPIC,
)
from samsa.metadata.image import TOPIC_RESOURCE, MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c


def offsets_cluster(coordinators: int = 2, brokers: int = 2) -> MetadataImage:
    """Brokers, both coordinator topics (__consumer_offsets: 10 partitions, __transaction_state:
    6) and `coordinators` coordinators owning them."""
    image = with_brokers(brokers)
    image, _ = register(image, 1)
    image, created = create_coordinator_topics(image)
    assert created.records
    assert set(COORDINATOR_TOPICS) <= image.topics.keys()
    image = plan(image)
    for coordinator_id in range(2, coordinators + 1):
        image, _ = register(image, coordinator_id)
    return image


# --- registration and heartbeats -------------------------------------------------------------


def test_a_coordinator_registers_live_and_a_second_live_process_with_its_id_is_refused():
    image, response = register(MetadataImage.empty(), 1, "a")
    assert response.coordinator_epoch == 0 and not image.coordinators[1].fenced
    liveness = BrokerLiveness()
    liveness.heartbeat(1, 0, now_ms=1000)
    result = cp.register_coordinator(
        image,
        c.RegisterCoordinatorRequest(coordinator_id=1, incarnation_id="b", endpoint="x:1"),
        liveness=liveness,
        now_ms=1500,
        session_timeout_ms=1000,
    )
    assert result.records == []
    assert result.response.status.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert "coordinator" in result.response.status.error_message
    assert result.response.coordinator_epoch == -1
    # The same process again (same incarnation), or a restart after the session went stale.
    again, response = register(image, 1, "a", liveness=liveness, now_ms=1500)
    assert response.coordinator_epoch == 1 and again.coordinators[1].coordinator_epoch == 1
    restarted, response = register(image, 1, "b", liveness=liveness, now_ms=2500)
    assert response.status.error_code == ErrorCode.NONE
    assert restarted.coordinators[1].incarnation_id == "b"


def test_heartbeats_check_the_epoch_and_a_fenced_coordinator_must_register_again():
    image = offsets_cluster(coordinators=2)
    same, response = heartbeat(image, 1)
    assert same is image and not response.is_fenced and response.status.error_code == 0
    _, response = heartbeat(image, 1, epoch=image.coordinators[1].coordinator_epoch - 1)
    assert response.status.error_code == ErrorCode.STALE_BROKER_EPOCH and response.is_fenced
    fenced = commit(image, cp.fence_coordinators(image, [1]))
    _, response = heartbeat(fenced, 1)
    assert response.status.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert "register again" in response.status.error_message and response.is_fenced
    unknown = cp.coordinator_heartbeat(image, c.CoordinatorHeartbeatRequest(coordinator_id=9))
    assert unknown.response.status.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_controlled_shutdown_fences_and_moves_the_partitions_in_the_same_batch():
    image = offsets_cluster(coordinators=2)
    before = {topic: owners(image, topic) for topic in COORDINATOR_TOPICS}
    result = cp.coordinator_heartbeat(
        image,
        c.CoordinatorHeartbeatRequest(
            coordinator_id=1,
            coordinator_epoch=image.coordinators[1].coordinator_epoch,
            want_shutdown=True,
        ),
    )
    assert result.response.should_shut_down and result.response.is_fenced
    kinds = [record.WhichOneof("record") for record in result.records]
    assert kinds[0] == "fence_coordinator" and set(kinds[1:]) == {"coordinator_assignment"}
    after = commit(image, result)
    moved = []
    for topic in COORDINATOR_TOPICS:
        assert set(owners(after, topic).values()) == {2}, topic
        moved += [(topic, p) for p, owner in before[topic].items() if owner == 1]
    assert {t for t, _ in moved} == set(COORDINATOR_TOPICS)
    assert len(kinds) - 1 == len(moved)
    check_invariants(image, after)
    _, again = heartbeat(after, 1, want_shutdown=True)  # already fenced: still may stop
    assert again.should_shut_down


# --- the internal topic ----------------------------------------------------------------------


def test_the_coordinator_topics_wait_for_a_live_coordinator_and_enough_brokers():
    image = with_brokers(1)
    assert create_coordinator_topics(image)[1].records == []
    for topic in COORDINATOR_TOPICS:
        assert cp.coordinator_topic_problem(image, DEFAULTS, topic) == "no live coordinator yet"
    image, _ = register(image, 1)
    assert create_coordinator_topics(image)[1].records == []
    problem = cp.coordinator_topic_problem(image, DEFAULTS, TRANSACTION_STATE_TOPIC) or ""
    assert "needs 2 live brokers (transaction.state.log.replication.factor)" in problem
    problem = cp.coordinator_topic_problem(image, DEFAULTS, CONSUMER_OFFSETS_TOPIC) or ""
    assert "needs 2 live brokers (offsets.topic.replication.factor)" in problem
    image = with_brokers(2, image)
    image, created = create_coordinator_topics(image)
    kinds = Counter(record.WhichOneof("record") for record in created.records)
    assert kinds == {"topic": 2, "partition": 16, "config": 7}, "both topics in one batch"
    for topic, count in ((CONSUMER_OFFSETS_TOPIC, 10), (TRANSACTION_STATE_TOPIC, 6)):
        partitions = image.topics[topic].partitions
        assert sorted(partitions) == list(range(count))
        assert all(len(state.replicas) == 2 for state in partitions.values())
        leaders = Counter(state.leader for state in partitions.values())
        assert leaders == {1: count // 2, 2: count // 2}, "placed like create_topics"
        # Kafka's transaction.state.log.min.isr (2) for the decisions; the offsets topic keeps
        # the cluster's min.insync.replicas, as Kafka's does.
        min_isr = {"min.insync.replicas": "2"} if topic == TRANSACTION_STATE_TOPIC else {}
        assert image.configs[(TOPIC_RESOURCE, topic)] == {
            "cleanup.policy": "compact",
            "segment.bytes": "104857600",
            "message.timestamp.after.max.ms": "9223372036854775807",
            **min_isr,
        }
        assert cp.coordinator_topic_problem(image, DEFAULTS, topic) == f"{topic} exists"
    assert (
        image.topics[CONSUMER_OFFSETS_TOPIC].topic_id
        != image.topics[TRANSACTION_STATE_TOPIC].topic_id
    )
    assert create_coordinator_topics(image)[1].records == []  # exist: nothing more


@pytest.mark.parametrize(
    ("replication_factor", "min_isr", "expected"),
    [(1, 2, "1"), (2, 2, "2"), (3, 2, "2"), (2, 3, "2")],
)
def test_transaction_state_takes_its_min_isr_within_its_replication_factor(
    replication_factor: int, min_isr: int, expected: str
) -> None:
    """transaction.state.log.min.isr, at most the replication factor: a one-broker cluster can
    still write its transactions' decisions, and a larger one needs two replicas to."""
    defaults = replace(
        DEFAULTS,
        transaction_state_log_replication_factor=replication_factor,
        transaction_state_log_min_isr=min_isr,
    )
    image, _ = register(with_brokers(replication_factor), 1)
    image, _ = create_coordinator_topics(image, defaults)
    configs = image.configs[(TOPIC_RESOURCE, TRANSACTION_STATE_TOPIC)]
    assert configs["min.insync.replicas"] == expected


def test_each_coordinator_topic_waits_for_its_own_replication_factor():
    defaults = replace(DEFAULTS, transaction_state_log_replication_factor=3)
    image, _ = register(with_brokers(2), 1)
    image, _ = create_coordinator_topics(image, defaults)
    assert CONSUMER_OFFSETS_TOPIC in image.topics
    assert TRANSACTION_STATE_TOPIC not in image.topics
    problem = cp.coordinator_topic_problem(image, defaults, TRANSACTION_STATE_TOPIC) or ""
    assert "needs 3 live brokers (transaction.state.log.replication.factor), has 2" in problem
    image = plan(image)
    assert set(owners(image, TRANSACTION_STATE_TOPIC).values()) == set()
    image = with_brokers(3, image)
    before = image
    image, created = create_coordinator_topics(image, defaults)
    assert [r.topic.name for r in created.records if r.HasField("topic")] == [
        TRANSACTION_STATE_TOPIC
    ]
    partitions = image.topics[TRANSACTION_STATE_TOPIC].partitions
    assert len(partitions) == 6 and all(len(s.replicas) == 3 for s in partitions.values())
    image = plan(image)
    check_invariants(before, image)
    assert set(owners(image, TRANSACTION_STATE_TOPIC).values()) == {1}


@pytest.mark.parametrize("topic", COORDINATOR_TOPICS)
def test_clients_cannot_create_delete_or_resize_the_internal_topics(topic):
    image = offsets_cluster()
    created = cp.create_topics(
        with_brokers(2),
        c.CreateTopicsRequest(topics=[c.CreateTopicsRequest.Topic(name=topic, num_partitions=1)]),
        rng=random.Random(1),
        defaults=DEFAULTS,
        new_topic_id=lambda: bytes(16),
    )
    assert created.records == []
    assert created.response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    deleted = cp.delete_topics(image, c.DeleteTopicsRequest(names=[topic]))
    assert deleted.records == []
    assert deleted.response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "internal" in deleted.response.topics[0].error_message
    grown = cp.create_partitions(
        image,
        c.CreatePartitionsRequest(topics=[c.CreatePartitionsRequest.Topic(name=topic, count=20)]),
        rng=random.Random(1),
    )
    assert grown.records == []
    assert grown.response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


# --- assignments -------------------------------------------------------------------------------


def test_every_partition_gets_a_live_coordinator_balanced_with_fresh_producer_ids():
    image = with_brokers(2)
    image = commit(
        image,
        cp.allocate_producer_ids(
            image, c.AllocateProducerIdsRequest(broker_id=1, broker_epoch=0), block_size=100
        ),
    )
    for coordinator_id in (1, 2, 3):
        image, _ = register(image, coordinator_id)
    image, _ = create_coordinator_topics(image)
    before = image
    image = plan(image)
    check_invariants(before, image)
    assert Counter(owners(image).values()) == {1: 4, 2: 3, 3: 3}
    assert Counter(owners(image, TRANSACTION_STATE_TOPIC).values()) == {1: 2, 2: 2, 3: 2}
    assignments = image.coordinator_assignments
    assert all(a.assignment_epoch == 0 for a in assignments.values())
    assert all(a.topic == topic for (topic, _), a in assignments.items())
    # Planned in COORDINATOR_TOPICS order: the offsets topic's partitions take the first ids.
    producer_ids = {
        topic: sorted(a.producer_id for a in assignments.values() if a.topic == topic)
        for topic in COORDINATOR_TOPICS
    }
    assert producer_ids[CONSUMER_OFFSETS_TOPIC] == list(range(100, 110))
    assert producer_ids[TRANSACTION_STATE_TOPIC] == list(range(110, 116))
    assert image.next_producer_id == 116
    assert cp.plan_coordinator_assignments(image).records == [], "stable: nothing to change"


def test_a_fenced_coordinators_partitions_move_and_only_those():
    image = offsets_cluster(coordinators=3)
    before = image.coordinator_assignments
    after = commit(image, cp.fence_coordinators(image, [2]))
    check_invariants(image, after)
    moved_topics = set()
    for key, old in before.items():
        new = after.coordinator_assignments[key]
        if old.coordinator_id == 2:
            assert new.coordinator_id in (1, 3)
            assert new.assignment_epoch == old.assignment_epoch + 1
            assert new.producer_id == old.producer_id
            moved_topics.add(new.topic)
        else:
            assert new == old, f"partition {key} moved though its owner lives"
    assert moved_topics == set(COORDINATOR_TOPICS)
    assert cp.fence_coordinators(after, [2, 9]).records == []  # fenced or unknown: nothing


def test_a_joining_coordinator_takes_partitions_from_the_most_loaded_highest_first():
    image = offsets_cluster(coordinators=1)
    image2, response = register(image, 2)
    check_invariants(image, image2)
    moved_count = 0
    for topic, count, expected in (
        (CONSUMER_OFFSETS_TOPIC, 10, [5, 6, 7, 8, 9]),
        (TRANSACTION_STATE_TOPIC, 6, [3, 4, 5]),
    ):
        assert set(owners(image, topic).values()) == {1}
        moved = sorted(p for p, owner in owners(image2, topic).items() if owner == 2)
        assert moved == expected, topic
        assignments = image2.coordinator_assignments
        assert all(assignments[(topic, p)].assignment_epoch == 1 for p in moved)
        assert all(assignments[(topic, p)].assignment_epoch == 0 for p in range(count // 2))
        moved_count += len(moved)
    assert image2.end_offset == image.end_offset + 1 + moved_count, "one batch"
    assert response.coordinator_epoch == image.end_offset


def test_a_restarted_coordinator_keeps_nothing_under_its_new_epoch_without_a_bump():
    image = offsets_cluster(coordinators=2)
    old = {
        number: assignment
        for number, assignment in image.coordinator_assignments.items()
        if assignment.coordinator_id == 1
    }
    restarted, response = register(image, 1, "new-incarnation", now_ms=10_000)
    check_invariants(image, restarted)
    new_epoch = response.coordinator_epoch
    for number, assignment in restarted.coordinator_assignments.items():
        if assignment.coordinator_id == 1:
            assert assignment.coordinator_epoch == new_epoch
        if number in old:
            assert assignment.assignment_epoch == old[number].assignment_epoch + 1
            assert assignment.producer_id == old[number].producer_id


def test_with_no_live_coordinator_orphaned_partitions_go_to_none_and_come_back_bumped():
    image = offsets_cluster(coordinators=2)
    nobody = commit(image, cp.fence_coordinators(image, [1, 2]))
    check_invariants(image, nobody)
    for topic in COORDINATOR_TOPICS:
        assert set(owners(nobody, topic).values()) == {NO_COORDINATOR}
    epochs = {p: a.assignment_epoch for p, a in image.coordinator_assignments.items()}
    assert {p: a.assignment_epoch - 1 for p, a in nobody.coordinator_assignments.items()} == epochs
    assert cp.plan_coordinator_assignments(nobody).records == []
    back, _ = register(nobody, 3)
    check_invariants(nobody, back)
    for topic in COORDINATOR_TOPICS:
        assert set(owners(back, topic).values()) == {3}
    assert {p: a.assignment_epoch - 2 for p, a in back.coordinator_assignments.items()} == epochs
    assert back.next_producer_id == image.next_producer_id, "no new producer id for old partitions"
