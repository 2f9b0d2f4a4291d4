"""Goal: the coordinator records replay deterministically and refuse what would let two owners
write one partition of __consumer_offsets (an assignment epoch that does not move forward, a
dead or re-registered coordinator, a reused producer id); snapshots carry coordinators and
assignments exactly; groups hash to partitions exactly as Kafka (Java's String.hashCode) does;
FindCoordinator answers from the image with the right error and reason.

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
    NO_COORDINATOR,
    find_coordinator,
    group_partition,
    java_string_hash,
)
from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import InvalidBatchError
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

OFFSETS_ID = bytes(range(16))


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
    number: int, coordinator_id: int, epoch: int, assignment_epoch: int, producer_id: int
) -> m.MetadataRecord:
    return m.MetadataRecord(
        coordinator_assignment=m.CoordinatorAssignmentRecord(
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
    assert image.coordinator_assignments[1].coordinator_id == 2
    moved = apply(image, assign(0, 2, 7, 1, 0))
    assert moved.coordinator_assignments[0].assignment_epoch == 1
    assert moved.coordinator_assignments[0].producer_id == 0
    assert moved.next_producer_id == 2
    orphaned = apply(moved, assign(0, NO_COORDINATOR, -1, 2, 0))
    assert orphaned.coordinator_assignments[0].coordinator_id == NO_COORDINATOR


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
    assert apply(restarted, assign(0, 1, 9, 0, 0)).coordinator_assignments[0].coordinator_epoch == 9


def test_an_assignment_needs_the_topic_and_a_coordinator_needs_an_endpoint():
    image = apply(MetadataImage.empty(), register_coordinator(1))
    with pytest.raises(InvalidBatchError, match="no such partition"):
        apply(image, assign(0, 1, 0, 0, 0))
    with pytest.raises(InvalidBatchError, match="lacks an id or endpoint"):
        apply(image, m.MetadataRecord(register_coordinator=m.RegisterCoordinatorRecord()))


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
    assert rebuilt.coordinator_assignments[2].coordinator_id == 1
    assert rebuilt.next_producer_id == 3
    assert to_snapshot(rebuilt) == snapshot
    kinds = [record.WhichOneof("record") for record in snapshot.records]
    first_coordinator = kinds.index("register_coordinator")
    assert kinds.index("producer_ids") < first_coordinator < kinds.index("coordinator_assignment")


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


# --- FindCoordinator -------------------------------------------------------------------------


def test_find_coordinator_answers_the_owner_of_the_groups_partition():
    image = apply(offsets_cluster(), assign(0, 1, 6, 0, 0), assign(1, 2, 7, 0, 1))
    image = apply(image, assign(2, 2, 7, 0, 2))
    for group in ["group", "my-group", "x", "consumer-group-1"]:
        found = find_coordinator(image, GROUP_KEY_TYPE, group)
        expected_partition = group_partition(group, 3)
        owner = image.coordinator_assignments[expected_partition].coordinator_id
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
