"""Goal: a coordinator partition's producer id rotation (a new producer id at epoch 0 once the
assignment epoch would reach PRODUCER_EPOCH_MAX, the old id named as `retired_producer_id`)
replays and survives snapshots, and replay refuses what would leave an owner of the retired id
unfenced or reuse an id: a new id that does not retire the partition's current one, a new id
below next_producer_id, a retired id dropped or changed without a rotation, a first assignment
that retires anything. A record without the field (every record written before rotation
existed) retires nothing.

Method: records built by hand (test_metadata_coordinators' cluster) and replayed with the real
`replay`; refusals leave the image unchanged; snapshots are compared record by record and by the
image they rebuild.
"""

from __future__ import annotations

import pytest
from metadata_helpers import apply
from test_metadata_coordinators import OFFSETS, TXN, assign, offsets_cluster, txn_cluster

from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import InvalidBatchError
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

LAST_EPOCH = 32766


def rotate(
    number: int, coordinator_id: int, epoch: int, assignment_epoch: int, producer_id: int, retired
) -> m.MetadataRecord:
    """An assignment record naming `retired` as the retired producer id."""
    record = assign(number, coordinator_id, epoch, assignment_epoch, producer_id, topic=OFFSETS)
    record.coordinator_assignment.retired_producer_id = retired
    return record


def near_the_limit() -> MetadataImage:
    """Partition 0 at the last usable epoch under producer id 0; partition 1 under id 1."""
    image = apply(offsets_cluster(), assign(0, 1, 6, LAST_EPOCH, 0), assign(1, 2, 7, 0, 1))
    assert image.next_producer_id == 2
    return image


def test_a_rotation_takes_a_fresh_id_retires_the_old_one_and_later_moves_keep_it():
    rotated = apply(near_the_limit(), rotate(0, 2, 7, 0, 5, retired=0))
    assignment = rotated.coordinator_assignments[(OFFSETS, 0)]
    assert (assignment.producer_id, assignment.assignment_epoch) == (5, 0)
    assert assignment.retired_producer_id == 0
    assert rotated.next_producer_id == 6
    moved = apply(rotated, rotate(0, 1, 6, 1, 5, retired=0))
    assert moved.coordinator_assignments[(OFFSETS, 0)].retired_producer_id == 0
    assert moved.coordinator_assignments[(OFFSETS, 1)].retired_producer_id == -1


def test_a_record_without_the_field_retires_nothing():
    legacy = assign(0, 1, 6, 0, 0)
    assert not legacy.coordinator_assignment.HasField("retired_producer_id")
    image = apply(offsets_cluster(), legacy)
    assert image.coordinator_assignments[(OFFSETS, 0)].retired_producer_id == -1
    explicit = apply(offsets_cluster(), rotate(0, 1, 6, 0, 0, retired=-1))
    assert explicit.coordinator_assignments == image.coordinator_assignments


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (rotate(0, 2, 7, 0, 5, retired=-1), "is not the partition's"),
        (rotate(0, 2, 7, 0, 5, retired=1), "is not the partition's"),
        (rotate(0, 2, 7, 0, 1, retired=0), "lies below next_producer_id"),
        (rotate(0, 2, 7, LAST_EPOCH + 1, 0, retired=0), "retired producer id 0 is not"),
        (rotate(2, 2, 7, 0, 5, retired=3), "retired producer id 3 is not"),
        (rotate(0, 2, 7, 0, 5, retired=-2), "retired producer id -2 is invalid"),
    ],
)
def test_replay_refuses_a_rotation_that_does_not_fit(record, reason):
    image = near_the_limit()
    with pytest.raises(InvalidBatchError, match=reason):
        apply(image, record)


def test_replay_refuses_a_retired_id_dropped_or_changed_before_the_next_rotation():
    rotated = apply(near_the_limit(), rotate(0, 2, 7, 0, 5, retired=0))
    for retired in (-1, 1):
        with pytest.raises(InvalidBatchError, match="retired producer id"):
            apply(rotated, rotate(0, 1, 6, 1, 5, retired=retired))


def test_snapshot_round_trip_keeps_retired_producer_ids():
    image = apply(txn_cluster(), assign(0, 1, 6, LAST_EPOCH, 0), assign(1, 2, 7, 0, 1, topic=TXN))
    image = apply(image, rotate(0, 2, 7, 0, 3, retired=0), rotate(0, 1, 6, 1, 3, retired=0))
    snapshot = to_snapshot(image)
    rebuilt = from_snapshot(snapshot)
    assert rebuilt == image
    assert rebuilt.coordinator_assignments[(OFFSETS, 0)].retired_producer_id == 0
    assert rebuilt.next_producer_id == 4
    assert to_snapshot(rebuilt) == snapshot
    retired = {
        (r.coordinator_assignment.topic, r.coordinator_assignment.partition): (
            r.coordinator_assignment.retired_producer_id
            if r.coordinator_assignment.HasField("retired_producer_id")
            else None
        )
        for r in snapshot.records
        if r.WhichOneof("record") == "coordinator_assignment"
    }
    assert retired == {(OFFSETS, 0): 0, (TXN, 1): None}, "unset when nothing is retired"
