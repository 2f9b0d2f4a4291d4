"""Goal: the coordinator records replay deterministically and refuse what would let two owners
write one partition of a coordinator topic (an assignment epoch that does not move forward, a
dead or re-registered coordinator, a reused producer id, a topic that is not a coordinator
topic); a record without a topic (as written before transactions) is one of __consumer_offsets;
snapshots carry coordinators and assignments of both topics exactly; groups and transactional
ids hash to partitions exactly as Kafka (Java's String.hashCode) does; FindCoordinator answers
GROUP and TRANSACTION keys from the image with the right error and reason.

Method: records built by hand and replayed with the real `replay`; each refusal is checked to
leave the image unchanged; the snapshot round trip compares the image rebuilt from a snapshot
with the image built from the log; hash values were computed with Java 17's `String.hashCode`
(including a surrogate pair) and are also checked against the textbook polynomial.
"""

from __future__ import annotations

import pytest
from metadata_helpers import apply, fence, partition, register, topic, unfence

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    GROUP_KEY_TYPE,
    INTERNAL_TOPICS,
    NO_COORDINATOR,
    TRANSACTION_KEY_TYPE,
    TRANSACTION_STATE_TOPIC,
    find_coordinator,
    group_partition,
    java_string_hash,
    transaction_partition,
    transactional_id_problem,
)
from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import InvalidBatchError
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

OFFSETS_ID = bytes(range(16))
TXN_ID = bytes(range(16, 32))
OFFSETS = CONSUMER_OFFSETS_TOPIC
TXN = TRANSACTION_STATE_TOPIC


def register_coordinator(coordinator_id: int, incarnation: str = "i") -> m.MetadataRecord:
    return m.MetadataRecord(
        register_coordinator=m.RegisterCoordinatorRecord(
            coordinator_id=coordinator_id,
            incarnation_id=incarnation,
            endpoint=f"127.0.0.1:{7000 + coordinator_id}",
        )
    )


def fence_coordinator(coordinator_id: int, epoch: int) -> m.MetadataRecord:
    return m.MetadataRecord(
        fence_coordinator=m.FenceCoordinatorRecord(
            coordinator_id=coordinator_id, coordinator_epoch=epoch
        )
    )


def assign(
    number: int,
    coordinator_id: int,
    epoch: int,
    assignment_epoch: int,
    producer_id: int,
    topic: str = "",
) -> m.MetadataRecord:
    """An assignment record; without `topic`, as every record was before __transaction_state."""
    return m.MetadataRecord(
        coordinator_assignment=m.CoordinatorAssignmentRecord(
            topic=topic,
            partition=number,
            coordinator_id=coordinator_id,
            coordinator_epoch=epoch,
            assignment_epoch=assignment_epoch,
            producer_id=producer_id,
        )
    )


def offsets_cluster(partitions: int = 3) -> MetadataImage:
    """Broker 1 (live), __consumer_offsets with `partitions` partitions, coordinators 1 (epoch
    3 + partitions) and 2 (epoch 4 + partitions), live."""
    image = apply(MetadataImage.empty(), register(1))
    image = apply(image, unfence(1, 0), topic(CONSUMER_OFFSETS_TOPIC, OFFSETS_ID))
    image = apply(image, *[partition(OFFSETS_ID, p, [1]) for p in range(partitions)])
    return apply(image, register_coordinator(1), register_coordinator(2))


# --- replay ----------------------------------------------------------------------------------


def test_a_coordinator_registers_live_with_its_offset_as_epoch_and_fencing_checks_the_epoch():
    image = offsets_cluster()
    first = image.coordinators[1]
    assert (first.coordinator_epoch, first.fenced, first.endpoint) == (6, False, "127.0.0.1:7001")
    assert image.coordinators[2].coordinator_epoch == 7
    assert [c.coordinator_id for c in image.live_coordinators()] == [1, 2]
    stale = apply(image, fence_coordinator(1, 5))  # an older epoch: valid history, no-op
    assert not stale.coordinators[1].fenced
    fenced = apply(image, fence_coordinator(1, 6))
    assert fenced.coordinators[1].fenced and not fenced.coordinators[2].fenced
    restarted = apply(fenced, register_coordinator(1, "j"))
    assert restarted.coordinators[1].coordinator_epoch == fenced.end_offset
    assert not restarted.coordinators[1].fenced


