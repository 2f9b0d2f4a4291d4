"""Offsets committed inside a transaction (TxnOffsetCommit; Kafka's KIP-98 and KIP-447).

Theory of operation. A transactional producer that consumed from a group commits the group's
offsets in its transaction: the group's coordinator checks the request like an OffsetCommit
(member id and epoch, KIP-447, so a zombie cannot commit) and writes the same offset-commit
records, but as a *transactional* batch of the producer's id and epoch, and keeps them *pending*
instead of applying them. The transaction coordinator later writes a COMMIT or ABORT marker of
that producer into the same partition of `__consumer_offsets` (the group's partition joined the
transaction through AddOffsetsToTxn); at the marker the pending records are applied (commit),
exactly as replay would apply them, or dropped (abort). Loading does the same in log order: a
transactional batch's records become pending, its producer's marker resolves them.

While a partition's offsets are pending, OffsetFetch with require_stable answers it
UNSTABLE_OFFSET_COMMIT (retriable): a consumer that takes the partition over waits for the
transaction to end rather than re-reading what it may commit.

Order, as Kafka's: a pending offset is applied at its COMMIT marker only if its record is newer,
by log offset, than the record that last set its partition (a plain commit, a deletion, another
transaction's offset). A partition remembers the log offset of the record that set it
(`ConsumerGroup.offset_positions`). A handler applies a plain commit before it is durable, so its
position is IN_FLIGHT (newer than anything in the log) until the runtime reports where it landed
(`group_replay.mark_durable`). The plain and the transactional writes of a partition travel
separately (the coordinator's own producer, the client's producer id), so only log offsets order
them: a plain commit applied while a TxnOffsetCommit is being written may land before or after
it, and both a live coordinator and a load decide by where it landed. One case needs the
runtime's help: a plain commit still in flight when a marker is resolved may have landed before
the transaction's records. So before it resolves markers, the runtime waits until every write
queued so far is durable (offsets_partition.py); what is in flight after that was queued after
the marker was read, lands after it, and rightly wins. A load decides the same way, and a
compacted log (the cleaner keeps the newest record of each key by log offset) as the whole one.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.common.errors import ErrorCode
from samsa.services.coordinator import group_offsets
from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.group_model import GroupShard, TopicPartition
from samsa.services.coordinator.group_records import GroupRecord, key_kind
from samsa.services.coordinator.group_replay import replay
from samsa.services.coordinator.group_writer import GroupResult
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g
from samsa.v1 import transactions_pb2 as x


class PendingTxnOffsets:
    """The offset-commit records each producer id wrote in its open transaction, each with its
    log offset, in log order."""

    def __init__(self) -> None:
        self.by_producer: dict[int, list[tuple[int, GroupRecord]]] = {}

    def add(self, producer_id: int, written: list[tuple[int, GroupRecord]]) -> None:
        """Records of `producer_id`'s transaction, each with its offset, are durable in the log
        (or were replayed from there)."""
        for _, (key, _) in written:
            assert key_kind(key) == "offset_commit", key_kind(key)
        self.by_producer.setdefault(producer_id, []).extend(written)

    def complete(
        self, state: GroupShard, producer_id: int, committed: bool, marker_offset: int
    ) -> int:
        """The producer's marker at `marker_offset`: apply (commit) or drop (abort) its pending
        records written before it (a later transaction's may already be pending, when the
        marker is seen late). Returns how many were applied."""
        pending = self.by_producer.pop(producer_id, [])
        ended = [entry for entry in pending if entry[0] < marker_offset]
        later = [entry for entry in pending if entry[0] >= marker_offset]
        if later:
            self.by_producer[producer_id] = later
        if not committed:
            return 0
        applied = 0
        for offset, record in ended:
            commit = record[0].offset_commit
            topic_partition = (commit.topic, commit.partition)
            if state.offset_position(commit.group_id, topic_partition) > offset:
                continue  # a newer record of the partition set it (or is in flight)
            replay(state, record, offset)
            applied += 1
        return applied

    def cancel(self, group_id: str, topic_partition: TopicPartition) -> None:
        """A tombstone of the partition's offset, newer than every pending record of it (they
        are durable before it is written, or read before it): no marker applies them any more,
        as Kafka's replay of an offset tombstone cancels the pending transactional ones."""
        cancelled = (group_id, *topic_partition)
        for producer_id, pending in list(self.by_producer.items()):
            kept = [entry for entry in pending if _identity(entry[1]) != cancelled]
            if kept:
                self.by_producer[producer_id] = kept
            else:
                del self.by_producer[producer_id]  # nothing pending: the watcher may stop

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with offsets pending in an open transaction."""
        found = set()
        for pending in self.by_producer.values():
            for _, (key, _) in pending:
                commit = key.offset_commit
                if commit.group_id == group_id:
                    found.add((commit.topic, commit.partition))
        return found

    def __bool__(self) -> bool:
        return bool(self.by_producer)


def _identity(record: GroupRecord) -> tuple[str, str, int]:
    commit = record[0].offset_commit
    return commit.group_id, commit.topic, commit.partition


def commit_txn_offsets(
    shard: GroupShard,
    request: x.TxnOffsetCommitRequest,
    now_ms: int,
    topics: Mapping[str, int],
    topic_ids: Mapping[str, bytes] | None = None,
) -> GroupResult[x.TxnOffsetCommitResponse]:
    """The records to write as the producer's transactional batch (NOT applied: they become
    pending once durable) and the answer. Checked like OffsetCommit, and recorded with their
    topic's id as OffsetCommit's are (group_offsets.commit_offsets)."""
    group = shard.groups.get(request.group_id)
    group_error = group_offsets.group_error(group, request)
    written: list[GroupRecord] = []
    response = x.TxnOffsetCommitResponse()
    for topic_request in request.topics:
        for partition in topic_request.partitions:
            code, message = group_error or group_offsets.partition_error(
                topic_request.name, partition, topics
            )
            response.results.add(
                topic=topic_request.name,
                partition=partition.partition,
                error_code=int(code),  # type: ignore[arg-type]
                error_message=message,
            )
            if code != ErrorCode.NONE:
                continue
            value = g.OffsetCommitValue(
                committed_offset=partition.committed_offset,
                committed_leader_epoch=group_offsets.committed_epoch_of(partition),
                metadata=partition.metadata,
                commit_timestamp_ms=now_ms,
                topic_id=(topic_ids or {}).get(topic_request.name, b""),
            )
            written.append(
                records.offset_commit(
                    request.group_id, topic_request.name, partition.partition, value
                )
            )
    return GroupResult(written, response)


def mark_unstable(response: c.OffsetFetchResponse, unstable: set[TopicPartition]) -> None:
    """require_stable: each answered partition with pending offsets gets UNSTABLE_OFFSET_COMMIT."""
    for topic in response.topics:
        for partition in topic.partitions:
            if (topic.name, partition.partition) in unstable:
                partition.error_code = ErrorCode.UNSTABLE_OFFSET_COMMIT  # type: ignore[assignment]
                partition.error_message = (
                    "an open transaction holds offsets for this partition: retry once it ends"
                )
