"""Snapshots rebuild the same image; the history serves followers by offset or asks for one."""

from __future__ import annotations

import pytest
from metadata_helpers import apply, change, config, partition, register, topic, unfence

from samsa.metadata.history import MetadataHistory
from samsa.metadata.image import BROKER_RESOURCE, INITIAL_HASH, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.metadata.snapshot import InvalidSnapshotError, from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2

T1 = b"\x01" * 16


def busy_image() -> MetadataImage:
    image = apply(MetadataImage.empty(), register(1, rack="a"), register(2, rack="b"))
    image = apply(image, unfence(1, 0), register(2, incarnation="restarted"))
    image = apply(
        image,
        topic("orders", T1),
        partition(T1, 0, [1, 2]),
        partition(T1, 1, [2, 1]),
        config(TOPIC_RESOURCE, "orders", "retention.ms", "60000"),
        config(BROKER_RESOURCE, "", "log.retention.ms", "1"),
    )
    return apply(image, change(T1, 0, leader=2, isr=[2]))


def test_a_snapshot_rebuilds_an_equal_image_and_replay_continues_from_it() -> None:
    image = busy_image()
    restored = from_snapshot(to_snapshot(image))
    assert restored == image
    assert restored.brokers[2].broker_epoch == 3 and restored.brokers[1].fenced is False
    assert restored.topics["orders"].partitions[0].leader_epoch == 1
    after_original = apply(image, register(7))
    after_restored = apply(restored, register(7))
    assert after_original == after_restored
    assert after_restored.brokers[7].broker_epoch == image.end_offset


def test_snapshots_are_canonical() -> None:
    image = busy_image()
    again = from_snapshot(to_snapshot(image))
    assert to_snapshot(image).SerializeToString(deterministic=True) == to_snapshot(
        again
    ).SerializeToString(deterministic=True)


def test_an_inconsistent_snapshot_is_refused() -> None:
    snapshot = to_snapshot(busy_image())
    snapshot.records.append(
        metadata_pb2.MetadataRecord(
            partition=metadata_pb2.PartitionRecord(topic_id=b"\x09" * 16, partition=0, replicas=[1])
        )
    )
    with pytest.raises(InvalidSnapshotError):
        from_snapshot(snapshot)
    with pytest.raises(InvalidSnapshotError):
        from_snapshot(metadata_pb2.MetadataSnapshot(end_offset=3, hash=b"short"))


def history_with(
    batches: int, max_batches: int = 100
) -> tuple[MetadataHistory, list[MetadataImage]]:
    image = MetadataImage.empty()
    history = MetadataHistory(start_offset=0, start_hash=INITIAL_HASH, max_batches=max_batches)
    images = [image]
    for broker_id in range(batches):
        batch = make_batch(image, [register(broker_id), register(broker_id + 100)], 1)
        image = replay(image, batch)
        history.append(batch, image.hash)
        images.append(image)
    return history, images


def test_history_answers_from_a_matching_offset_and_hash() -> None:
    history, images = history_with(5)
    answer = history.batches_since(images[2].end_offset, images[2].hash, max_bytes=1 << 20)
    assert answer is not None and [b.base_offset for b in answer] == [4, 6, 8]
    follower = images[2]
    for batch in answer:
        follower = replay(follower, batch)
    assert follower == images[-1]
    assert history.batches_since(images[-1].end_offset, images[-1].hash, 1 << 20) == []


def test_history_wants_a_snapshot_for_diverged_ahead_too_old_or_mid_batch_callers() -> None:
    history, images = history_with(5, max_batches=3)
    assert history.start_offset == 4
    assert history.batches_since(0, INITIAL_HASH, 1 << 20) is None, "too old"
    assert history.batches_since(images[3].end_offset, b"\x00" * 16, 1 << 20) is None, "diverged"
    assert history.batches_since(11, images[-1].hash, 1 << 20) is None, "mid-batch"
    assert history.batches_since(12, images[-1].hash, 1 << 20) is None, "ahead of us"
    assert history.batches_since(10, b"\x01" * 16, 1 << 20) is None, "at the end, other hash"


def test_history_cuts_answers_by_bytes_but_always_sends_one_batch() -> None:
    history, _images = history_with(5)
    answer = history.batches_since(0, INITIAL_HASH, max_bytes=1)
    assert answer is not None and len(answer) == 1