def test_assignments_move_forward_and_take_producer_ids_past_next_producer_id():
    image = offsets_cluster()
    image = apply(image, assign(0, 1, 6, 0, 0), assign(1, 2, 7, 0, 1))
    assert image.next_producer_id == 2
    assert image.coordinator_assignments[(OFFSETS, 1)].coordinator_id == 2
    moved = apply(image, assign(0, 2, 7, 1, 0))
    assert moved.coordinator_assignments[(OFFSETS, 0)].assignment_epoch == 1
    assert moved.coordinator_assignments[(OFFSETS, 0)].producer_id == 0
    assert moved.next_producer_id == 2
    orphaned = apply(moved, assign(0, NO_COORDINATOR, -1, 2, 0))
    assert orphaned.coordinator_assignments[(OFFSETS, 0)].coordinator_id == NO_COORDINATOR


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (assign(0, 1, 6, 0, 0), "assignment epoch 0 does not move forward"),
        (assign(0, 1, 6, 1, 5), "is not the partition's"),
        (assign(1, 1, 6, 0, 0), "lies below next_producer_id"),
        (assign(3, 1, 6, 0, 9), "no such partition"),
        (assign(1, 1, 5, 0, 9), "is not registered and live"),
        (assign(1, 9, 6, 0, 9), "is not registered and live"),
        (assign(1, 1, 6, 0, -1), "is negative"),
    ],
)
def test_replay_refuses_an_assignment_that_does_not_fit(record, reason):
    image = apply(offsets_cluster(), assign(0, 1, 6, 0, 0))
    with pytest.raises(InvalidBatchError, match=reason):
        apply(image, record)


def test_replay_refuses_an_assignment_to_a_fenced_or_restarted_coordinator():
    image = apply(offsets_cluster(), fence_coordinator(1, 6))
    with pytest.raises(InvalidBatchError, match="not registered and live"):
        apply(image, assign(0, 1, 6, 0, 0))
    restarted = apply(image, register_coordinator(1, "j"))
    with pytest.raises(InvalidBatchError, match="not registered and live"):
        apply(restarted, assign(0, 1, 6, 0, 0))  # the old incarnation's epoch
    reassigned = apply(restarted, assign(0, 1, 9, 0, 0))
    assert reassigned.coordinator_assignments[(OFFSETS, 0)].coordinator_epoch == 9


def test_an_assignment_needs_the_topic_and_a_coordinator_needs_an_endpoint():
    image = apply(MetadataImage.empty(), register_coordinator(1))
    with pytest.raises(InvalidBatchError, match="no such partition"):
        apply(image, assign(0, 1, 0, 0, 0))
    with pytest.raises(InvalidBatchError, match="lacks an id or endpoint"):
        apply(image, m.MetadataRecord(register_coordinator=m.RegisterCoordinatorRecord()))


def txn_cluster(offsets_partitions: int = 3, txn_partitions: int = 2) -> MetadataImage:
    """offsets_cluster plus __transaction_state with `txn_partitions` partitions; coordinators 1
    (epoch 3 + offsets_partitions) and 2 (epoch 4 + offsets_partitions), live."""
    image = offsets_cluster(offsets_partitions)
    image = apply(image, topic(TXN, TXN_ID))
    return apply(image, *[partition(TXN_ID, p, [1]) for p in range(txn_partitions)])


def test_an_assignment_without_a_topic_is_one_of_the_offsets_topic():
    # Records written before __transaction_state existed have no topic: they must replay as
    # they always did, and mean exactly what a record naming __consumer_offsets means.
    image = offsets_cluster()
    legacy = apply(image, assign(0, 1, 6, 0, 0))
    named = apply(image, assign(0, 1, 6, 0, 0, topic=OFFSETS))
    assert legacy.coordinator_assignments == named.coordinator_assignments
    (key,) = legacy.coordinator_assignments
    assert key == (OFFSETS, 0) and legacy.coordinator_assignments[key].topic == OFFSETS
    # The next record of the partition may use either spelling.
    moved = apply(legacy, assign(0, 2, 7, 1, 0, topic=OFFSETS))
    assert moved.coordinator_assignments[(OFFSETS, 0)].coordinator_id == 2
    with pytest.raises(InvalidBatchError, match="does not move forward"):
        apply(moved, assign(0, 1, 6, 1, 0))


