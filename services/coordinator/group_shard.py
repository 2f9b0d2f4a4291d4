"""The group coordinator's pure core for one partition of `__consumer_offsets`: one façade over
the handlers, plus the timers (session and revocation deadlines, offset retention).

Theory of operation. `GroupCoordinatorShard` owns a `GroupShard` (group_model) and the group
settings. The runtime (not here: it does the I/O) loads the partition by calling `replay` for each
record in log order, then `start_timers(now_ms)`; from then on it calls the handlers, appends the
records of each `GroupResult` to the log, and once they are durable tells `mark_durable` where
they landed and sends the response; it calls `expire(now_ms)` when `next_deadline_ms()` has
passed. Every mutating handler has already applied its records through replay (group_writer),
so the shard equals the replay of every record it emitted — which is what a coordinator taking
the partition over rebuilds.

No I/O, no clock (time comes in as `now_ms`), no randomness. `topics` is the metadata image's view
of non-internal topics: name -> partition count.

Timers are in memory only: a loaded member gets a fresh session (and, in UNREVOKED_PARTITIONS, a
fresh revocation deadline), as in Kafka, so a failover never expires a member that was live a
moment before. An expired member is removed exactly like a leave with epoch -1 (a static member
at -2 too: its partitions stop waiting for it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Set

from samsa.services.coordinator import (
    group_admin,
    group_heartbeat,
    group_offsets,
    group_txn_offsets,
)
from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.assignors import ASSIGNORS
from samsa.services.coordinator.group_assignment import UNJUDGED, MemberAccess
from samsa.services.coordinator.group_model import (
    UNREVOKED_PARTITIONS,
    GroupConfig,
    GroupShard,
)
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_replay import mark_durable, replay
from samsa.services.coordinator.group_writer import (
    GroupResult,
    RecordCollector,
    delete_group,
    remove_member,
)
from samsa.services.runtime.caller import Visible, everything
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

# The most records one `expire` writes (a few more to finish a member's removal): ~600 bytes at
# most each (a 255-character group id and a 249-character topic), they fit one batch.
EXPIRE_RECORDS_MAX = 1_000


class GroupCoordinatorShard:
    """The groups of one partition of `__consumer_offsets`."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        self.config = config or GroupConfig()
        assert self.config.default_assignor in ASSIGNORS, self.config.default_assignor
        self.state = GroupShard()
        self.txn_offsets = group_txn_offsets.PendingTxnOffsets()
        # Group id -> transactional batches of its offsets being written: landed or not, their
        # records are not pending yet (the runtime's `transactional_write_started`).
        self.txn_writes: Counter[str] = Counter()

    # --- loading ----------------------------------------------------------------------------

    def replay(self, record: GroupRecord, offset: int) -> None:
        """Apply one record read from the log at `offset` (loading)."""
        replay(self.state, record, offset)
        self._cancel_pending([record])

    def mark_durable(self, records: list[GroupRecord], first_offset: int) -> None:
        """The records of a GroupResult (or of `expire`) are durable in the log, the first at
        `first_offset`: the runtime calls this once their write is acknowledged."""
        mark_durable(self.state, records, first_offset)

    def replay_transactional(
        self, producer_id: int, written: list[tuple[int, GroupRecord]]
    ) -> None:
        """Records of a producer's transactional batch, each with its log offset (read from the
        log, or just written): pending until its marker."""
        self.txn_offsets.add(producer_id, written)

    def transactional_write_started(self, group_id: str) -> None:
        """The runtime sends a transactional batch of the group's offsets: it may land below a
        deletion of the group written meanwhile, and be pending only once answered."""
        self.txn_writes[group_id] += 1

    def transactional_write_ended(self, group_id: str) -> None:
        """That batch is pending now (`replay_transactional`), or was given up."""
        self.txn_writes[group_id] -= 1
        if self.txn_writes[group_id] <= 0:
            del self.txn_writes[group_id]

    def complete_transaction(self, producer_id: int, committed: bool, marker_offset: int) -> int:
        """A producer's COMMIT (apply its pending offsets) or ABORT (drop them) marker at
        `marker_offset`: it ends the records written before it."""
        return self.txn_offsets.complete(self.state, producer_id, committed, marker_offset)

    def start_timers(self, now_ms: int) -> None:
        """After a load: every member gets a fresh session, and a fresh revocation deadline when
        it is revoking; an empty group's retention goes on from when it was left empty (its
        group_metadata record), or starts again when its log does not say (never expire
        early)."""
        for group in self.state.groups.values():
            if not group.members and group.empty_since_ms is None:
                group.empty_since_ms = now_ms
            for member in group.members.values():
                member.session_deadline_ms = now_ms + self.config.session_timeout_ms
                member.revocation_deadline_ms = None
                if member.state == UNREVOKED_PARTITIONS:
                    member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms

    # --- the protocol -----------------------------------------------------------------------

    def heartbeat(
        self,
        request: c.ConsumerGroupHeartbeatRequest,
        now_ms: int,
        topics: Mapping[str, int],
        access: MemberAccess = UNJUDGED,
    ) -> GroupResult[c.ConsumerGroupHeartbeatResponse]:
        """`access`: who heartbeats, and how each member's DESCRIBE is judged (its regex is
        filtered by it: group_assignment)."""
        return group_heartbeat.heartbeat(self.state, self.config, request, now_ms, topics, access)

    def commit_offsets(
        self,
        request: c.OffsetCommitRequest,
        now_ms: int,
        topics: Mapping[str, int],
        topic_ids: Mapping[str, bytes] | None = None,
    ) -> GroupResult[c.OffsetCommitResponse]:
        return group_offsets.commit_offsets(self.state, request, now_ms, topics, topic_ids)

    def fetch_offsets(
        self, request: c.OffsetFetchRequest, visible: Visible = everything
    ) -> c.OffsetFetchResponse:
        response = group_offsets.fetch_offsets(self.state, request, visible)
        if request.require_stable and not response.error_code:
            unstable = self.txn_offsets.unstable(request.group_id)
            group_txn_offsets.mark_unstable(response, unstable)
        return response

    def commit_txn_offsets(
        self,
        request: x.TxnOffsetCommitRequest,
        now_ms: int,
        topics: Mapping[str, int],
        topic_ids: Mapping[str, bytes] | None = None,
    ) -> GroupResult[x.TxnOffsetCommitResponse]:
        """TxnOffsetCommit: the records to write as the producer's transactional batch; the
        runtime passes them to `replay_transactional` once durable."""
        return group_txn_offsets.commit_txn_offsets(self.state, request, now_ms, topics, topic_ids)

    def lag_inputs(
        self, group_id: str, visible: Visible = everything
    ) -> list[tuple[str, int, int, str]] | None:
        return group_offsets.lag_inputs(self.state, group_id, visible)

    # --- administration ---------------------------------------------------------------------

    def list_groups(
        self, states_filter: Iterable[int] = (), visible: Visible = everything
    ) -> c.ListGroupsResponse:
        return group_admin.list_groups(self.state, states_filter, visible)

    def describe_groups(self, group_ids: Iterable[str]) -> c.DescribeGroupsResponse:
        return group_admin.describe_groups(self.state, group_ids, self.config)

    def delete_groups(self, group_ids: Iterable[str]) -> GroupResult[c.DeleteGroupsResponse]:
        result = group_admin.delete_groups(self.state, group_ids, self.txn_offsets.unstable)
        self._cancel_pending(result.records)
        return result

    def delete_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> GroupResult[c.OffsetDeleteResponse]:
        pending = self.txn_offsets.unstable(group_id)
        result = group_admin.delete_offsets(self.state, group_id, partitions, pending)
        self._cancel_pending(result.records)
        return result

    def delete_topics(self, topics: Set[str]) -> GroupResult[None]:
        """The topics were deleted (or created again under their name): every group's offsets
        of them go, pending ones too (group_admin.delete_topic_offsets)."""
        return self._delete_offsets_where(lambda tp, _: tp[0] in topics)

    def delete_offsets_of_other_topics(self, topic_ids: Mapping[str, bytes]) -> GroupResult[None]:
        """Every group's offsets, pending ones too, recorded under a topic id (KIP-516) that
        `topic_ids` (the metadata's, name -> id) does not show for their topic: the topic was
        deleted, or created again under its name, while no coordinator had them loaded. Offsets
        recorded without an id (written before ids were) are kept."""
        return self._delete_offsets_where(
            lambda tp, value: bool(value.topic_id) and topic_ids.get(tp[0]) != value.topic_id
        )

    def _delete_offsets_where(self, doomed: group_admin.OffsetTest) -> GroupResult[None]:
        pending: dict[str, list[group_admin.PendingOffset]] = {}
        for written in self.txn_offsets.by_producer.values():
            for _, (key, value) in written:
                commit = key.offset_commit
                tp = (commit.topic, commit.partition)
                pending.setdefault(commit.group_id, []).append((tp, value.offset_commit))
        result = group_admin.delete_topic_offsets(self.state, doomed, pending)
        self._cancel_pending(result.records)
        return result

    def _cancel_pending(self, written: list[GroupRecord]) -> None:
        """An offset tombstone cancels the offsets pending for its partition (written before
        it), live as on a load: the marker of their transaction, even one already in the log,
        leaves the partition deleted (group_admin.py)."""
        for key, value in written:
            if value is None and records.key_kind(key) == "offset_commit":
                commit = key.offset_commit
                self.txn_offsets.cancel(commit.group_id, (commit.topic, commit.partition))

    # --- timers -----------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """The earliest session or revocation deadline, or None without members. Offset
        retention is not a deadline: the runtime also calls `expire` every few minutes."""
        deadlines = [
            deadline
            for group in self.state.groups.values()
            for member in group.members.values()
            for deadline in (member.session_deadline_ms, member.revocation_deadline_ms)
            if deadline is not None
        ]
        return min(deadlines, default=None)

    def expire(self, now_ms: int) -> GroupResult[None]:
        """Remove members whose session or revocation deadline has come, tombstone offsets past
        retention, and delete groups left with neither. Offsets an open transaction committed
        stay, with their group, as in Kafka: its COMMIT marker must find them. At most about
        EXPIRE_RECORDS_MAX records a call, so that they go as one batch (a member's removal is
        not cut in two by a crash); the rest at the next call."""
        writer = RecordCollector(self.state)
        for group_id in sorted(self.state.groups):
            if len(writer.records) >= EXPIRE_RECORDS_MAX:
                break  # the rest at the next call
            group = self.state.groups[group_id]
            expired = sorted(
                member.member_id
                for member in group.members.values()
                if member.session_deadline_ms <= now_ms
                or (
                    member.revocation_deadline_ms is not None
                    and member.revocation_deadline_ms <= now_ms
                )
            )
            expired = expired[: max(0, EXPIRE_RECORDS_MAX - len(writer.records)) // 4 + 1]
            for member_id in expired:
                remove_member(writer, group, member_id, now_ms)
            pending = self.txn_offsets.unstable(group_id)  # a marker will apply them
            for topic_partition in list(group_offsets.expired_offsets(group, now_ms, self.config)):
                if len(writer.records) >= EXPIRE_RECORDS_MAX:
                    break
                if topic_partition not in pending:
                    writer.write(records.offset_commit(group_id, *topic_partition, None))
            if not group.members and not group.offsets and not pending:
                delete_group(writer, group)
        self._forget_deletions()
        return writer.result(None)

    def _forget_deletions(self) -> None:
        """A deleted group's position matters only to offsets an open transaction wrote before
        it (group_model.GroupShard.deleted_positions): drop it once none is pending, nor being
        written (a batch that landed before the deletion, its answer lost, is answered by the
        retry only after it: kept, the marker drops it as a load does; forgotten, the marker
        brought the group back)."""
        pending_groups = {
            key.offset_commit.group_id
            for written in self.txn_offsets.by_producer.values()
            for _, (key, _) in written
        }
        pending_groups.update(self.txn_writes)
        state = self.state
        for group_id in list(state.deleted_positions):
            if group_id not in pending_groups and group_id not in state.deletions_in_flight:
                del state.deleted_positions[group_id]
