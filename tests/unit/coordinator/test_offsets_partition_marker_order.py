"""Goal: the group coordinator's runtime resolves a transaction's offsets at its COMMIT marker the
way a load of the log would, even when a plain OffsetCommit was written beside the
TxnOffsetCommit and its answer comes late: before it resolves markers, it learns where every
write queued so far landed (offsets_partition.py, group_txn_offsets.py).

Method: a real OffsetsPartition (load, fence, writer task, marker watcher) over a real broker Log
in a temporary directory, reached through a stand-in for OffsetsLog that appends to that log
at once and can hold back the answer of one write. The plain commit lands first (offset X), the
transaction's offsets after it (X+1), then the COMMIT marker; the plain commit's answer arrives
only after the watcher has read the marker. A fresh partition loaded from the same log must hold
what the live one does.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from async_waits import until

from samsa.common.record.control_batches import CONTROL_TYPE_COMMIT, build_control_batch
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.coordinator.coordinator_partition import CoordinatorPartition
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.offsets_log import FetchResult, ProduceResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

TOPICS = {"t": 1}
PRODUCER = 7  # the transactional producer
WAIT_S = 10.0


class LogBackedOffsetsLog:
    """What OffsetsPartition asks of OffsetsLog, over one real Log: every append is committed at
    once (the high watermark is the log end); `hold_next_answer` keeps the next produce's
    answer until it is set."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.hold_next_answer: asyncio.Event | None = None
        self.held_appended = asyncio.Event()  # the held write is in the log
        self.served_through = -1  # the offset after the last record a fetch returned

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        info = self.log.append_as_leader(
            batch, leader_epoch=0, now_ms=now_ms(), allow_transactional=True
        )
        hold, self.hold_next_answer = self.hold_next_answer, None
        if hold is not None:
            self.held_appended.set()
            await hold.wait()
        return ProduceResult(0, "", info.first_offset)

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        read = self.log.read(offset, 1 << 20)
        self.served_through = max(self.served_through, read.next_offset)
        return FetchResult(0, "", read.records, self.log.log_end_offset, self.log.log_start_offset)

    def append_marker(
        self, producer_id: int, producer_epoch: int, kind: int = CONTROL_TYPE_COMMIT
    ) -> int:
        marker = build_control_batch(
            kind,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=0,
            timestamp=now_ms(),
        )
        info = self.log.append_as_leader(
            marker, leader_epoch=0, now_ms=now_ms(), allow_control_batches=True
        )
        return info.first_offset


def now_ms() -> int:
    return int(time.time() * 1000)


def partition_over(offsets_log: LogBackedOffsetsLog) -> OffsetsPartition:
    assignment = CoordinatorAssignment(CONSUMER_OFFSETS_TOPIC, 0, 1, 1, 0, 100)
    return OffsetsPartition(
        assignment,
        coordinator_id=1,
        offsets_log=offsets_log,  # type: ignore[arg-type]
        config=GroupConfig(),
        on_ended=lambda _: None,
    )


async def loaded(partition: CoordinatorPartition) -> None:
    partition.start()
    await until(lambda: partition.loaded, "the partition loaded")


def committed(partition: OffsetsPartition) -> int:
    request = c.OffsetFetchRequest(
        group_id="g", topics=[c.TopicPartitions(topic="t", partitions=[0])]
    )
    request.require_stable = True
    answer = partition.shard.fetch_offsets(request).topics[0].partitions[0]
    return answer.committed_offset


def test_a_plain_commit_answered_after_the_marker_was_read_is_ordered_by_where_it_landed(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        offsets_log = LogBackedOffsetsLog(Log.open(tmp_path, LogConfig(), now_ms=now_ms()))
        live = partition_over(offsets_log)
        await loaded(live)
        try:
            plain_request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
            plain_request.topics.add(name="t").partitions.add(partition=0, committed_offset=5)
            plain = live.shard.commit_offsets(plain_request, now_ms(), TOPICS)
            answer = asyncio.Event()
            offsets_log.hold_next_answer = answer
            plain_write = asyncio.ensure_future(live.write(plain.records))
            await asyncio.wait_for(offsets_log.held_appended.wait(), WAIT_S)  # landed, unanswered

            txn_request = x.TxnOffsetCommitRequest(group_id="g", member_epoch=-1)
            txn_request.topics.add(name="t").partitions.add(partition=0, committed_offset=17)
            txn = live.shard.commit_txn_offsets(txn_request, now_ms(), TOPICS)
            await live.write_transactional(PRODUCER, 0, txn.records)
            marker_at = offsets_log.append_marker(PRODUCER, 1)  # KIP-890: the epoch after
            # The stand-in's fetch never suspends, so by the time `until` sees the marker served,
            # the watcher has acted on it: resolved it, or started waiting for the plain write.
            await until(lambda: offsets_log.served_through > marker_at, "the watcher read it")
            assert live.shard.txn_offsets, "resolved before knowing where the plain commit landed"

            answer.set()
            await asyncio.wait_for(plain_write, WAIT_S)
            await until(lambda: not live.shard.txn_offsets, "the marker was resolved")
            assert committed(live) == 17, "the transaction's record is the later one in the log"
        finally:
            await live.stop()

        reloaded = partition_over(offsets_log)
        await loaded(reloaded)
        try:
            assert committed(reloaded) == 17
            assert reloaded.shard.state == live.shard.state
        finally:
            await reloaded.stop()
            offsets_log.log.close()

    asyncio.run(run())
