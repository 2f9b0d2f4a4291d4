"""Goal: when a topic is deleted (or deleted and created again under the same name), every
group's committed offsets of it are deleted, as Kafka's group coordinator does
(onPartitionsDeleted). They stayed: a group subscribed to the name kept them forever (retention
spares the topics a member subscribes to), and once the topic was created again its consumers
started at the old topic's committed offsets, skipping the new topic's first records (an
offset of 50 on the old topic: records 0 to 49 of the new one never read by the group), or
jumping to auto.offset.reset past its end. An open transaction's offsets of the topic are
cancelled too, as OffsetDelete's are, or its COMMIT marker would set them on the new topic.

Method: a real Coordinator (not run) whose one owned partition of __consumer_offsets is loaded
by hand over a stand-in for OffsetsLog; images made by hand go through `_on_image`, as the
metadata follower calls it. The partition is also told of a deletion while it is loading. The
pure parts (`ownership.deleted_topics`, `GroupCoordinatorShard.delete_topics`) are checked on
their own, the latter against a replay of its records.

A coordinator that loads the partition after the image changed (it did not own it then, or was
down) was told nothing: each offset records its topic's id (OffsetCommitValue.topic_id), and the
load drops those the metadata no longer shows under that id.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from group_harness import GroupHarness
from standalone_coordinator import standalone_coordinator

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import decode_batches
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import (
    CoordinatorAssignment,
    CoordinatorRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.services.coordinator import group_records
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.offsets_log import ProduceResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.services.coordinator.ownership import deleted_topics, subscribable_topic_ids
from samsa.services.coordinator.record_writer import RecordWriter
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g
from samsa.v1 import transactions_pb2 as x

OWNED = CoordinatorAssignment(CONSUMER_OFFSETS_TOPIC, 0, 1, 10, 0, 100)
PRODUCER = 7


def topic(name: str, topic_id: bytes, count: int = 2) -> TopicImage:
    partitions = {number: PartitionState(number, (1,), (1,), -1, 0, 0) for number in range(count)}
    return TopicImage(name, topic_id, partitions)


def image_with(*topics: TopicImage) -> MetadataImage:
    internal = topic(CONSUMER_OFFSETS_TOPIC, b"offsets", 1)
    return replace(
        MetadataImage.empty(),
        topics={one.name: one for one in (internal, *topics)},
        topic_names={one.topic_id: one.name for one in (internal, *topics)},
        coordinators={1: CoordinatorRegistration(1, "a", "h:1", 10)},
        coordinator_assignments={(OWNED.topic, OWNED.partition): OWNED},
    )


class AppendingLog:
    """OffsetsLog's produce over a list of batches, each acknowledged at once."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.end_offset = 0

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        base_offset = self.end_offset
        self.batches.append(batch)
        self.end_offset += sum(one.header.record_count for one in decode_batches(batch))
        return ProduceResult(0, "", base_offset)

    def tombstones(self) -> list[tuple[str, str, int]]:
        found = []
        for batch in decode_batches(b"".join(self.batches)):
            for key, value in zip(batch.keys, batch.values, strict=True):
                record_key, record_value = group_records.decode(key or b"", value)
                if record_value is None and record_key.HasField("offset_commit"):
                    commit = record_key.offset_commit
                    found.append((commit.group_id, commit.topic, commit.partition))
        return found


def commit(partition: OffsetsPartition, topic_name: str, number: int, offset: int) -> None:
    request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
    request.topics.add(name=topic_name).partitions.add(partition=number, committed_offset=offset)
    topics = {"t": 2, "u": 1}
    result = partition.shard.commit_offsets(request, 1_000, topics)
    assert result.response.topics[0].partitions[0].error_code == ErrorCode.NONE
    partition.queue_encoded(
        [group_records.encode(record) for record in result.records],
        partition._on_durable(result.records),
    )


