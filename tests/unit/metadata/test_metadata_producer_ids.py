"""Goal: `next_producer_id` is replicated state like any other: replay sets it (0 in an empty
image), it never moves backwards or stands still, and a snapshot carries it, so a controller or
broker that loads a snapshot never hands out an id twice.

Method: ProducerIdsRecords replayed with the real `replay` on images built by metadata_helpers;
snapshots written with `to_snapshot` and read back with `from_snapshot`.
"""

from __future__ import annotations

import pytest
from metadata_helpers import apply, register

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import InvalidBatchError, replay
from samsa.metadata.snapshot import InvalidSnapshotError, from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m


def producer_ids(next_producer_id: int, broker_id: int = 1, epoch: int = 0) -> m.MetadataRecord:
    return m.MetadataRecord(
        producer_ids=m.ProducerIdsRecord(
            broker_id=broker_id, broker_epoch=epoch, next_producer_id=next_producer_id
        )
    )


def test_replay_sets_next_producer_id_from_zero() -> None:
    image = apply(MetadataImage.empty(), register(1))
    assert image.next_producer_id == 0
    image = apply(image, producer_ids(1000))
    assert image.next_producer_id == 1000
    image = apply(image, producer_ids(2000), producer_ids(3000, broker_id=2))
    assert image.next_producer_id == 3000 and image.end_offset == 4


@pytest.mark.parametrize("value", [999, 1000, 0, -5])
def test_a_record_that_does_not_move_forward_is_refused_whole(value: int) -> None:
    image = apply(apply(MetadataImage.empty(), register(1)), producer_ids(1000))
    batch = make_batch(image, [producer_ids(2000), producer_ids(value)], 1)
    with pytest.raises(InvalidBatchError, match="only grows"):
        replay(image, batch)
    assert image.next_producer_id == 1000  # the image is a value: nothing half-applied


def test_a_record_without_an_owner_is_refused_in_the_log() -> None:
    image = apply(MetadataImage.empty(), register(1))
    with pytest.raises(InvalidBatchError, match="names no broker"):
        apply(image, producer_ids(1000, broker_id=-1))


def test_a_snapshot_keeps_next_producer_id_and_replay_continues_from_it() -> None:
    image = apply(apply(MetadataImage.empty(), register(1)), producer_ids(5000))
    snapshot = to_snapshot(image)
    assert snapshot.records[-1].producer_ids.next_producer_id == 5000
    restored = from_snapshot(snapshot)
    assert restored == image and restored.next_producer_id == 5000
    assert apply(restored, producer_ids(6000)) == apply(image, producer_ids(6000))
    with pytest.raises(InvalidBatchError):
        apply(restored, producer_ids(5000))


def test_a_snapshot_of_an_image_that_gave_no_block_has_no_producer_ids_record() -> None:
    image = apply(MetadataImage.empty(), register(1))
    snapshot = to_snapshot(image)
    assert all(r.WhichOneof("record") != "producer_ids" for r in snapshot.records)
    assert from_snapshot(snapshot).next_producer_id == 0


def test_a_snapshot_with_producer_ids_that_go_backwards_is_refused() -> None:
    snapshot = to_snapshot(apply(apply(MetadataImage.empty(), register(1)), producer_ids(5000)))
    snapshot.records.append(producer_ids(10, broker_id=-1, epoch=-1))
    with pytest.raises(InvalidSnapshotError):
        from_snapshot(snapshot)
