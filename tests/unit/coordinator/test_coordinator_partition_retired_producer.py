"""Goal: when a coordinator partition's producer id is rotated (its assignment epoch would have
passed the int16 producer epoch, see coordinator_control.py), the retired id's last owner never
writes again: the new owner fences the retired id at PRODUCER_EPOCH_MAX before its own fence; a
later owner repeating that fence gets the broker's duplicate answer and loads; both shards
(groups and transactions) replay the retired fence like any writer-epoch record.

Method: real OffsetsPartition and TransactionPartition objects over a real broker Log in a
temporary directory, reached through a stand-in for OffsetsLog that appends at once (the high
watermark is the log end) and answers the Log's refusals with their error codes. The old owner
(producer 100 at epoch 32766) loads and commits first and is never told it was replaced.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from async_waits import until

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import build_batch, decode_batches
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.coordinator import transaction_records
from samsa.services.coordinator.coordinator_partition import (
    CoordinatorPartition,
    PartitionUnavailableError,
)
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.offsets_log import FetchResult, ProduceResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.services.coordinator.record_writer import PRODUCER_EPOCH_MAX
from samsa.services.coordinator.transaction_model import EMPTY, TransactionMetadata
from samsa.services.coordinator.transaction_partition import (
    TransactionConfig,
    TransactionPartition,
)
from samsa.v1 import coordinator_pb2 as c

RETIRED, FRESH = 100, 200
LAST_EPOCH = PRODUCER_EPOCH_MAX - 1  # the highest epoch an owner ever writes with


def now_ms() -> int:
    return int(time.time() * 1000)


class LogOffsetsLog:
    """What a coordinator partition asks of OffsetsLog, over one real Log: appends are
    committed at once; a refused append answers its error code, as the broker does."""

    def __init__(self, log: Log) -> None:
        self.log = log

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        try:
            info = self.log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms())
        except SamsaError as error:
            return ProduceResult(error.code, error.message)
        return ProduceResult(0, "", info.first_offset)

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        read = self.log.read(offset, 1 << 20)
        return FetchResult(0, "", read.records, self.log.log_end_offset, self.log.log_start_offset)

    def identities(self) -> list[tuple[int, int, int]]:
        """(producer id, producer epoch, base sequence) of every batch in the log."""
        records = self.log.read(0, 1 << 20).records
        return [
            (b.header.producer_id, b.header.producer_epoch, b.header.base_sequence)
            for b in decode_batches(records)
        ]


def offsets_partition(
    offsets_log: LogOffsetsLog, epoch: int, producer_id: int, retired: int = -1
) -> OffsetsPartition:
    assignment = CoordinatorAssignment(
        CONSUMER_OFFSETS_TOPIC, 0, 1, 1, epoch, producer_id, retired_producer_id=retired
    )
    return OffsetsPartition(
        assignment,
        coordinator_id=1,
        offsets_log=offsets_log,  # type: ignore[arg-type]
        config=GroupConfig(),
        on_ended=lambda _: None,
    )


def transaction_partition(
    offsets_log: LogOffsetsLog, epoch: int, producer_id: int, retired: int = -1
) -> TransactionPartition:
    assignment = CoordinatorAssignment(
        TRANSACTION_STATE_TOPIC, 0, 1, 1, epoch, producer_id, retired_producer_id=retired
    )

    async def allocate() -> int:
        raise AssertionError("no producer id is allocated here")

    return TransactionPartition(
        assignment,
        coordinator_id=1,
        offsets_log=offsets_log,  # type: ignore[arg-type]
        config=TransactionConfig(),
        allocate_producer_id=allocate,
        on_ended=lambda _: None,
    )


async def loaded(partition: CoordinatorPartition) -> CoordinatorPartition:
    partition.start()
    await until(lambda: partition.loaded or partition.ended, "the partition loaded or ended")
    assert partition.loaded, "the partition failed to load"
    return partition


async def commit_offset(partition: OffsetsPartition, committed_offset: int) -> None:
    request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=0, committed_offset=committed_offset)
    result = partition.shard.commit_offsets(request, now_ms(), {"t": 1})
    await partition.write(result.records)


def committed(partition: OffsetsPartition) -> int:
    request = c.OffsetFetchRequest(
        group_id="g", topics=[c.TopicPartitions(topic="t", partitions=[0])]
    )
    return partition.shard.fetch_offsets(request).topics[0].partitions[0].committed_offset


def test_the_new_owner_fences_the_retired_id_first_and_the_old_owner_is_refused(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        offsets_log = LogOffsetsLog(Log.open(tmp_path, LogConfig(), now_ms=now_ms()))
        old = offsets_partition(offsets_log, LAST_EPOCH, RETIRED)
        new = offsets_partition(offsets_log, 0, FRESH, retired=RETIRED)
        try:
            await loaded(old)
            await commit_offset(old, 5)
            await loaded(new)
            assert offsets_log.identities() == [
                (RETIRED, LAST_EPOCH, 0),  # the old owner's fence
                (RETIRED, LAST_EPOCH, 1),  # its commit
                (RETIRED, PRODUCER_EPOCH_MAX, 0),  # the retired id's fence
                (FRESH, 0, 0),  # the new owner's own fence
            ]
            assert committed(new) == 5, "the old owner's commit was replayed"
            # The old owner has not noticed: its next write is refused by the broker.
            with pytest.raises(PartitionUnavailableError):
                await commit_offset(old, 6)
            late = build_batch(
                [b"v"], keys=[b"k"], producer_id=RETIRED, producer_epoch=LAST_EPOCH, base_sequence=2
            )
            refused = await offsets_log.produce(CONSUMER_OFFSETS_TOPIC, 0, late)
            assert refused.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
            await commit_offset(new, 7)
            assert committed(new) == 7
        finally:
            await old.stop()
            await new.stop()
            offsets_log.log.close()

    asyncio.run(run())


def test_a_later_owner_repeats_the_retired_fence_and_gets_the_duplicate_answer(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        offsets_log = LogOffsetsLog(Log.open(tmp_path, LogConfig(), now_ms=now_ms()))
        first = await loaded(offsets_partition(offsets_log, 0, FRESH, retired=RETIRED))
        await commit_offset(first, 3)  # type: ignore[arg-type]
        await first.stop()
        later = offsets_partition(offsets_log, 1, FRESH, retired=RETIRED)
        try:
            await loaded(later)
            assert offsets_log.identities() == [
                (RETIRED, PRODUCER_EPOCH_MAX, 0),
                (FRESH, 0, 0),
                (FRESH, 0, 1),
                (FRESH, 1, 0),  # the repeated retired fence stored nothing
            ]
            assert committed(later) == 3
        finally:
            await later.stop()
            offsets_log.log.close()

    asyncio.run(run())


def test_the_transaction_shard_replays_the_retired_fence(tmp_path: Path) -> None:
    async def run() -> None:
        offsets_log = LogOffsetsLog(Log.open(tmp_path, LogConfig(), now_ms=now_ms()))
        old = await loaded(transaction_partition(offsets_log, LAST_EPOCH, RETIRED))
        idle = TransactionMetadata("app", 77, 3, 60_000, EMPTY, now_ms())
        await old.write_encoded([transaction_records.encode(idle)])
        await old.stop()
        for _ in range(2):  # the second load repeats the retired fence
            partition = transaction_partition(offsets_log, 0, FRESH, retired=RETIRED)
            try:
                await loaded(partition)
                assert partition.shard.transactions["app"] == idle
            finally:
                await partition.stop()
        assert offsets_log.identities()[2:] == [
            (RETIRED, PRODUCER_EPOCH_MAX, 0),
            (FRESH, 0, 0),
            (FRESH, 0, 1),
        ]
        offsets_log.log.close()

    asyncio.run(run())
