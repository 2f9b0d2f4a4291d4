"""Goal: DeleteGroups cancels the offsets an open transaction committed for the group, as
Kafka's deleteAllOffsets does, and OffsetDelete those of the partitions it names (Kafka's
removeOffsets), so that the transaction's COMMIT marker never brings them back — not even a
marker already in the log that the coordinator's watcher (it polls) has not read when the
deletion is handled: a coordinator that loads the log must hold what the live one holds, and not
refuse a record the live one wrote.

Method: the pure GroupCoordinatorShard and a list standing for `__consumer_offsets` in log order
(plain records, the producer's transactional batch, its marker). The live shard resolves the
marker only after it handled the deletion; a fresh shard replays the list in order as the
runtime loads it (skipping a record replay refuses, as coordinator_partition does); the two
must agree on groups, offsets and what is still pending.
A transactional batch whose answer comes only after the group's deletion and an expiry is
driven through OffsetsPartition.write_transactional too, over a stand-in for OffsetsLog.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.services.coordinator.offsets_log import FetchResult, ProduceResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.services.coordinator.record_writer import RecordWriter
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

TOPICS = {"t": 2}
NOW = 1_000
PRODUCER = 7


@dataclass
class Log:
    """The live shard and the log it and the transaction coordinator wrote."""

    live: GroupCoordinatorShard = field(default_factory=GroupCoordinatorShard)
    entries: list[tuple[int, str, object]] = field(default_factory=list)

    def plain(self, written: list[GroupRecord]) -> None:
        """The live shard's records land next and are answered."""
        self.live.mark_durable(written, len(self.entries))
        self.entries += [(len(self.entries), "plain", record) for record in written]

    def transactional(self, written: list[GroupRecord]) -> None:
        assert len(written) == 1
        landed = [(len(self.entries), written[0])]
        self.live.replay_transactional(PRODUCER, landed)
        self.entries.append((landed[0][0], "txn", written[0]))

    def marker(self, committed: bool) -> int:
        """The COMMIT/ABORT marker lands; the live watcher has not read it yet."""
        self.entries.append((len(self.entries), "marker", committed))
        return len(self.entries) - 1

    def load(self) -> tuple[GroupCoordinatorShard, list[str]]:
        """A new owner's load, in log order; what replay refused."""
        loaded, refused = GroupCoordinatorShard(), []
        for offset, kind, payload in self.entries:
            if kind == "plain":
                try:
                    loaded.replay(payload, offset)  # type: ignore[arg-type]
                except ValueError as error:
                    refused.append(str(error))
            elif kind == "txn":
                loaded.replay_transactional(PRODUCER, [(offset, payload)])  # type: ignore[list-item]
            else:
                loaded.complete_transaction(PRODUCER, bool(payload), offset)
        return loaded, refused


def commit(log: Log, partition: int, offset: int) -> None:
    request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=partition, committed_offset=offset)
    log.plain(log.live.commit_offsets(request, NOW, TOPICS).records)


def txn_commit(log: Log, partition: int, offset: int) -> None:
    request = x.TxnOffsetCommitRequest(
        producer=x.TransactionalProducer(
            transactional_id="tx", producer_id=PRODUCER, producer_epoch=0
        ),
        group_id="g",
        member_epoch=-1,
    )
    request.topics.add(name="t").partitions.add(partition=partition, committed_offset=offset)
    log.transactional(log.live.commit_txn_offsets(request, NOW, TOPICS).records)


def pending_of(shard: GroupCoordinatorShard) -> set[tuple[str, int]]:
    return shard.txn_offsets.unstable("g")


def test_a_group_deleted_before_its_commit_marker_is_read_stays_deleted_on_a_load() -> None:
    """g has t-0 committed and t-1 pending in producer 7's transaction, whose COMMIT marker is
    in the log; DeleteGroups comes before the watcher reads it. The deletion also tombstones
    t-1, before the group: a load applies t-1 at the marker, deletes it, then the group."""
    log = Log()
    commit(log, 0, 5)
    txn_commit(log, 1, 42)
    marker = log.marker(committed=True)

    deleted = log.live.delete_groups(["g"])
    assert deleted.response.groups[0].error_code == ErrorCode.NONE
    log.plain(deleted.records)
    loaded, refused = log.load()
    assert refused == [], "the load refused the group's tombstone: the group comes back"
    assert log.live.state.groups == loaded.state.groups == {}

    assert pending_of(log.live) == pending_of(loaded) == set(), "cancelled, not left to the marker"
    assert log.live.complete_transaction(PRODUCER, True, marker) == 0
    assert log.live.state.groups == {}


