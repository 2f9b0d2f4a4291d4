"""The consumer's fetch state: a pure core of positions, resets, buffers and fetches in flight.

Theory of operation. For each assigned partition the core keeps a *position* (the next offset
`poll()` returns) and a *fetch offset* (where the next fetch starts: past what is already
buffered), the leader epoch of the last batch handed out (sent with fetches so a leader whose log
diverged from what we read says so, KIP-320), the replica a leader told us to read from (KIP-392),
a paused flag, and its decoded batches waiting to be handed out. It does no I/O and reads no
clock: the driver (consumer_driver.py) feeds it answers, with `now_ms` where time matters, and
does what its outputs say.

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
  the buffer (Kafka's consumer sends that fetch, and stalls).
- `offsets_to_look_up()`: the resets to resolve with ListOffsets (EARLIEST or LATEST).
- `take(limit)`: at most `limit` records, in assignment order; it moves positions. The
  partitions it empties may be fetched again.
- `pop_error()`: the next error `poll()` raises (bad offsets, corrupt batches, failed lookups).
- `on_fetch_answer(...)` -> AnswerEffects: refresh the metadata (a leader moved), and whether
  records `poll()` can take were buffered (then the driver fetches again only once `poll()` took
  them, as the consumer always did; otherwise at once).

Invariants. An assigned partition has either a position or a reset pending, never both. With a
`group.id`, a newly assigned partition starts at the group's committed offset: its reset is
COMMITTED, which the driver resolves with OffsetFetch at the coordinator rather than ListOffsets;
a partition without one falls back to `auto.offset.reset` (`on_committed_missing`). A reset
set by the application (assign, seek_to_beginning/end) is *due* only once `request_resets()` is
called, from `poll()` or `position()` (Kafka evaluates them lazily); one set by a fetch answer
(out of range, or a truncation with no end offset) is due at once. Every reset and lookup carries a
token, so an answer for a reset that was replaced since is ignored. `_drop(tp)` (seek, unassign,
resets) forgets the partition's buffered records and removes it from the fetch in flight, so an
answer for the old offset is ignored too. A partition with an unraised error is not fetched: the
error is raised once by `poll()`, and fetching the partition again finds it again, as before.

Decoding the fetched bytes into records is consumer_records.py's.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_records import ConsumerRecord, decode_records
from samsa.client.errors import KafkaError
from samsa.client.fetch_sessions import BrokerFetchSessions
from samsa.common.errors import CorruptRecordError, ErrorCode, OffsetOutOfRangeError
from samsa.common.fetch_session_client import FetchParts
from samsa.v1 import broker_pb2, records_pb2

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

EARLIEST = broker_pb2.OFFSET_SPEC_EARLIEST
LATEST = broker_pb2.OFFSET_SPEC_LATEST
NO_RESET = -1  # auto.offset.reset=none: a partition without a position is an error
COMMITTED = -2  # the group's committed offset (OffsetFetch), else auto.offset.reset

# After a fetch from a broker failed, that broker is not fetched from again for this long (the
# consumer used to sleep this long in poll()).
FETCH_RETRY_BACKOFF_MS = 50

# Fetch errors after which the partition is fetched again once the metadata is refreshed.
RETRY_AFTER_REFRESH = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class FetchPlan(NamedTuple):
    """What `fetches_to_send` asks of the driver."""

    requests: list[tuple[int, broker_pb2.FetchRequest]]  # (node, request), one per node
    metadata_stale: bool  # a fetchable partition has no known leader
    next_due_ms: int | None  # when a broker backing off may be fetched from again


class AnswerEffects(NamedTuple):
    """What `on_fetch_answer` asks of the driver."""

    metadata_stale: bool  # a leader moved: refresh the metadata
    records_ready: bool  # records poll() can take were buffered: fetch again after it took them


NO_EFFECTS = AnswerEffects(False, False)


class _Buffered:
    """Decoded records of one partition waiting to be handed out."""

    __slots__ = ("end_offset", "leader_epoch", "records", "start")

    def __init__(self, records: list[ConsumerRecord], leader_epoch: int, end_offset: int) -> None:
        self.records = records
        self.start = 0
        self.leader_epoch = leader_epoch  # of the last batch these records came from
        # The position once all are handed out: past any hidden batches (markers, aborted
        # records) fetched after the last of them.
        self.end_offset = end_offset


class _Partition:
    """One assigned partition. `position`/`fetch_offset` are None while a reset is pending."""

    __slots__ = ("buffers", "fetch_offset", "leader_epoch", "paused", "position", "read_replica")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.leader_epoch = -1  # of the last batch handed out; -1: none yet
        self.read_replica: int | None = None  # the replica the leader told us to read from
        self.paused = False
        self.buffers: deque[_Buffered] = deque()


class _Reset:
    __slots__ = ("due", "in_flight", "spec", "token")

    def __init__(self, spec: int, token: int, due: bool) -> None:
        self.spec = spec  # EARLIEST, LATEST, COMMITTED or NO_RESET
        self.token = token
        self.due = due  # may be looked up now
        self.in_flight = False


class _InFlight(NamedTuple):
    offsets: dict[TopicPartition, int]  # the fetch offset asked per partition (dropped: gone)
    parts: FetchParts


class FetchState:
    """Positions, resets, buffers and fetches in flight of one consumer (see the module doc)."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self._assigned: list[TopicPartition] = []
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._resets: dict[TopicPartition, _Reset] = {}
        self._next_token = 1
        self._errors: dict[TopicPartition, Exception] = {}  # fetch errors poll() must raise
        self._lookup_error: Exception | None = None
        self._in_flight: dict[int, _InFlight] = {}
        self._backoff_until_ms: dict[int, int] = {}
        self._sessions = BrokerFetchSessions(partition_max_bytes=config.max_partition_fetch_bytes)
        self._fetch_fields: dict[str, object] = {
            "max_wait_ms": config.fetch_max_wait_ms,
            "min_bytes": config.fetch_min_bytes,
            "max_bytes": config.fetch_max_bytes,
            "rack_id": config.client_rack,
            "isolation_level": isolation_level(config),
        }

    # --- assignment, positions and resets --------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions; new ones start per auto.offset.reset (lazily)."""
        assigned = list(partitions)
        keep = set(assigned)
        for tp in [tp for tp in self._partitions if tp not in keep]:
            self._drop(tp)
            del self._partitions[tp]
            self._resets.pop(tp, None)
        self._assigned = assigned
        initial = COMMITTED if self.config.group_id is not None else self.default_reset()
        for tp in assigned:
            if tp not in self._partitions:
                self._partitions[tp] = _Partition()
                self._set_reset(tp, initial, due=False)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assigned)

    def default_reset(self) -> int:
        policy = self.config.auto_offset_reset
        if policy == "earliest":
            return EARLIEST
        if policy == "latest":
            return LATEST
        return NO_RESET

    def seek(self, tp: TopicPartition, offset: int) -> None:
        partition = self._assigned_partition(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._drop(tp)
        self._resets.pop(tp, None)
        partition.position = partition.fetch_offset = offset

    def seek_to(self, partitions: Iterable[TopicPartition] | None, spec: int) -> None:
        """seek_to_beginning (EARLIEST) or seek_to_end (LATEST), resolved at the next poll."""
        for tp in self._assigned if partitions is None else list(partitions):
            self._assigned_partition(tp)
            self._drop(tp)
            self._set_reset(tp, spec, due=False)

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

    def request_resets(self) -> bool:
        """poll() or position() needs positions: every pending reset is due now. Raises when a
        partition has none to reset to (auto.offset.reset=none). True: lookups became due."""
        undefined = [tp for tp, reset in self._resets.items() if reset.spec == NO_RESET]
        if undefined:
            committed = " and no committed offset" if self.config.group_id is not None else ""
            raise OffsetOutOfRangeError(
                f"no position for {undefined}{committed} and auto.offset.reset=none: seek() first"
            )
        newly_due = False
        for reset in self._resets.values():
            newly_due = newly_due or not reset.due
            reset.due = True
        return newly_due

    def lookups_due(self) -> bool:
        return any(reset.due and not reset.in_flight for reset in self._resets.values())

    def offsets_to_look_up(self) -> dict[TopicPartition, tuple[int, int]]:
        """Due resets not yet being looked up: tp -> (OFFSET_SPEC, token); now in flight."""
        lookups = {}
        for tp, reset in self._resets.items():
            if reset.due and not reset.in_flight:
                reset.in_flight = True
                lookups[tp] = (reset.spec, reset.token)
        return lookups

    def on_offsets_found(self, found: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """ListOffsets answered: tp -> (token, offset). Resets replaced since are left alone."""
        for tp, (token, offset) in found.items():
            reset = self._resets.get(tp)
            if reset is None or reset.token != token:
                continue
            del self._resets[tp]
            partition = self._partitions[tp]
            partition.position = partition.fetch_offset = offset

    def on_committed_missing(self, tokens: Mapping[TopicPartition, int]) -> None:
        """The group has no committed offset for these (tp -> token): start per
        auto.offset.reset, looked up at once (with `none`, the next poll raises)."""
        for tp, token in tokens.items():
            reset = self._resets.get(tp)
            if reset is not None and reset.token == token:
                self._set_reset(tp, self.default_reset(), due=True)

    def on_lookup_failed(self, tokens: Mapping[TopicPartition, int], error: Exception) -> None:
        """The lookup gave up (`error` is raised by the next poll or position); the resets stay
        and are due again at the next poll or position."""
        for tp, token in tokens.items():
            reset = self._resets.get(tp)
            if reset is not None and reset.token == token:
                reset.in_flight = reset.due = False
        self._lookup_error = error

    def pop_lookup_error(self) -> Exception | None:
        error, self._lookup_error = self._lookup_error, None
        return error

    def pop_error(self) -> Exception | None:
        """The next error poll() must raise (raised once; the partition is fetched again)."""
        if self._lookup_error is not None:
            return self.pop_lookup_error()
        if not self._errors:
            return None
        tp = next(iter(self._errors))
        return self._errors.pop(tp)

    # --- fetching -------------------------------------------------------------------------------

    def fetches_to_send(self, leaders: Mapping[TopicPartition, int], now_ms: int) -> FetchPlan:
        """A fetch for every broker with fetchable partitions and none in flight (module doc)."""
        wanted: dict[int, dict[TopicPartition, int]] = {}
        buffered: set[int | None] = set()  # brokers with a partition waiting in the buffer
        stale = False
        in_flight = self._in_flight
        backoff = self._backoff_until_ms
        errors = self._errors
        for tp in self._assigned:
            partition = self._partitions[tp]
            offset = partition.fetch_offset
            if partition.buffers:
                if not partition.paused:  # a paused one keeps its buffer: it must not block
                    replica = partition.read_replica
                    buffered.add(leaders.get(tp) if replica is None else replica)
                continue
            if offset is None or partition.paused or tp in errors:
                continue
            node = partition.read_replica
            if node is None:
                node = leaders.get(tp)
                if node is None:
                    stale = True
                    continue
            if node in in_flight or backoff.get(node, 0) > now_ms:
                continue
            wanted.setdefault(node, {})[tp] = offset
        requests = []
        for node, offsets in wanted.items():
            epochs = {tp: self._partitions[tp].leader_epoch for tp in offsets}
            request, parts = self._sessions.request(node, offsets, epochs, **self._fetch_fields)
            if node in buffered and not parts.full and not parts.partitions:
                continue  # it would only long-poll idle partitions (module doc)
            in_flight[node] = _InFlight(offsets, parts)
            requests.append((node, request))
        later = [due for due in backoff.values() if due > now_ms]
        return FetchPlan(requests, stale, min(later) if later else None)

    def on_fetch_failed(self, node: int, now_ms: int) -> None:
        """The fetch to `node` failed or could not be sent: start its session over, back off,
        and read from leaders rather than from `node` as a preferred read replica."""
        self._in_flight.pop(node, None)
        self._sessions.on_failure(node)
        self._backoff_until_ms[node] = now_ms + FETCH_RETRY_BACKOFF_MS
        for partition in self._partitions.values():
            if partition.read_replica == node:
                partition.read_replica = None

    def on_fetch_answer(self, node: int, response: broker_pb2.FetchResponse) -> AnswerEffects:
        """Apply a fetch answer. When it buffered records poll() can take, the next fetch to
        `node` waits until poll() took them (as it always did): sent now, a long poll for the
        partitions that had nothing would hold the node's one fetch slot meanwhile."""
        in_flight = self._in_flight.pop(node, None)
        if in_flight is None:
            return NO_EFFECTS
        self._backoff_until_ms.pop(node, None)
        offsets = in_flight.offsets
        if not self._sessions.on_answer(node, in_flight.parts, response):
            log.info("fetch session with broker %d: %s", node, response.error_message)
            return NO_EFFECTS
        stale = False
        ready = False
        for topic in response.topics:
            for result in topic.partitions:
                tp = (topic.name, result.partition)
                asked = offsets.get(tp)
                partition = self._partitions.get(tp)
                if asked is None or partition is None or partition.fetch_offset != asked:
                    continue  # sought or unassigned since the fetch was sent
                if result.error_code != ErrorCode.NONE:
                    stale = self._on_partition_error(tp, partition, result) or stale
                elif result.HasField("diverging_epoch"):
                    self._on_truncation(tp, partition, result.diverging_epoch)
                elif result.HasField("preferred_read_replica"):
                    partition.read_replica = result.preferred_read_replica
                elif self._on_records(tp, partition, result, asked):
                    ready = ready or not partition.paused
        return AnswerEffects(stale, ready)

    def _on_records(
        self,
        tp: TopicPartition,
        partition: _Partition,
        result: broker_pb2.FetchResponse.PartitionResponse,
        asked: int,
    ) -> bool:
        """Buffer the records of one partition's answer; True when there were some."""
        records = result.records  # read once: each read of a bytes field copies it
        if records:
            try:
                aborted = [(a.producer_id, a.first_offset) for a in result.aborted_transactions]
                decoded, leader_epoch, corrupt_at = decode_records(tp, records, asked, aborted)
            except CorruptRecordError as error:
                self._errors[tp] = error
                return False
            if decoded:
                partition.fetch_offset = (
                    corrupt_at  # fetched again, it fails alone once these are polled
                    if corrupt_at is not None
                    else max(decoded[-1].offset + 1, result.next_fetch_offset)
                )
                partition.buffers.append(_Buffered(decoded, leader_epoch, partition.fetch_offset))
                return True
        if result.next_fetch_offset > asked:
            partition.fetch_offset = result.next_fetch_offset
            if not partition.buffers:
                # Everything fetched was hidden (markers, aborted records): consumed, as in
                # Kafka, so that the position and a commit move past it.
                partition.position = result.next_fetch_offset
        return False

    def _on_truncation(
        self,
        tp: TopicPartition,
        partition: _Partition,
        diverging: broker_pb2.FetchResponse.EpochEndOffset,
    ) -> None:
        """The leader's log no longer holds what we read past `end_offset` (an unclean leader
        election truncated it): go back there rather than silently skipping what replaced it."""
        end_offset = diverging.end_offset
        if self.config.auto_offset_reset == "none":
            self._errors[tp] = OffsetOutOfRangeError(
                f"log truncation detected on {tp[0]}-{tp[1]}: the leader's log ends epoch "
                f"{diverging.leader_epoch} at {end_offset}, below what this consumer read"
            )
            return
        log.warning(
            "log truncation detected on %s-%d: resetting to offset %d", tp[0], tp[1], end_offset
        )
        position = partition.position if partition.position is not None else end_offset
        self._drop(tp)
        if end_offset < 0:
            self._set_reset(tp, self.default_reset(), due=True)
        else:
            partition.position = partition.fetch_offset = min(end_offset, position)

    def _on_partition_error(
        self,
        tp: TopicPartition,
        partition: _Partition,
        result: broker_pb2.FetchResponse.PartitionResponse,
    ) -> bool:
        """True when the metadata is stale."""
        code = result.error_code
        partition.read_replica = None  # back to the leader, which may name another
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            spec = self.default_reset()
            if spec == NO_RESET:
                self._errors[tp] = OffsetOutOfRangeError(
                    f"offset {partition.fetch_offset} of {tp[0]}-{tp[1]} is out of range and "
                    "auto.offset.reset=none"
                )
            else:
                self._drop(tp)
                self._set_reset(tp, spec, due=True)
            return False
        if code in RETRY_AFTER_REFRESH:
            return True
        self._errors[tp] = KafkaError.of(code, result.error_message)
        return False

    # --- handing out ----------------------------------------------------------------------------

    def take(self, limit: int) -> list[ConsumerRecord]:
        """At most `limit` buffered records, in assignment order (not of paused partitions)."""
        taken: list[ConsumerRecord] = []
        partitions = self._partitions
        for tp in self._assigned:
            partition = partitions[tp]
            buffers = partition.buffers
            if not buffers or partition.paused:
                continue
            while buffers and len(taken) < limit:
                head = buffers[0]
                end = min(len(head.records), head.start + limit - len(taken))
                chunk = head.records[head.start : end]
                taken += chunk
                head.start = end
                partition.position = chunk[-1].offset + 1
                if end >= len(head.records):
                    buffers.popleft()
                    partition.position = max(partition.position, head.end_offset)
                partition.leader_epoch = head.leader_epoch
            if len(taken) >= limit:
                break
        return taken

    def close_requests(self) -> dict[int, broker_pb2.FetchRequest]:
        """Fetches that close every open fetch session, by node."""
        return self._sessions.close_requests()

    # --- internals ------------------------------------------------------------------------------

    def _assigned_partition(self, tp: TopicPartition) -> _Partition:
        partition = self._partitions.get(tp)
        if partition is None:
            raise KafkaError(
                f"{tp[0]}-{tp[1]} is not assigned to this consumer", ErrorCode.INVALID_REQUEST
            )
        return partition

    def _set_reset(self, tp: TopicPartition, spec: int, *, due: bool) -> None:
        self._resets[tp] = _Reset(spec, self._next_token, due)
        self._next_token += 1

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


def isolation_level(config: ConsumerConfig) -> int:
    """The IsolationLevel every Fetch and ListOffsets of this consumer carries."""
    if config.isolation_level == "read_committed":
        return records_pb2.ISOLATION_LEVEL_READ_COMMITTED
    return records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
