"""Goal: a partition's reassignment in progress (KIP-455: adding and removing replicas) replays,
snapshots and reloads exactly as the controller wrote it; replay refuses lists that break its
invariants (adding and removing are disjoint sets of replicas, leaving a target); records and
snapshots written before the fields replay with no reassignment; DescribeTopics shows it.

Method: records built by hand (metadata_helpers.py) applied with the real `replay`; snapshots
through `to_snapshot`/`from_snapshot`; DescribeTopics through the shared pure read.
"""

from __future__ import annotations

import pytest
from metadata_helpers import apply, partition, register, topic, unfence

from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import InvalidBatchError
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.services.runtime.metadata_reads import describe_topics
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

T = b"\x09" * 16


def _image() -> MetadataImage:
    image = apply(MetadataImage.empty(), *(register(b) for b in (1, 2, 3, 4)))
    image = apply(image, *(unfence(b, b - 1) for b in (1, 2, 3, 4)))
    return apply(image, topic("t", T), partition(T, 0, [1]))


def _change(leader: int | None = None, **lists: list[int]) -> m.MetadataRecord:
    record = m.PartitionChangeRecord(topic_id=T, partition=0)
    if leader is not None:
        record.leader = leader
    for name, ids in lists.items():
        getattr(record, name).SetInParent()
        getattr(record, name).ids.extend(ids)
    return m.MetadataRecord(partition_change=record)


def _begun() -> MetadataImage:
    return apply(
        _image(), _change(replicas=[2, 3, 1], adding_replicas=[2, 3], removing_replicas=[1])
    )


def test_a_change_begins_and_a_later_change_ends_a_reassignment() -> None:
    state = _begun().topics["t"].partitions[0]
    assert (state.replicas, state.adding, state.removing) == ((2, 3, 1), (2, 3), (1,))
    assert state.target_replicas == (2, 3) and state.is_reassigning
    assert (state.partition_epoch, state.leader_epoch, state.leader) == (1, 0, 1)
    image = apply(_begun(), _change(isr=[1, 2]))
    assert image.topics["t"].partitions[0].adding == (2, 3), "unset: unchanged"
    image = apply(
        image,
        _change(leader=2, replicas=[2, 3], isr=[2], adding_replicas=[], removing_replicas=[]),
    )
    state = image.topics["t"].partitions[0]
    assert (state.leader, state.leader_epoch, state.partition_epoch) == (2, 1, 3)
    assert (state.replicas, state.adding, state.removing, state.is_reassigning) == (
        (2, 3),
        (),
        (),
        False,
    )


@pytest.mark.parametrize(
    "lists",
    [
        {"adding_replicas": [4]},  # not a replica
        {"removing_replicas": [4]},  # not a replica
        {"adding_replicas": [2, 2], "replicas": [1, 2]},  # twice
        {"adding_replicas": [2], "removing_replicas": [2], "replicas": [1, 2]},  # both
        {"removing_replicas": [1]},  # removes every replica: no target left
    ],
)
def test_reassignment_lists_that_break_the_invariants_are_refused(lists) -> None:
    with pytest.raises(InvalidBatchError, match="replica"):
        apply(_image(), _change(**lists))


def test_dropping_a_replica_that_a_reassignment_still_names_is_refused() -> None:
    with pytest.raises(InvalidBatchError, match="adding and removing"):
        apply(_begun(), _change(replicas=[2, 1]))


def test_a_snapshot_keeps_a_reassignment_in_progress() -> None:
    image = _begun()
    restored = from_snapshot(to_snapshot(image))
    assert restored == image and restored.topics["t"].partitions[0].removing == (1,)


def test_records_and_snapshots_without_the_fields_replay_with_no_reassignment() -> None:
    image = _image()
    snapshot = to_snapshot(image)
    (record,) = [r.partition for r in snapshot.records if r.WhichOneof("record") == "partition"]
    assert not record.adding_replicas and not record.removing_replicas
    older = m.PartitionRecord(topic_id=T, partition=0, replicas=[1], isr=[1], leader=1)
    assert record.SerializeToString(deterministic=True) == older.SerializeToString(
        deterministic=True
    ), "an image without reassignments snapshots as before the fields"
    assert from_snapshot(snapshot) == image
    assert not image.topics["t"].partitions[0].is_reassigning


def test_describe_topics_shows_the_reassignment() -> None:
    answer = describe_topics(_begun(), c.DescribeTopicsRequest(names=["t"]))
    (described,) = answer.topics[0].partitions
    assert list(described.replicas) == [2, 3, 1]
    assert list(described.adding_replicas) == [2, 3]
    assert list(described.removing_replicas) == [1]
