"""Goal: the controller's coordinator decisions keep exactly one live owner per partition of
__consumer_offsets: coordinators register live (a second live process with the same id is
refused), heartbeats check the epoch, fencing and controlled shutdown move a coordinator's
partitions (and only those, plus balancing), a restarted coordinator never keeps an old
assignment under its new epoch, the internal topic appears only once a coordinator and enough
brokers are live, and clients cannot create, delete or resize it.

Method: each decision (pure control-plane functions) is committed with the real replay, as the
active controller would; the resulting images are checked record by record and with the shared
invariants of coordinator_helpers.check_invariants.
"""

from __future__ import annotations

import random
from collections import Counter

from coordinator_helpers import (
    DEFAULTS,
    check_invariants,
    commit,
    create_offsets_topic,
    heartbeat,
    owners,
    plan,
    register,
    with_brokers,
)

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, NO_COORDINATOR
from samsa.metadata.image import TOPIC_RESOURCE, MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c


def offsets_cluster(coordinators: int = 2, brokers: int = 2) -> MetadataImage:
    """Brokers, the topic (10 partitions) and `coordinators` coordinators owning it."""
    image = with_brokers(brokers)
    image, _ = register(image, 1)
    image, created = create_offsets_topic(image)
    assert created.records
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
    before = owners(image)
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
    assert set(owners(after).values()) == {2}
    moved = [p for p, owner in before.items() if owner == 1]
    assert len(kinds) - 1 == len(moved)
    check_invariants(image, after)
    _, again = heartbeat(after, 1, want_shutdown=True)  # already fenced: still may stop
    assert again.should_shut_down


# --- the internal topic ----------------------------------------------------------------------


def test_the_offsets_topic_waits_for_a_live_coordinator_and_enough_brokers():
    image = with_brokers(1)
    assert create_offsets_topic(image)[1].records == []
    assert cp.offsets_topic_problem(image, DEFAULTS) == "no live coordinator yet"
    image, _ = register(image, 1)
    assert create_offsets_topic(image)[1].records == []
    assert "needs 2 live brokers" in (cp.offsets_topic_problem(image, DEFAULTS) or "")
    image = with_brokers(2, image)
    image, _ = create_offsets_topic(image)
    topic = image.topics[CONSUMER_OFFSETS_TOPIC]
    assert sorted(topic.partitions) == list(range(10))
    assert all(len(state.replicas) == 2 for state in topic.partitions.values())
    leaders = Counter(state.leader for state in topic.partitions.values())
    assert leaders == {1: 5, 2: 5}, "placed like create_topics: leaders round-robin"
    assert image.configs[(TOPIC_RESOURCE, CONSUMER_OFFSETS_TOPIC)] == {"cleanup.policy": "compact"}
    assert create_offsets_topic(image)[1].records == []  # exists: nothing more


def test_clients_cannot_create_delete_or_resize_the_internal_topic():
    image = offsets_cluster()
    created = cp.create_topics(
        with_brokers(2),
        c.CreateTopicsRequest(
            topics=[c.CreateTopicsRequest.Topic(name=CONSUMER_OFFSETS_TOPIC, num_partitions=1)]
        ),
        rng=random.Random(1),
        defaults=DEFAULTS,
        new_topic_id=lambda: bytes(16),
    )
    assert created.records == []
    assert created.response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    deleted = cp.delete_topics(image, c.DeleteTopicsRequest(names=[CONSUMER_OFFSETS_TOPIC]))
    assert deleted.records == []
    assert deleted.response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "internal" in deleted.response.topics[0].error_message
    grown = cp.create_partitions(
        image,
        c.CreatePartitionsRequest(
            topics=[c.CreatePartitionsRequest.Topic(name=CONSUMER_OFFSETS_TOPIC, count=20)]
        ),
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
    image, _ = create_offsets_topic(image)
    before = image
    image = plan(image)
    check_invariants(before, image)
    assert Counter(owners(image).values()) == {1: 4, 2: 3, 3: 3}
    assignments = image.coordinator_assignments
    assert all(a.assignment_epoch == 0 for a in assignments.values())
    assert sorted(a.producer_id for a in assignments.values()) == list(range(100, 110))
    assert image.next_producer_id == 110
    assert cp.plan_coordinator_assignments(image).records == [], "stable: nothing to change"


def test_a_fenced_coordinators_partitions_move_and_only_those():
    image = offsets_cluster(coordinators=3)
    before = image.coordinator_assignments
    after = commit(image, cp.fence_coordinators(image, [2]))
    check_invariants(image, after)
    for number, old in before.items():
        new = after.coordinator_assignments[number]
        if old.coordinator_id == 2:
            assert new.coordinator_id in (1, 3)
            assert new.assignment_epoch == old.assignment_epoch + 1
            assert new.producer_id == old.producer_id
        else:
            assert new == old, f"partition {number} moved though its owner lives"
    assert cp.fence_coordinators(after, [2, 9]).records == []  # fenced or unknown: nothing


def test_a_joining_coordinator_takes_partitions_from_the_most_loaded_highest_first():
    image = offsets_cluster(coordinators=1)
    assert set(owners(image).values()) == {1}
    image2, response = register(image, 2)
    check_invariants(image, image2)
    moved = sorted(p for p, owner in owners(image2).items() if owner == 2)
    assert moved == [5, 6, 7, 8, 9]
    assert all(image2.coordinator_assignments[p].assignment_epoch == 1 for p in moved)
    assert all(image2.coordinator_assignments[p].assignment_epoch == 0 for p in range(5))
    assert image2.end_offset == image.end_offset + 1 + len(moved), "one batch"
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
    assert set(owners(nobody).values()) == {NO_COORDINATOR}
    epochs = {p: a.assignment_epoch for p, a in image.coordinator_assignments.items()}
    assert {p: a.assignment_epoch - 1 for p, a in nobody.coordinator_assignments.items()} == epochs
    assert cp.plan_coordinator_assignments(nobody).records == []
    back, _ = register(nobody, 3)
    check_invariants(nobody, back)
    assert set(owners(back).values()) == {3}
    assert {p: a.assignment_epoch - 2 for p, a in back.coordinator_assignments.items()} == epochs
    assert back.next_producer_id == image.next_producer_id, "no new producer id for old partitions"