def test_a_deleted_or_recreated_topic_loses_its_committed_offsets() -> None:
    async def scenario() -> None:
        coordinator = standalone_coordinator()
        offsets_log = AppendingLog()
        before = image_with(topic("t", b"t-1"), topic("u", b"u-1", 1))
        try:
            coordinator.membership.coordinator_epoch = 10
            await coordinator._on_image(MetadataImage.empty(), before)
            [partition] = coordinator.owned_partitions()
            assert partition._task is not None  # no leader: loading for ever
            partition._task.cancel()  # loaded by hand instead
            await asyncio.gather(partition._task, return_exceptions=True)
            partition.offsets_log = offsets_log  # type: ignore[assignment]
            writer: RecordWriter[asyncio.Future[int]] = RecordWriter(
                100, 10, max_batch_records=100, max_batch_bytes=1 << 20
            )
            partition.writer = writer
            write_loop = asyncio.ensure_future(partition._write_loop(writer))
            commit(partition, "t", 0, 50)
            commit(partition, "t", 1, 60)
            commit(partition, "u", 0, 70)

            recreated = image_with(topic("t", b"t-2"), topic("u", b"u-1", 1))
            await coordinator._on_image(before, recreated)
            await partition.write([])
            offsets = partition.shard.state.groups["g"].offsets
            assert sorted(offsets) == [("u", 0)], "the old topic's offsets outlived it"
            assert sorted(offsets_log.tombstones()) == [("g", "t", 0), ("g", "t", 1)]

            await coordinator._on_image(recreated, image_with(topic("t", b"t-2")))
            await partition.write([])
            assert partition.shard.state.groups["g"].offsets == {}
            write_loop.cancel()
            await asyncio.gather(write_loop, return_exceptions=True)
        finally:
            await coordinator.offsets_log.close()
            await coordinator.channel.close()

    asyncio.run(scenario())


def test_a_deletion_seen_while_loading_applies_once_loaded() -> None:
    async def scenario() -> None:
        offsets_log = AppendingLog()
        partition = OffsetsPartition(
            OWNED,
            coordinator_id=1,
            offsets_log=offsets_log,  # type: ignore[arg-type]
            config=GroupConfig(),
            on_ended=lambda _: None,
        )
        request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
        request.topics.add(name="t").partitions.add(partition=0, committed_offset=50)
        for record in partition.shard.commit_offsets(request, 1_000, {"t": 1}).records:
            partition.shard.replay(record, 0)  # as a load replays what the log holds
        partition.on_topics_deleted(frozenset({"t"}))
        assert partition.shard.state.groups["g"].offsets, "loading: nothing is written yet"

        writer: RecordWriter[asyncio.Future[int]] = RecordWriter(
            100, 10, max_batch_records=100, max_batch_bytes=1 << 20
        )
        partition.writer = writer  # loaded
        partition.on_loaded()
        write_loop = asyncio.ensure_future(partition._write_loop(writer))
        await partition.write([])
        assert partition.shard.state.groups["g"].offsets == {}
        assert offsets_log.tombstones() == [("g", "t", 0)]
        write_loop.cancel()
        await asyncio.gather(write_loop, return_exceptions=True)

    asyncio.run(scenario())


def test_deleted_topics_are_those_gone_or_under_another_id() -> None:
    before = image_with(topic("t", b"t-1"), topic("u", b"u-1"), topic("v", b"v-1"))
    after = image_with(topic("t", b"t-2"), topic("v", b"v-1"), topic("w", b"w-1"))
    assert deleted_topics(before, after) == frozenset({"t", "u"})
    assert deleted_topics(before, before) == frozenset()


def test_the_shard_deletes_committed_and_pending_offsets_of_the_topics() -> None:
    harness = GroupHarness(topics={"t": 2, "u": 1})
    harness.join("m1", topics=("t", "u"))
    epoch = harness.member("m1").member_epoch
    harness.commit("m1", epoch, {("t", 0): 5, ("t", 1): 6, ("u", 0): 7})
    request = x.TxnOffsetCommitRequest(group_id="g", member_id="m1", member_epoch=epoch)
    request.topics.add(name="t").partitions.add(partition=1, committed_offset=9)
    written = harness.coordinator.commit_txn_offsets(request, harness.now_ms, harness.topics)
    landed = 10**6  # the producer's batch, in the log beside the harness's records
    harness.coordinator.replay_transactional(PRODUCER, [(landed, written.records[0])])

    harness.keep(harness.coordinator.delete_topics(frozenset({"t"})))  # replays the same
    assert sorted(harness.group().offsets) == [("u", 0)]
    assert harness.coordinator.txn_offsets.unstable("g") == set()
    assert harness.coordinator.complete_transaction(PRODUCER, True, landed + 1) == 0
    assert sorted(harness.group().offsets) == [("u", 0)]
    assert harness.member("m1").topic_names == frozenset({"t", "u"}), "subscriptions stay"