def test_an_offset_deleted_before_its_commit_marker_is_read_stays_deleted() -> None:
    """t-1 is only pending when OffsetDelete names it, the marker already in the log: the
    answer is success, so the offset must not appear once the marker is read (nor on a load)."""
    log = Log()
    commit(log, 0, 5)
    txn_commit(log, 1, 42)
    marker = log.marker(committed=True)

    deleted = log.live.delete_offsets("g", [("t", 1)])
    assert deleted.response.error_code == ErrorCode.NONE
    assert [p.error_code for p in deleted.response.partitions] == [ErrorCode.NONE]
    log.plain(deleted.records)
    cancelled = pending_of(log.live)
    log.live.complete_transaction(PRODUCER, True, marker)
    assert set(log.live.state.groups["g"].offsets) == {("t", 0)}, "the marker set it again"
    assert cancelled == set(), "cancelled at once: require_stable no longer waits for it"

    loaded, refused = log.load()
    assert refused == []
    assert loaded.state.groups == log.live.state.groups
    assert pending_of(loaded) == set()


def test_a_transactional_batch_answered_after_the_group_was_deleted_stays_deleted() -> None:
    """Producer 7's batch for t-1 (new to g) lands, but its answer is lost and the retry is
    answered (as a duplicate) only after DeleteGroups of g is durable and an expiry has run:
    the batch becomes pending then, at an offset below the group's tombstone. A load sees the
    tombstone after the batch and drops it at the marker; so must the live shard, however long
    the answer took (it forgot when the group was deleted at the next expiry, nothing being
    pending for it, and the marker brought g back with t-1)."""
    log = Log()
    commit(log, 0, 5)
    request = x.TxnOffsetCommitRequest(
        producer=x.TransactionalProducer(
            transactional_id="tx", producer_id=PRODUCER, producer_epoch=0
        ),
        group_id="g",
        member_epoch=-1,
    )
    request.topics.add(name="t").partitions.add(partition=1, committed_offset=42)
    written = log.live.commit_txn_offsets(request, NOW, TOPICS).records
    landed = len(log.entries)
    log.entries.append((landed, "txn", written[0]))  # in the log, its answer lost
    log.live.transactional_write_started("g")

    deleted = log.live.delete_groups(["g"])
    assert deleted.response.groups[0].error_code == ErrorCode.NONE
    log.plain(deleted.records)
    log.plain(log.live.expire(NOW + 1).records)

    log.live.replay_transactional(PRODUCER, [(landed, written[0])])  # the retry's answer
    log.live.transactional_write_ended("g")
    marker = log.marker(committed=True)
    log.live.complete_transaction(PRODUCER, True, marker)
    log.plain(log.live.expire(NOW + 2).records)

    loaded, refused = log.load()
    assert refused == []
    assert loaded.state.groups == {}
    assert log.live.state.groups == {}, "the marker brought the deleted group back"


class AnswerLostOnce:
    """OffsetsLog's produce for one transactional batch: the first attempt lands at `offset`
    but its answer is lost (retriable); the retry is answered as the duplicate it is, once
    `retry` is set."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.attempts = 0
        self.retry = asyncio.Event()

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        self.attempts += 1
        if self.attempts == 1:
            return ProduceResult(ErrorCode.NETWORK_EXCEPTION, "the answer was lost")
        await self.retry.wait()
        return ProduceResult(0, "", self.offset)

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        """The marker watcher's reads: the test resolves the marker itself."""
        return FetchResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not here")


def test_the_runtime_keeps_the_deletion_until_a_batch_in_the_writing_is_pending() -> None:
    """The same, through OffsetsPartition.write_transactional: the group counts as being
    written from the first attempt until the batch is pending, so expiry keeps its deletion."""

    async def scenario() -> None:
        log = Log()
        commit(log, 0, 5)
        offsets_log = AnswerLostOnce(len(log.entries))
        partition = OffsetsPartition(
            CoordinatorAssignment(CONSUMER_OFFSETS_TOPIC, 0, 1, 1, 0, 100),
            coordinator_id=1,
            offsets_log=offsets_log,  # type: ignore[arg-type]
            config=GroupConfig(),
            on_ended=lambda _: None,
        )
        partition.shard = log.live
        partition.writer = RecordWriter(100, 1, max_batch_records=10, max_batch_bytes=1 << 20)
        request = x.TxnOffsetCommitRequest(group_id="g", member_epoch=-1)
        request.topics.add(name="t").partitions.add(partition=1, committed_offset=42)
        written = log.live.commit_txn_offsets(request, NOW, TOPICS).records
        log.entries.append((offsets_log.offset, "txn", written[0]))
        writing = asyncio.ensure_future(partition.write_transactional(PRODUCER, 0, written))
        while offsets_log.attempts < 2:
            await asyncio.sleep(0.01)

        log.plain(log.live.delete_groups(["g"]).records)
        log.plain(log.live.expire(NOW + 1).records)
        offsets_log.retry.set()
        await asyncio.wait_for(writing, 5)
        log.live.complete_transaction(PRODUCER, True, log.marker(committed=True))
        await partition.stop()
        assert log.live.state.groups == log.load()[0].state.groups == {}

    asyncio.run(scenario())
