"""Goal: transactional offsets whose write is answered after the watcher read past their marker
are still resolved by that marker, as a load of the log resolves them (offsets_partition.py,
`_watch`): the watcher goes back to them even when its read is in flight.

Method: the real OffsetsPartition over a real Log of test_offsets_partition_marker_order.py,
with a fetch that can be held. Producer A's open transaction keeps the watcher running.
Producer B's TxnOffsetCommit lands, unanswered; B's transaction is aborted (its ABORT marker
lands: an abort by timeout or by a new instance needs no answer from the group coordinator),
and the watcher reads the marker while nothing of B is pending. The watcher's next read is held
(more records arrive meanwhile) while B's answer comes and its offsets become pending. Before the
fix the watcher, once its read returned, moved past the marker again: B's aborted offsets stayed
pending (UNSTABLE_OFFSET_COMMIT for ever), and B's next transaction's COMMIT marker committed
them, though that transaction committed another group's offsets only; a load held neither.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from async_waits import until
from test_offsets_partition_marker_order import (
    TOPICS,
    WAIT_S,
    LogBackedOffsetsLog,
    loaded,
    now_ms,
    partition_over,
)

from samsa.common.record.codec import build_batch
from samsa.common.record.control_batches import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
)
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.offsets_log import FetchResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

A, B = 7, 8  # transactional producers


class HeldFetchLog(LogBackedOffsetsLog):
    """The stand-in whose next fetch waits on `fetch_gate` once it is set."""

    def __init__(self, log: Log) -> None:
        super().__init__(log)
        self.fetch_gate: asyncio.Event | None = None
        self.fetch_held = asyncio.Event()

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        gate, self.fetch_gate = self.fetch_gate, None
        if gate is not None:
            self.fetch_held.set()
            await gate.wait()
        return await super().fetch(topic, partition, offset)


def txn_offsets(partition: OffsetsPartition, group_id: str, offset: int) -> list[GroupRecord]:
    request = x.TxnOffsetCommitRequest(group_id=group_id, member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=0, committed_offset=offset)
    return partition.shard.commit_txn_offsets(request, now_ms(), TOPICS).records


def fetched(partition: OffsetsPartition, group_id: str) -> tuple[int, int]:
    """(committed offset, error code) of t-0 for the group, asked with require_stable."""
    request = c.OffsetFetchRequest(
        group_id=group_id, topics=[c.TopicPartitions(topic="t", partitions=[0])]
    )
    request.require_stable = True
    answer = partition.shard.fetch_offsets(request).topics[0].partitions[0]
    return answer.committed_offset, answer.error_code


def test_offsets_answered_after_their_abort_marker_was_read_are_dropped_by_it(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        offsets_log = HeldFetchLog(Log.open(tmp_path, LogConfig(), now_ms=now_ms()))
        live = partition_over(offsets_log)
        await loaded(live)
        try:
            await live.write_transactional(A, 0, txn_offsets(live, "a", 3))
            end = offsets_log.log.log_end_offset
            await until(lambda: offsets_log.served_through >= end, "the watcher caught up")

            answer = asyncio.Event()
            offsets_log.hold_next_answer = answer
            b_write = asyncio.ensure_future(
                live.write_transactional(B, 0, txn_offsets(live, "g", 17))
            )
            await asyncio.wait_for(offsets_log.held_appended.wait(), WAIT_S)
            aborted_at = offsets_log.append_marker(B, 1, CONTROL_TYPE_ABORT)
            await until(lambda: offsets_log.served_through > aborted_at, "the watcher read it")

            offsets_log.fetch_gate = gate = asyncio.Event()
            await asyncio.wait_for(offsets_log.fetch_held.wait(), WAIT_S)
            more = build_batch([b"v"], keys=[b"k"], timestamps=now_ms())  # the read finds news
            offsets_log.log.append_as_leader(more, leader_epoch=0, now_ms=now_ms())
            answer.set()
            await asyncio.wait_for(b_write, WAIT_S)  # B's offsets are pending now
            gate.set()
            await until(lambda: B not in live.shard.txn_offsets.by_producer, "B's dropped")
            assert A in live.shard.txn_offsets.by_producer

            await live.write_transactional(B, 1, txn_offsets(live, "h", 40))
            committed_at = offsets_log.append_marker(B, 2, CONTROL_TYPE_COMMIT)
            await until(lambda: offsets_log.served_through > committed_at, "the watcher read it")
            await until(lambda: B not in live.shard.txn_offsets.by_producer, "B's resolved")
            assert fetched(live, "h") == (40, 0)
            assert fetched(live, "g") == (-1, 0), "the aborted offset is neither kept nor applied"
        finally:
            await live.stop()

        reloaded = partition_over(offsets_log)
        await loaded(reloaded)
        try:
            assert reloaded.shard.state == live.shard.state
            assert set(reloaded.shard.txn_offsets.by_producer) == {A}
        finally:
            await reloaded.stop()
            offsets_log.log.close()

    asyncio.run(run())