def recorded(topic_name: str, number: int, offset: int, topic_id: bytes) -> GroupRecord:
    """A commit as a previous owner wrote it, under `topic_id` (b"": before ids were recorded)."""
    value = g.OffsetCommitValue(committed_offset=offset, committed_leader_epoch=-1)
    value.topic_id = topic_id
    return group_records.offset_commit("g", topic_name, number, value)


def test_a_partition_loaded_after_the_topic_changed_drops_the_old_topics_offsets() -> None:
    """No image change told this coordinator: t was deleted and created again (t-1 -> t-2),
    and u deleted, while no coordinator had the partition loaded; its first image already
    shows the result. The load drops what was committed under t-1 and u-1, committed or
    pending in an open transaction, and keeps t-2's and those recorded with no id."""

    async def scenario() -> None:
        coordinator = standalone_coordinator()
        offsets_log = AppendingLog()
        try:
            coordinator.membership.coordinator_epoch = 10
            now = image_with(topic("t", b"t-2"), topic("v", b"v-1"))
            await coordinator._on_image(MetadataImage.empty(), now)
            [partition] = coordinator.owned_partitions()
            assert partition._task is not None
            partition._task.cancel()  # loaded by hand instead
            await asyncio.gather(partition._task, return_exceptions=True)
            partition.offsets_log = offsets_log  # type: ignore[assignment]
            shard = partition.shard
            shard.replay(group_records.group_metadata("g", g.GroupMetadataValue()), 0)
            for position, record in enumerate(
                [
                    recorded("t", 0, 50, b"t-1"),
                    recorded("t", 1, 7, b"t-2"),
                    recorded("u", 0, 60, b"u-1"),
                    recorded("v", 0, 70, b""),
                ],
                start=1,
            ):
                shard.replay(record, position)
            landed = 10
            shard.replay_transactional(PRODUCER, [(landed, recorded("t", 2, 80, b"t-1"))])
            writer: RecordWriter[asyncio.Future[int]] = RecordWriter(
                100, 10, max_batch_records=100, max_batch_bytes=1 << 20
            )
            partition.writer = writer
            partition.on_loaded()
            write_loop = asyncio.ensure_future(partition._write_loop(writer))
            await partition.write([])
            offsets = shard.state.groups["g"].offsets
            assert {tp: v.committed_offset for tp, v in offsets.items()} == {
                ("t", 1): 7,
                ("v", 0): 70,
            }, "the old topics' offsets outlived them"
            assert sorted(offsets_log.tombstones()) == [("g", "t", 0), ("g", "t", 2), ("g", "u", 0)]
            assert shard.txn_offsets.unstable("g") == set()
            shard.complete_transaction(PRODUCER, True, landed + 1)
            assert ("t", 2) not in shard.state.groups["g"].offsets, "the marker set it"
            write_loop.cancel()
            await asyncio.gather(write_loop, return_exceptions=True)
        finally:
            await coordinator.offsets_log.close()
            await coordinator.channel.close()

    asyncio.run(scenario())


def test_commits_record_the_topic_id_the_metadata_shows() -> None:
    """What the check at load compares against: OffsetCommit and TxnOffsetCommit record the
    metadata's id of each topic with its offset; a coordinator's ids are its image's."""
    harness = GroupHarness(topics={"t": 2})
    ids = {"t": b"t-1"}
    request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=0, committed_offset=5)
    written = harness.coordinator.commit_offsets(request, 1_000, harness.topics, ids).records
    assert [v.offset_commit.topic_id for _, v in written if v.HasField("offset_commit")] == [b"t-1"]
    txn = x.TxnOffsetCommitRequest(group_id="g", member_epoch=-1)
    txn.topics.add(name="t").partitions.add(partition=1, committed_offset=6)
    written = harness.coordinator.commit_txn_offsets(txn, 1_000, harness.topics, ids).records
    assert [v.offset_commit.topic_id for _, v in written if v is not None] == [b"t-1"]
    image = image_with(topic("t", b"t-1"), topic("u", b"u-1"))
    assert subscribable_topic_ids(image) == {"t": b"t-1", "u": b"u-1"}
