"""Goal: one handler's records larger than one batch of `__consumer_offsets` (its
max.message.bytes) do not take the partition down. DeleteGroups of a group with many committed
offsets, or offsets expiring together, write a tombstone each: one batch of them was refused by
the broker (MESSAGE_TOO_LARGE), which failed the writer, so every group of the partition answered
NOT_COORDINATOR while it reloaded, and the retry (or the next expiry) failed it again. Such a
write is now sent as several batches, each within the limit (offsets_partition.py).

A batch the broker refuses as too large all the same (an internal topic whose max.message.bytes
was lowered before the controller refused that) fails only the request whose write is too large,
with MESSAGE_TOO_LARGE (not retriable): a batch of several writes is sent again one per batch.

Method: a real OffsetsPartition over a real broker Log (default max.message.bytes, which refuses
larger batches as a broker does) through a stand-in for OffsetsLog. The partition must stay
loaded, its log must hold no batch over the limit, and a fresh load of the log must give the same
state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from async_waits import until

from samsa.common import limits
from samsa.common.errors import ErrorCode, RecordTooLargeError
from samsa.common.record.codec import decode_batches
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.coordinator import group_records
from samsa.services.coordinator.coordinator_partition import (
    MAX_BATCH_BYTES,
    MAX_BATCH_RECORDS,
    PartitionUnavailableError,
)
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.offsets_log import FetchResult, ProduceResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition, split_write
from samsa.services.coordinator.servicer import _commit_failed
from samsa.v1 import coordinator_pb2 as c

TOPIC = "t" * 200  # long names make big records
PARTITIONS = 10_000  # about 2.3 MB of tombstones
TOPICS = {TOPIC: PARTITIONS}
COMMIT_PARTITIONS = 2_000  # one commit's worth (under one batch)
WAIT_S = 30.0


class LogBackedOffsetsLog:
    """What OffsetsPartition asks of OffsetsLog, over one real Log committed at once."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.refused = 0

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        try:
            info = self.log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms())
        except RecordTooLargeError as error:
            self.refused += 1
            return ProduceResult(int(error.code), str(error))
        return ProduceResult(0, "", info.first_offset)

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        read = self.log.read(offset, 1 << 20)
        return FetchResult(0, "", read.records, self.log.log_end_offset, self.log.log_start_offset)

    def largest_batch(self) -> int:
        largest, offset = 0, self.log.log_start_offset
        while offset < self.log.log_end_offset:
            read = self.log.read(offset, 8 << 20)
            for batch in decode_batches(read.records):
                largest = max(largest, batch.header.size_bytes)
                offset = batch.header.next_offset
        return largest


def now_ms() -> int:
    return int(time.time() * 1000)


def commit(partition: OffsetsPartition, group: str, count: int) -> Awaitable[None]:
    """Commit offsets 0..count-1 of TOPIC for `group`, from outside the group protocol."""
    request = c.OffsetCommitRequest(group_id=group, member_epoch=-1)
    topic = request.topics.add(name=TOPIC)
    for number in range(count):
        topic.partitions.add(partition=number, committed_offset=number)
    return partition.write(partition.shard.commit_offsets(request, now_ms(), TOPICS).records)


def partition_over(offsets_log: LogBackedOffsetsLog, config: GroupConfig) -> OffsetsPartition:
    assignment = CoordinatorAssignment(CONSUMER_OFFSETS_TOPIC, 0, 1, 1, 0, 100)
    return OffsetsPartition(
        assignment,
        coordinator_id=1,
        offsets_log=offsets_log,  # type: ignore[arg-type]
        config=config,
        on_ended=lambda _: None,
    )


async def loaded(partition: OffsetsPartition) -> None:
    partition.start()
    await until(lambda: partition.loaded, "the partition loaded", timeout_s=WAIT_S)


async def commit_everything(partition: OffsetsPartition) -> None:
    """Commit an offset for every partition, in commits of one batch each, written together."""
    writes = []
    for first in range(0, PARTITIONS, COMMIT_PARTITIONS):
        request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
        topic = request.topics.add(name=TOPIC)
        for number in range(first, first + COMMIT_PARTITIONS):
            topic.partitions.add(partition=number, committed_offset=number)
        result = partition.shard.commit_offsets(request, now_ms(), TOPICS)
        writes.append(partition.write(result.records))
    await asyncio.gather(*writes)


async def reload_matches(offsets_log: LogBackedOffsetsLog, live: OffsetsPartition) -> None:
    reloaded = partition_over(offsets_log, live.shard.config)
    await loaded(reloaded)
    try:
        assert reloaded.shard.state == live.shard.state
    finally:
        await reloaded.stop()