def test_both_coordinator_topics_keep_their_own_assignments():
    image = txn_cluster()
    image = apply(image, assign(0, 1, 6, 0, 0), assign(0, 2, 7, 0, 1, topic=TXN))
    image = apply(image, assign(1, 1, 6, 0, 2, topic=TXN))
    offsets, txn = (
        image.coordinator_assignments[(OFFSETS, 0)],
        image.coordinator_assignments[(TXN, 0)],
    )
    assert (offsets.topic, offsets.coordinator_id, offsets.producer_id) == (OFFSETS, 1, 0)
    assert (txn.topic, txn.coordinator_id, txn.producer_id) == (TXN, 2, 1)
    assert image.next_producer_id == 3
    # Each partition keeps its own epoch and producer id, whatever the other topic does.
    moved = apply(image, assign(0, 1, 6, 1, 1, topic=TXN))
    assert moved.coordinator_assignments[(TXN, 0)].assignment_epoch == 1
    assert moved.coordinator_assignments[(OFFSETS, 0)] == offsets
    with pytest.raises(InvalidBatchError, match="is not the partition's"):
        apply(image, assign(0, 1, 6, 1, 0, topic=TXN))  # the offsets partition's producer id
    with pytest.raises(InvalidBatchError, match="no such partition of __transaction_state"):
        apply(image, assign(2, 1, 6, 0, 9, topic=TXN))
    with pytest.raises(InvalidBatchError, match="no such partition of __transaction_state"):
        apply(offsets_cluster(), assign(0, 1, 6, 0, 0, topic=TXN))  # the topic is missing
    with pytest.raises(InvalidBatchError, match="is not a coordinator topic"):
        apply(image, assign(0, 1, 6, 0, 9, topic="orders"))


def test_snapshot_round_trip_keeps_coordinators_assignments_and_next_producer_id():
    image = offsets_cluster()
    image = apply(image, assign(0, 1, 6, 0, 0), assign(1, 2, 7, 0, 1), assign(2, 1, 6, 0, 2))
    image = apply(image, fence_coordinator(1, 6), register(2), fence(1, 0))
    image = apply(image, assign(0, 2, 7, 1, 0))  # partition 2 still names fenced coordinator 1
    image = apply(image, register_coordinator(3, "k"))
    snapshot = to_snapshot(image)
    rebuilt = from_snapshot(snapshot)
    assert rebuilt == image
    assert rebuilt.coordinators[1].fenced and rebuilt.coordinators[3].coordinator_epoch == 15
    assert rebuilt.coordinator_assignments[(OFFSETS, 2)].coordinator_id == 1
    assert rebuilt.next_producer_id == 3
    assert to_snapshot(rebuilt) == snapshot
    kinds = [record.WhichOneof("record") for record in snapshot.records]
    first_coordinator = kinds.index("register_coordinator")
    assert kinds.index("producer_ids") < first_coordinator < kinds.index("coordinator_assignment")


def test_snapshot_round_trip_keeps_the_assignments_of_both_topics():
    image = txn_cluster()
    image = apply(image, assign(0, 1, 6, 0, 0), assign(1, 2, 7, 0, 1, topic=TXN))
    image = apply(image, assign(0, 2, 7, 0, 2, topic=TXN), assign(1, 2, 7, 1, 1, topic=TXN))
    snapshot = to_snapshot(image)
    rebuilt = from_snapshot(snapshot)
    assert rebuilt == image
    assert sorted(rebuilt.coordinator_assignments) == [(OFFSETS, 0), (TXN, 0), (TXN, 1)]
    topics = [
        record.coordinator_assignment.topic
        for record in snapshot.records
        if record.WhichOneof("record") == "coordinator_assignment"
    ]
    assert topics == [OFFSETS, TXN, TXN], "snapshots name the topic of every assignment"
    assert to_snapshot(rebuilt) == snapshot


# --- the group hash ----------------------------------------------------------------------------

