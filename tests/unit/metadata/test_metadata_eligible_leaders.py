"""Goal: a partition's eligible leader replicas (KIP-966) replay, snapshot and reload exactly as
the controller wrote them, and logs and snapshots written before the field still replay with
none: an absent field is today's partition.

Method: records built by hand (metadata_helpers.py) applied with the real `replay`; snapshots
through `to_snapshot`/`from_snapshot`; an older record is one that never set the field.
"""

from __future__ import annotations

import pytest
from metadata_helpers import apply, change, partition, register, topic, unfence

from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import InvalidBatchError
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

T = b"\x07" * 16


def _image() -> MetadataImage:
    image = apply(MetadataImage.empty(), register(1), register(2), register(3))
    image = apply(image, unfence(1, 0), unfence(2, 1), unfence(3, 2))
    return apply(image, topic("t", T), partition(T, 0, [1, 2, 3]))


def test_a_change_sets_eligible_leaders_and_a_later_change_without_them_keeps_them() -> None:
    image = apply(_image(), change(T, 0, isr=[1], elr=[2, 3]))
    state = image.topics["t"].partitions[0]
    assert (state.isr, state.elr, state.partition_epoch, state.leader_epoch) == ((1,), (2, 3), 1, 0)
    image = apply(image, change(T, 0, leader=-1))
    assert image.topics["t"].partitions[0].elr == (2, 3), "unset: unchanged"
    image = apply(image, change(T, 0, elr=[]))
    state = image.topics["t"].partitions[0]
    assert state.elr == () and state.partition_epoch == 3 and state.leader_epoch == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"isr": [1, 2], "elr": [2]},  # an ISR member
        {"isr": [1], "elr": [2, 2]},  # twice
        {"isr": [1], "elr": [4]},  # not a replica
        {"elr": [1]},  # overlaps the ISR the change keeps
    ],
)
def test_eligible_leaders_outside_the_replicas_or_inside_the_isr_are_refused(fields) -> None:
    with pytest.raises(InvalidBatchError, match="eligible leaders"):
        apply(_image(), change(T, 0, **fields))


def test_a_snapshot_keeps_eligible_leaders() -> None:
    image = apply(_image(), change(T, 0, isr=[3], elr=[1, 2], leader=3))
    restored = from_snapshot(to_snapshot(image))
    assert restored == image and restored.topics["t"].partitions[0].elr == (1, 2)


def test_records_and_snapshots_without_the_field_replay_with_no_eligible_leaders() -> None:
    image = apply(_image(), change(T, 0, isr=[1]))
    assert image.topics["t"].partitions[0].elr == ()
    snapshot = to_snapshot(image)
    (record,) = [r.partition for r in snapshot.records if r.WhichOneof("record") == "partition"]
    older = m.PartitionRecord(
        topic_id=T, partition=0, replicas=[1, 2, 3], isr=[1], leader=1, partition_epoch=1
    )
    assert record.SerializeToString(deterministic=True) == older.SerializeToString(
        deterministic=True
    ), "an image without eligible leaders snapshots as before the field"
    assert from_snapshot(snapshot) == image
