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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
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