# String.hashCode() values printed by Java 17 (`java H.java`).
JAVA_HASHES = {
    "": 0,
    "a": 97,
    "group": 98629247,
    "my-group": -1906497762,
    "consumer-group-1": 147483020,
    "\U0001f600": 1772899,  # one character, two UTF-16 code units (a surrogate pair)
    "caf\u00e9-\U0001f600-x": -1138419014,
    "z" * 30: -291400512,
}


def _polynomial_hash(text: str) -> int:
    units = [
        int.from_bytes(text.encode("utf-16-be")[i : i + 2], "big")
        for i in range(0, len(text.encode("utf-16-be")), 2)
    ]
    total = sum(unit * 31 ** (len(units) - 1 - i) for i, unit in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(("text", "expected"), sorted(JAVA_HASHES.items()))
def test_the_group_hash_is_javas_string_hash_code(text, expected):
    assert java_string_hash(text) == expected
    assert _polynomial_hash(text) == expected


def test_a_group_lands_on_kafkas_partition():
    # Kafka: Utils.abs(hashCode) % partitions, where Utils.abs(n) = n & 0x7fffffff.
    assert group_partition("my-group", 50) == (-1906497762 & 0x7FFFFFFF) % 50 == 36
    assert group_partition("group", 50) == 47
    assert group_partition("\U0001f600", 50) == 49
    assert group_partition("", 1) == 0


def test_a_transactional_id_lands_on_kafkas_partition_the_same_as_a_group():
    # Kafka's TransactionStateManager.partitionFor: Utils.abs(hashCode) % partitions, the same
    # formula as groups', over __transaction_state's partition count.
    assert transaction_partition("my-group", 50) == 36
    for text in JAVA_HASHES:
        for count in (1, 3, 50, 97):
            expected = (JAVA_HASHES[text] & 0x7FFFFFFF) % count
            assert transaction_partition(text, count) == group_partition(text, count) == expected


def test_transactional_ids_must_be_non_empty_and_bounded_and_are_internal_topics():
    assert transactional_id_problem("") == "a transactional id must not be empty"
    assert "at most 255 characters" in (transactional_id_problem("t" * 256) or "")
    assert transactional_id_problem("t" * 255) is None
    assert transactional_id_problem("\U0001f600") is None
    assert {OFFSETS, TXN} == INTERNAL_TOPICS


# --- FindCoordinator -------------------------------------------------------------------------


def test_find_coordinator_answers_the_owner_of_the_groups_partition():
    image = apply(offsets_cluster(), assign(0, 1, 6, 0, 0), assign(1, 2, 7, 0, 1))
    image = apply(image, assign(2, 2, 7, 0, 2))
    for group in ["group", "my-group", "x", "consumer-group-1"]:
        found = find_coordinator(image, GROUP_KEY_TYPE, group)
        expected_partition = group_partition(group, 3)
        owner = image.coordinator_assignments[(OFFSETS, expected_partition)].coordinator_id
        assert found.error_code == ErrorCode.NONE, found.error_message
        assert (found.partition, found.coordinator_id) == (expected_partition, owner)
        assert found.endpoint == f"127.0.0.1:{7000 + owner}"
        assert found.metadata_offset == image.end_offset


def test_find_coordinator_refuses_bad_group_ids_and_key_types():
    image = offsets_cluster()
    for bad in ["", "g" * 256]:
        found = find_coordinator(image, GROUP_KEY_TYPE, bad)
        assert found.error_code == ErrorCode.INVALID_GROUP_ID
        assert found.coordinator_id == -1 and found.endpoint == ""
    assert (
        find_coordinator(image, GROUP_KEY_TYPE, "g" * 255).error_code != ErrorCode.INVALID_GROUP_ID
    )
    assert find_coordinator(image, 0, "g").error_code == ErrorCode.INVALID_REQUEST
    assert find_coordinator(image, 3, "g").error_code == ErrorCode.INVALID_REQUEST


def test_find_coordinator_answers_transactional_ids_from_the_transaction_topic():
    # Coordinator 1 owns every partition of __consumer_offsets, coordinator 2 every partition
    # of __transaction_state: each key type must be answered from its own topic's assignments.
    image = txn_cluster(offsets_partitions=3, txn_partitions=5)
    image = apply(image, *[assign(p, 1, 6, 0, p) for p in range(3)])
    image = apply(image, *[assign(p, 2, 7, 0, 3 + p, topic=TXN) for p in range(5)])
    for transactional_id in ["txn", "my-group", "x", "payments-1", "\U0001f600"]:
        found = find_coordinator(image, TRANSACTION_KEY_TYPE, transactional_id)
        assert found.error_code == ErrorCode.NONE, found.error_message
        assert found.partition == transaction_partition(transactional_id, 5)
        assert (found.coordinator_id, found.endpoint) == (2, "127.0.0.1:7002")
        assert found.metadata_offset == image.end_offset
        group = find_coordinator(image, GROUP_KEY_TYPE, transactional_id)
        assert (group.partition, group.coordinator_id) == (group_partition(transactional_id, 3), 1)
    for bad in ["", "t" * 256]:
        found = find_coordinator(image, TRANSACTION_KEY_TYPE, bad)
        assert found.error_code == ErrorCode.INVALID_REQUEST
        assert "transactional id" in found.error_message
        assert (found.coordinator_id, found.endpoint, found.partition) == (-1, "", -1)


def test_find_coordinator_says_why_no_transaction_coordinator_is_available():
    image = offsets_cluster()  # no __transaction_state yet
    image = apply(image, *[assign(p, 1, 6, 0, p) for p in range(3)])
    assert find_coordinator(image, GROUP_KEY_TYPE, "t").error_code == ErrorCode.NONE
    found = find_coordinator(image, TRANSACTION_KEY_TYPE, "t")
    assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "__transaction_state does not exist yet" in found.error_message
    found = find_coordinator(
        image, TRANSACTION_KEY_TYPE, "t", transaction_state_log_replication_factor=3
    )
    assert "needs 3 live brokers (transaction.state.log.replication.factor)" in found.error_message

    image = apply(image, topic(TXN, TXN_ID), *[partition(TXN_ID, p, [1]) for p in range(2)])
    found = find_coordinator(image, TRANSACTION_KEY_TYPE, "t")
    assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert found.partition == transaction_partition("t", 2)
    assert f"partition {found.partition} of __transaction_state is not assigned" in (
        found.error_message
    )
    owned = apply(image, *[assign(p, 2, 7, 0, 3 + p, topic=TXN) for p in range(2)])
    assert find_coordinator(owned, TRANSACTION_KEY_TYPE, "t").coordinator_id == 2
    fenced = apply(owned, fence_coordinator(2, 7))
    found = find_coordinator(fenced, TRANSACTION_KEY_TYPE, "t")
    assert "fenced or restarted" in found.error_message
    assert find_coordinator(fenced, GROUP_KEY_TYPE, "t").coordinator_id == 1


def test_find_coordinator_says_why_no_coordinator_is_available():
    empty = apply(MetadataImage.empty(), register(1), unfence(1, 0))
    found = find_coordinator(empty, GROUP_KEY_TYPE, "g")
    assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "no live coordinator yet" in found.error_message and found.partition == -1
    waiting = apply(empty, register_coordinator(1))
    found = find_coordinator(waiting, GROUP_KEY_TYPE, "g", offsets_topic_replication_factor=3)
    assert "needs 3 live brokers" in found.error_message and "has 1" in found.error_message

    image = offsets_cluster()  # the topic exists, nothing assigned yet
    found = find_coordinator(image, GROUP_KEY_TYPE, "group")
    assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert found.partition == group_partition("group", 3)
    assert "not assigned" in found.error_message

    owned = apply(image, *[assign(p, 1, 6, 0, p) for p in range(3)])
    fenced = apply(owned, fence_coordinator(1, 6))
    found = find_coordinator(fenced, GROUP_KEY_TYPE, "group")
    assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "fenced or restarted" in found.error_message
    restarted = apply(owned, register_coordinator(1, "j"))  # old epoch: not valid any more
    assert find_coordinator(restarted, GROUP_KEY_TYPE, "group").coordinator_id == -1
    nobody = apply(fenced, fence_coordinator(2, 7))
    found = find_coordinator(nobody, GROUP_KEY_TYPE, "group")
    assert "no coordinator is live" in found.error_message