def keeps_the_partition(
    tmp_path: Path, config: GroupConfig, large_write: Callable[[OffsetsPartition], Awaitable[None]]
) -> None:
    """Commits an offset for every partition to a live partition over a real log, then runs
    `large_write` on it: the partition must stay loaded, reload to the same state, and its log
    must hold no refused batch nor one over the limit."""

    async def run() -> None:
        offsets_log = LogBackedOffsetsLog(Log.open(tmp_path, LogConfig(), now_ms=now_ms()))
        live = partition_over(offsets_log, config)
        await loaded(live)
        try:
            await commit_everything(live)
            await large_write(live)
            assert live.loaded, "the partition was given up"
            await reload_matches(offsets_log, live)
        finally:
            await live.stop()
        assert offsets_log.refused == 0
        assert offsets_log.largest_batch() <= limits.max_message_bytes_default
        offsets_log.log.close()

    asyncio.run(run())


def test_deleting_a_group_with_more_offsets_than_one_batch_holds_keeps_the_partition(
    tmp_path: Path,
) -> None:
    async def delete_the_group(live: OffsetsPartition) -> None:
        result = live.shard.delete_groups(["g"])
        assert result.response.groups[0].error_code == 0
        await asyncio.wait_for(live.write(result.records), WAIT_S)
        assert "g" not in live.shard.state.groups

    keeps_the_partition(tmp_path, GroupConfig(), delete_the_group)


def test_offsets_expiring_together_beyond_one_batch_keep_the_partition(tmp_path: Path) -> None:
    async def let_them_expire(live: OffsetsPartition) -> None:
        await until(
            lambda: "g" not in live.shard.state.groups, "the offsets expired", timeout_s=WAIT_S
        )
        await live.write([])  # the expiry's write is durable

    keeps_the_partition(tmp_path, GroupConfig(offsets_retention_ms=300), let_them_expire)


def test_a_write_that_fits_one_batch_stays_whole_and_a_larger_one_is_cut_in_order() -> None:
    def tombstones(count: int) -> list:
        return [group_records.offset_commit("g", TOPIC, n, None) for n in range(count)]

    small = tombstones(3_000)  # ~660 KB: over the writer's budget, under max.message.bytes
    assert [part for part, _ in split_write(small)] == [small]
    large = tombstones(PARTITIONS)
    parts = split_write(large)
    assert len(parts) > 1
    assert [record for part, _ in parts for record in part] == large
    for part, encoded in parts:
        assert len(part) == len(encoded) <= MAX_BATCH_RECORDS
        assert sum(len(key) + len(value or b"") for key, value in encoded) <= MAX_BATCH_BYTES


def test_writes_merged_past_a_lowered_max_message_bytes_are_sent_one_by_one(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        config = LogConfig(max_message_bytes=64 * 1024)
        offsets_log = LogBackedOffsetsLog(Log.open(tmp_path, config, now_ms=now_ms()))
        live = partition_over(offsets_log, GroupConfig())
        await loaded(live)
        try:
            # ~26 KB each, under the limit; queued together, they merge into one ~130 KB batch.
            writes = [commit(live, f"g{number}", 100) for number in range(5)]
            await asyncio.wait_for(asyncio.gather(*writes), WAIT_S)
            assert offsets_log.refused == 1 and live.loaded
            await reload_matches(offsets_log, live)
        finally:
            await live.stop()
        offsets_log.log.close()

    asyncio.run(run())


def test_a_write_over_a_lowered_max_message_bytes_fails_its_request_not_retriable(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        config = LogConfig(max_message_bytes=64 * 1024)
        offsets_log = LogBackedOffsetsLog(Log.open(tmp_path, config, now_ms=now_ms()))
        live = partition_over(offsets_log, GroupConfig())
        await loaded(live)
        try:
            # Queued together (one batch, refused); the small one goes alone, first.
            small, big = await asyncio.wait_for(
                asyncio.gather(
                    commit(live, "small", 10), commit(live, "big", 400), return_exceptions=True
                ),
                WAIT_S,
            )
            assert small is None, small
            assert isinstance(big, PartitionUnavailableError), big
            assert big.code == ErrorCode.MESSAGE_TOO_LARGE  # not retriable: no retry loop
            assert "max.message.bytes" in big.message
            request = c.OffsetCommitRequest(group_id="big")
            request.topics.add(name=TOPIC).partitions.add(partition=0)
            [answer] = _commit_failed(request, big).topics[0].partitions  # what OffsetCommit says
            assert answer.error_code == ErrorCode.INVALID_COMMIT_OFFSET_SIZE
            assert "commit fewer partitions" in answer.error_message
        finally:
            await live.stop()
        offsets_log.log.close()

    asyncio.run(run())
