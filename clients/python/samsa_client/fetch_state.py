"""The consumer's fetch state: a pure core of positions, resets, buffers and fetches in flight.

Theory of operation. For each assigned partition the core keeps a *position* (the next offset
`poll()` returns) and a *fetch offset* (where the next fetch starts: past what is already
buffered), the leader epoch of the last batch handed out (sent with fetches so a leader whose log
diverged from what we read says so, KIP-320), the replica a leader told us to read from (KIP-392:
forgotten once another broker leads, or READ_REPLICA_MAX_AGE_MS after it was named), a paused
flag, and its decoded batches waiting to be handed out. It does no I/O and reads no clock: the
driver (consumer_driver.py) feeds it answers, with `now_ms` where time matters, and does what
its outputs say.

Where each part lives. This module owns the partition table (its records are in
fetch_partitions.py) and `FetchState`, the one object the drivers use: assignment, positions,
pausing, the planning of fetches and the handing out of records. Two parts work on the same
table; their methods are bound as `FetchState`'s own:
- offset_resets.py: resets and their lookups (`request_resets`, `lookups_due`,
  `offsets_to_look_up`, `on_offsets_found`, `on_committed_missing`, `on_lookup_failed`,
  `pop_lookup_error`);
- fetch_answers.py: what a fetch's answer (`on_fetch_answer`), or its failure
  (`on_fetch_failed`), does to each partition.

Outputs:
- `fetches_to_send(leaders, now_ms)`: one FetchRequest per broker, built in that broker's fetch
  session (fetch_sessions.py). Pipelining: every broker leading an assigned partition that has a
  position, no buffered records, no unraised error and is not paused gets a fetch as soon as it
  has none in flight (and is not backing off after a failed one). Except: while a partition of
  a broker waits in the buffer, a fetch that would name none of that broker's partitions (all
  the others are unchanged: their last answer brought nothing) is not sent. It would only
  long-poll idle partitions, for up to fetch.max.wait.ms, and the buffered partition, once
  `poll()` took it, would wait for that answer: a 500 ms stall of a partition with data, seen at
  the end of a topic read across brokers. The broker is fetched from again as `poll()` takes
  the buffer (Kafka's consumer sends that fetch, and stalls). A partition its broker refused
  (a leader that moved, a failed disk: fetch_answers.py) goes to another leader at once, but
  back to the same broker only after retry.backoff.ms.
- `offsets_to_look_up()`: the resets to resolve with ListOffsets (EARLIEST or LATEST), or with
  OffsetFetch (COMMITTED) (offset_resets.py).
- `take(limit)`: at most `limit` records, the partitions in turn; it moves positions. The
  partitions it empties may be fetched again.
- Pending revocation (`mark_pending_revocation`, rebalance.py): from the moment the revocation
  of partitions begins (before the commit that goes first and on_partitions_revoked) until they
  leave, they are neither fetched nor handed out, as Kafka's SubscriptionState marks them
  (KAFKA-14196): a poll() inside the listener would otherwise return records past the offsets
  just committed, which the next owner reads again. seek(), position() and consumed() still
  work on them.
- `auto_committed` (auto_commit_memory.py): what auto-commit last committed of each partition,
  forgotten as the partition leaves the assignment.
- `pop_error()`: the next error `poll()` raises (bad offsets, corrupt batches, failed lookups).
- `on_fetch_answer(...)` -> AnswerEffects: refresh the metadata (a leader moved), and whether
  records `poll()` can take were buffered (fetch_answers.py).

Invariants. An assigned partition has either a position or a reset pending, never both: a seek
cancels the reset, and a reset (offset_resets.py says when one is due, and how stale lookups are
ignored) drops the position. `_drop(tp)` (seek, unassign, resets) forgets the partition's
buffered records and removes it from the fetch in flight, so an answer for the old offset is
ignored too. A partition with an unraised error is not fetched: the error is raised once by
`poll()`, and fetching the partition again finds it again, as before.

Decoding the fetched bytes into records is consumer_records.py's.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from samsa.client.auto_commit_memory import AutoCommitMemory
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_records import ConsumerRecord
from samsa.client.errors import KafkaError
from samsa.client.fetch_answers import (
    FETCH_RETRY_BACKOFF_MS,
    NO_EFFECTS,
    RETRY_AFTER_REFRESH,
    AnswerEffects,
    FetchAnswers,
)
from samsa.client.fetch_partitions import InFlight, Partition, TopicPartition
from samsa.client.fetch_sessions import BrokerFetchSessions
from samsa.client.offset_resets import COMMITTED, EARLIEST, LATEST, NO_RESET, OffsetResets
from samsa.client.topic_identities import TopicIdentities
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2, records_pb2

# What the consumer modules and tests import from here, wherever it lives.
__all__ = [
    "COMMITTED",
    "EARLIEST",
    "FETCH_RETRY_BACKOFF_MS",
    "LATEST",
    "NO_EFFECTS",
    "NO_RESET",
    "READ_REPLICA_MAX_AGE_MS",
    "RETRY_AFTER_REFRESH",
    "AnswerEffects",
    "FetchPlan",
    "FetchState",
    "OffsetAndTimestamp",
    "TopicPartition",
    "isolation_level",
]


# A preferred read replica (KIP-392) is read from for at most this long; then the leader is
# asked again and picks again. Kafka's consumer forgets it after metadata.max.age.ms (this, its
# default): a replica that fell out of the ISR keeps serving up to its own high watermark, which
# may no longer move, and only the leader knows.
READ_REPLICA_MAX_AGE_MS = 300_000
OFFSET_MAX = 2**63 - 1  # an offset is an int64 on the wire


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class FetchPlan(NamedTuple):
    """What `fetches_to_send` asks of the driver."""

    requests: list[tuple[int, broker_pb2.FetchRequest]]  # (node, request), one per node
    metadata_stale: bool  # a fetchable partition has no known leader
    next_due_ms: int | None  # when a broker backing off may be fetched from again


class FetchState:
    """Positions, resets, buffers and fetches in flight of one consumer (see the module doc)."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self._assigned: list[TopicPartition] = []
        self._partitions: dict[TopicPartition, Partition] = {}
        self._errors: dict[TopicPartition, Exception] = {}  # fetch errors poll() must raise
        self.deferred_error: Exception | None = None  # raised by the next poll (take_records)
        self._take_from = 0  # the index in _assigned the next take starts at (take's doc)
        self._revoking: set[TopicPartition] = set()  # pending revocation (module doc)
        self._topic_identities = TopicIdentities()  # topics deleted and created again
        self.auto_committed = AutoCommitMemory()  # the group driver's, kept with the partitions
        self._in_flight: dict[int, InFlight] = {}
        self._backoff_until_ms: dict[int, int] = {}
        # 0 (Kafka's lowest, a batch a fetch: KIP-74) goes out as 1: the broker reads 0 as unset.
        partition_max_bytes = max(config.max_partition_fetch_bytes, 1)
        self._sessions = BrokerFetchSessions(partition_max_bytes=partition_max_bytes)
        self._fetch_fields: dict[str, object] = {
            "max_wait_ms": config.fetch_max_wait_ms,
            "min_bytes": config.fetch_min_bytes,
            "max_bytes": max(config.fetch_max_bytes, 1),
            "rack_id": config.client_rack,
            "isolation_level": isolation_level(config),
        }
        # Resets and lookups (offset_resets.py) and fetch answers (fetch_answers.py) work on
        # these tables. Their methods are this object's, bound here as the accumulator binds
        # its parts': a call costs no extra Python frame (on_fetch_answer is on the hot path).
        self._resets = resets = OffsetResets(config, self._partitions)
        self.default_reset = resets.default_reset
        self.request_resets = resets.request_resets
        self.lookups_due = resets.lookups_due
        self.offsets_to_look_up = resets.offsets_to_look_up
        self.on_offsets_found = resets.on_offsets_found
        self.on_committed_missing = resets.on_committed_missing
        self.on_lookup_failed = resets.on_lookup_failed
        self.pop_lookup_error = resets.pop_lookup_error
        answers = FetchAnswers(
            config,
            partitions=self._partitions,
            errors=self._errors,
            in_flight=self._in_flight,
            backoff_until_ms=self._backoff_until_ms,
            sessions=self._sessions,
            resets=resets,
            drop=self._drop,
        )
        self.on_fetch_answer = answers.on_fetch_answer
        self.on_fetch_failed = answers.on_fetch_failed
        self.on_refused = answers.on_refused

    # --- assignment and positions ---------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions; new ones start per auto.offset.reset (lazily)."""
        assigned = list(partitions)
        keep = set(assigned)
        for tp in [tp for tp in self._partitions if tp not in keep]:
            self._drop(tp)
            del self._partitions[tp]
            self._resets.cancel(tp)
            self.auto_committed.forget((tp,))
        self._assigned = assigned
        self._topic_identities.reassigned(assigned)
        self._revoking &= keep
        initial = COMMITTED if self.config.group_id is not None else self.default_reset()
        for tp in assigned:
            if tp not in self._partitions:
                self._partitions[tp] = Partition()
                self._resets.set_reset(tp, initial, due=False)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assigned)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch `tp` from `offset` on: an int (a numpy integer is one) from 0 to int64's
        largest. Anything else is refused here: no fetch could carry it, and the plan of every
        fetch (all partitions) would fail on it."""
        partition = self._assigned_partition(tp)
        if isinstance(offset, bool) or not hasattr(offset, "__index__"):
            raise TypeError(f"offset must be an int, not {offset!r}")
        offset = operator.index(offset)
        if not 0 <= offset <= OFFSET_MAX:
            raise ValueError(f"offset must be >= 0 and at most {OFFSET_MAX}, not {offset}")
        self._drop(tp)
        self._resets.cancel(tp)
        partition.position = partition.fetch_offset = offset

    def seek_to(self, partitions: Iterable[TopicPartition] | None, spec: int) -> None:
        """seek_to_beginning (EARLIEST) or seek_to_end (LATEST), resolved at the next poll."""
        for tp in self._assigned if partitions is None else list(partitions):
            self._assigned_partition(tp)
            self._drop(tp)
            self._resets.set_reset(tp, spec, due=False)

    def position(self, tp: TopicPartition) -> int | None:
        """The next offset poll() returns for `tp`; None while a reset is pending."""
        return self._assigned_partition(tp).position

    def positions(self) -> dict[TopicPartition, int]:
        """Known positions of every assigned partition."""
        return {
            tp: p.position
            for tp in self._assigned
            if (p := self._partitions[tp]).position is not None
        }

    def consumed(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, int]]:
        """What commit() commits: (position, leader epoch of the last record handed out) of
        these assigned partitions (None: all) that have a position."""
        wanted = self._assigned if partitions is None else partitions
        consumed = {}
        for tp in wanted:
            partition = self._partitions.get(tp)
            if partition is not None and partition.position is not None:
                consumed[tp] = (partition.position, partition.leader_epoch)
        return consumed

    def read_replicas(self) -> dict[TopicPartition, int]:
        return {
            tp: p.read_replica for tp, p in self._partitions.items() if p.read_replica is not None
        }

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these and handing out their records (what is buffered is kept)."""
        for tp in list(partitions):
            self._assigned_partition(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in list(partitions):
            self._assigned_partition(tp).paused = False

    def paused(self) -> list[TopicPartition]:
        return [tp for tp in self._assigned if self._partitions[tp].paused]

    def mark_pending_revocation(self, partitions: Iterable[TopicPartition], pending: bool) -> None:
        """The revocation of these partitions began (True): they are no longer fetched or
        handed out until they leave the assignment; or it was abandoned before it ended (False:
        as before). Partitions not assigned are ignored (they are neither fetched nor taken)."""
        chosen = {tp for tp in partitions if tp in self._partitions}
        if pending:
            self._revoking |= chosen
        else:
            self._revoking -= chosen

    # --- errors ---------------------------------------------------------------------------------

    def pop_error(self) -> Exception | None:
        """The next error poll() must raise (raised once; the partition is fetched again)."""
        if self._resets.lookup_error is not None:
            return self.pop_lookup_error()
        if not self._errors:
            return None
        tp = next(iter(self._errors))
        return self._errors.pop(tp)

    # --- fetching -------------------------------------------------------------------------------

    def fetches_to_send(
        self,
        leaders: Mapping[TopicPartition, int],
        now_ms: int,
        leader_epochs: Mapping[TopicPartition, int] | None = None,
        topic_ids: Mapping[str, bytes] | None = None,
    ) -> FetchPlan:
        """A fetch for every broker with fetchable partitions and none in flight (module doc).
        Each names its partitions' current leader epochs from the metadata (`leader_epochs`,
        KIP-320), so a broker whose leadership is older or newer than the consumer knows
        answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH instead of serving; and their
        topics' ids (`topic_ids`, KIP-516): a topic whose id changed is reset first
        (topic_identities.py), and a broker hosting the old one answers UNKNOWN_TOPIC_ID."""
        if topic_ids is not None:
            for tp in self._topic_identities.recreated(topic_ids, self._assigned):
                self._drop(tp)
                self._resets.set_reset(tp, self.default_reset(), due=True)
        wanted: dict[int, dict[TopicPartition, int]] = {}
        buffered: set[int | None] = set()  # brokers with a partition waiting in the buffer
        stale = False
        refused_until: list[int] = []  # when partitions refused by their leader are due again
        in_flight = self._in_flight
        backoff = self._backoff_until_ms
        errors = self._errors
        revoking = self._revoking
        for tp in self._assigned:
            partition = self._partitions[tp]
            offset = partition.fetch_offset
            if revoking and tp in revoking:
                continue  # neither fetched nor handed out: its buffer must not block either
            if partition.buffers:
                if not partition.paused:  # a paused one keeps its buffer: it must not block
                    replica = partition.read_replica
                    buffered.add(leaders.get(tp) if replica is None else replica)
                continue
            if offset is None or partition.paused or tp in errors:
                continue
            node = partition.read_replica
            if node is not None:
                node = self._read_replica_of(partition, leaders.get(tp), now_ms)
            if node is None:
                node = leaders.get(tp)
                if node is None:
                    stale = True
                    continue
            if node in in_flight or backoff.get(node, 0) > now_ms:
                continue
            if partition.refused_by is not None:
                retry_at = self._retry_at(partition, node, now_ms)
                if retry_at is not None:
                    refused_until.append(retry_at)
                    continue
            wanted.setdefault(node, {})[tp] = offset
        requests = []
        for node, offsets in wanted.items():
            epochs = {tp: self._partitions[tp].leader_epoch for tp in offsets}
            request, parts = self._sessions.request(
                node, offsets, epochs, leader_epochs, topic_ids, **self._fetch_fields
            )
            if node in buffered and not parts.full and not parts.partitions:
                continue  # it would only long-poll idle partitions (module doc)
            in_flight[node] = InFlight(self._sessions.answered_at(node, offsets, parts), parts)
            requests.append((node, request))
        later = [due for due in backoff.values() if due > now_ms] + refused_until
        return FetchPlan(requests, stale, min(later) if later else None)

    def _read_replica_of(self, partition: Partition, leader: int | None, now_ms: int) -> int | None:
        """The partition's preferred read replica, or None once another broker leads (or none
        is known) or READ_REPLICA_MAX_AGE_MS after it was named: then it is forgotten and the
        leader is asked, as Kafka's consumer does (SubscriptionState)."""
        if partition.read_replica_leader == leader:
            until_ms = partition.read_replica_until_ms
            if until_ms is None:
                partition.read_replica_until_ms = now_ms + READ_REPLICA_MAX_AGE_MS
                return partition.read_replica
            if now_ms < until_ms:
                return partition.read_replica
        partition.read_replica = None
        return None

    def _retry_at(self, partition: Partition, node: int, now_ms: int) -> int | None:
        """A partition its broker refused (fetch_answers.py: a leader that moved, a failed
        disk): when it may be asked of `node` again, None when now. Another leader is asked at
        once; the same one after retry.backoff.ms, not as soon as its refusal came back (a hot
        loop of fetches and metadata refreshes while an election goes on)."""
        if partition.refused_by != node:
            partition.refused_by = None
            return None
        if partition.retry_at_ms is None:
            partition.retry_at_ms = now_ms + self.config.retry_backoff_ms
        if partition.retry_at_ms > now_ms:
            return partition.retry_at_ms
        partition.refused_by = None
        return None

    # --- handing out ----------------------------------------------------------------------------

    def take(self, limit: int) -> list[ConsumerRecord]:
        """At most `limit` buffered records (none of paused partitions or of those pending
        revocation), partitions in turn: from where the last take that reached its limit
        stopped, in assignment order, so a partition refilled as fast as it is emptied does not
        keep the others' records waiting."""
        taken: list[ConsumerRecord] = []
        partitions = self._partitions
        assigned = self._assigned
        count = len(assigned)
        start = self._take_from % count if count else 0
        revoking = self._revoking
        for turn in range(count):
            index = start + turn
            tp = assigned[index % count]
            partition = partitions[tp]
            buffers = partition.buffers
            if not buffers or partition.paused or (revoking and tp in revoking):
                continue
            while buffers and len(taken) < limit:
                head = buffers[0]
                end = min(len(head.records), head.start + limit - len(taken))
                chunk = head.records[head.start : end]
                taken += chunk
                head.start = end
                last = chunk[-1]
                partition.position = last.offset + 1
                # The epoch of the record before the position: what a commit names (KIP-320).
                partition.leader_epoch = last.leader_epoch
                if end >= len(head.records):
                    buffers.popleft()
                    partition.position = max(partition.position, head.end_offset)
                    partition.leader_epoch = head.leader_epoch  # past hidden batches too
            if len(taken) >= limit:
                self._take_from = index if buffers else index + 1
                break
        return taken

    def close_requests(self) -> dict[int, broker_pb2.FetchRequest]:
        """Fetches that close every open fetch session, by node."""
        return self._sessions.close_requests()

    # --- internals ------------------------------------------------------------------------------

    def _assigned_partition(self, tp: TopicPartition) -> Partition:
        partition = self._partitions.get(tp)
        if partition is None:
            raise KafkaError(
                f"{tp[0]}-{tp[1]} is not assigned to this consumer", ErrorCode.INVALID_REQUEST
            )
        return partition

    def _drop(self, tp: TopicPartition) -> None:
        """Forget the position, buffered records, error and in-flight fetch offset of `tp`."""
        partition = self._partitions[tp]
        partition.position = partition.fetch_offset = None
        partition.leader_epoch = -1
        partition.read_replica = None
        partition.buffers.clear()
        self._errors.pop(tp, None)
        for in_flight in self._in_flight.values():
            in_flight.offsets.pop(tp, None)
        self._sessions.refetch(tp)  # an answer in flight is dropped: named in the next fetch


def isolation_level(config: ConsumerConfig) -> int:
    """The IsolationLevel every Fetch and ListOffsets of this consumer carries."""
    if config.isolation_level == "read_committed":
        return records_pb2.ISOLATION_LEVEL_READ_COMMITTED
    return records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
