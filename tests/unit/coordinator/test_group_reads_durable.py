"""Goal: a read of the group coordinator (OffsetFetch, DescribeGroupLag, DescribeGroups,
ListGroups) answers only state the log holds (servicer.py: "no answer shows state the log does
not hold yet"). Each read waits for the writes queued before it, but it read the shard only once
that wait was over: by then handlers had applied later writes, still in flight, and the answer
showed them. A commit that then failed (the coordinator fenced by a newer owner) had been
answered as committed to whoever read the group meanwhile; a DeleteGroups the same way answered
"nothing committed", and a consumer starting from that answer went to auto.offset.reset.

Method: the servicer over an OffsetsPartition whose writer runs against a stand-in for
OffsetsLog that keeps every batch it acknowledges, can hold one answer, and can refuse what
comes after it as a fenced writer's. A commit of 10 is held in flight; the read starts and
waits for it; a commit of 20 (for the reads of groups: to a new group) is applied meanwhile and
then refused. The read must show what the log holds (a shard replayed from the acknowledged
batches): 10 and group g alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import decode_batches
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.coordinator import group_records
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.services.coordinator.offsets_log import OffsetResult, ProduceResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.services.coordinator.record_writer import RecordWriter
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.v1 import coordinator_pb2 as c

TOPICS = {"t": 1}
WAIT_S = 10.0


class FencingLog:
    """What OffsetsPartition's writer asks of OffsetsLog: appends acknowledged in order; `hold`
    keeps the next answer until it is set; once `fenced`, every produce is refused as a fenced
    writer's is."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.end_offset = 0
        self.hold: asyncio.Event | None = None
        self.held = asyncio.Event()  # the held batch is in the log, unanswered
        self.fenced = False

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        if self.fenced:
            return ProduceResult(ErrorCode.INVALID_PRODUCER_EPOCH, "fenced by a newer owner")
        base_offset = self.end_offset
        self.batches.append(batch)
        self.end_offset += sum(one.header.record_count for one in decode_batches(batch))
        hold, self.hold = self.hold, None
        if hold is not None:
            self.held.set()
            await hold.wait()
        return ProduceResult(0, "", base_offset)

    async def list_offsets(self, partitions: Any, spec: int) -> dict[tuple[str, int], OffsetResult]:
        return {topic_partition: OffsetResult(0, 100) for topic_partition in partitions}

    def replayed(self) -> GroupCoordinatorShard:
        """A shard loaded from what the log holds."""
        shard = GroupCoordinatorShard(GroupConfig())
        for batch in decode_batches(b"".join(self.batches)):
            for offset, key, value in zip(batch.offsets(), batch.keys, batch.values, strict=True):
                shard.replay(group_records.decode(key or b"", value), offset)
        return shard


class OwnsOne:
    """The servicer's view of a coordinator owning the one partition."""

    def __init__(self, partition: OffsetsPartition, offsets_log: FencingLog) -> None:
        self.partition = partition
        self.offsets_log = offsets_log
        self.topics = TOPICS
        self.topic_ids: dict[str, bytes] = {}

    def partition_for(self, group_id: str) -> OffsetsPartition:
        self.partition.check_serving()
        return self.partition

    def in_touch(self) -> bool:
        return True

    def owned_partitions(self) -> list[OffsetsPartition]:
        return [self.partition]


def commit(offset: int, group_id: str = "g") -> c.OffsetCommitRequest:
    request = c.OffsetCommitRequest(group_id=group_id, member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=0, committed_offset=offset)
    return request


def fetch_request() -> c.OffsetFetchRequest:
    return c.OffsetFetchRequest(group_id="g", topics=[c.TopicPartitions(topic="t", partitions=[0])])


def committed_offset(answer: c.OffsetFetchResponse) -> int:
    return answer.topics[0].partitions[0].committed_offset


def listed(answer: c.ListGroupsResponse) -> list[str]:
    return [group.group_id for group in answer.groups]


def described(answer: c.DescribeGroupsResponse) -> list[str]:
    return [group.group_id for group in answer.groups if not group.error_code]


# Each read, and what it shows of the log: (request, what it shows, what the log holds). The
# commit held in flight sets g's offset to 10 (g exists); the one refused after it sets 20 and,
# for the reads of groups, commits to a new group "h" instead.
READS: dict[str, tuple[Any, Callable[[Any], object], object, str]] = {
    "OffsetFetch": (fetch_request(), committed_offset, 10, "g"),
    "DescribeGroupLag": (
        c.DescribeGroupLagRequest(group_id="g"),
        lambda answer: answer.partitions[0].committed_offset,
        10,
        "g",
    ),
    "ListGroups": (c.ListGroupsRequest(), listed, ["g"], "h"),
    "DescribeGroups": (c.DescribeGroupsRequest(group_ids=["g", "h"]), described, ["g"], "h"),
}


@pytest.mark.parametrize("method", sorted(READS))
def test_a_read_does_not_show_a_write_queued_after_it(method: str) -> None:
    request, shown, in_log, later_group = READS[method]

    async def scenario() -> None:
        offsets_log = FencingLog()
        partition = OffsetsPartition(
            CoordinatorAssignment(CONSUMER_OFFSETS_TOPIC, 0, 1, 1, 0, 100),
            coordinator_id=1,
            offsets_log=offsets_log,  # type: ignore[arg-type]
            config=GroupConfig(),
            on_ended=lambda _: None,
        )
        writer: RecordWriter[asyncio.Future[int]] = RecordWriter(
            100, 1, max_batch_records=100, max_batch_bytes=1 << 20
        )
        partition.writer = writer  # loaded (of an empty log): serve
        write_loop = asyncio.ensure_future(partition._write_loop(writer))
        servicer = GroupCoordinatorServicer(OwnsOne(partition, offsets_log))  # type: ignore[arg-type]
        try:
            first = await servicer.OffsetCommit(commit(5), None)
            assert first.topics[0].partitions[0].error_code == ErrorCode.NONE

            answer_held = offsets_log.hold = asyncio.Event()
            held = asyncio.ensure_future(servicer.OffsetCommit(commit(10), None))
            await asyncio.wait_for(offsets_log.held.wait(), WAIT_S)
            read = asyncio.ensure_future(getattr(servicer, method)(request, None))
            await asyncio.sleep(0)  # the read waits for the commit of 10
            later = asyncio.ensure_future(servicer.OffsetCommit(commit(20, later_group), None))
            await asyncio.sleep(0)  # applied to the shard, queued behind the commit of 10

            offsets_log.fenced = True  # a newer owner loaded the partition
            answer_held.set()
            assert (await asyncio.wait_for(held, WAIT_S)).topics[0].partitions[0].error_code == 0
            refused = await asyncio.wait_for(later, WAIT_S)
            assert refused.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
            answer = await asyncio.wait_for(read, WAIT_S)

            log_holds = offsets_log.replayed()
            assert committed_offset(log_holds.fetch_offsets(fetch_request())) == 10
            assert sorted(log_holds.state.groups) == ["g"]
            assert shown(answer) == in_log, "the read showed a write the log never held"
        finally:
            write_loop.cancel()
            await asyncio.gather(write_loop, return_exceptions=True)

    asyncio.run(scenario())
