"""The producer's record accumulator: records in, ready batches out, outcomes back — a pure core.

Theory of operation (Kafka's `RecordAccumulator` and aiokafka's, minus the futures and the clock).

The driver (the Producer's asyncio sender, later) owns the network, the time and the futures. It
feeds this core with calls and reads plain data back:

    append(...)        -> AppendResult(batch_id, record_index, ...)  a record; its future's handle
                          or an AppendRefusal (BUFFER_FULL, NEW_BATCH_NEEDED), nothing changed
    ready(now, leaders)-> ReadyResult(ready_nodes, next_check_ms, unknown_leader_topics,
                          producer_id_required)
    drain(node, max_request_bytes, now) -> [ProducerBatch]    closed, encoded, now in flight
    on_batch_acked(...) / on_batch_failed(...) / expire(now) / abort_all(...) -> [Completed]

A `Completed` settles every record of one batch: record `record_index` of batch `batch_id` got
offset `base_offset + record_index` (unknown when NO_OFFSET: acks=0, or a batch proven written
whose own answer was lost, see below), or the batch's error. No future, callback or task lives in
here (STYLE §5: aiokafka keeps asyncio futures in its state machines; Samsa does not), so every
path is tested with numbers for time.

One turn of the driver's loop: `ready()`; if `producer_id_required`, InitProducerId then
`set_producer_id()`; `drain()` each ready node into one Produce request; feed each response back;
`expire(now)`; sleep until `next_check_ms`, an append that filled a batch, or a response. A keyless
record (sticky partitioning, KIP-480) is appended with `abort_on_new_batch=True`; on
NEW_BATCH_NEEDED the driver tells the partitioner the batch closed, picks again and appends with
`abort_on_new_batch=False`, so the record that did not fit starts the next partition's batch.

Batches. Records of one partition go to its *open* batch, Python lists of values, keys, timestamps
and headers: appending is a few list appends and no encoding (the SDK's per-record cost is what
the produce benchmark measures). When a record would take the batch past `batch.size` (estimated
as the exact uncompressed encoded size: the 61-byte header plus 24 bytes of per-record arrays plus
key, value and header bytes) a new batch opens; a batch always takes its first record, up to
`max.request.size`. A batch is encoded once, by `samsa.common.record.codec.build_batch`, when it is
first drained; a retry re-sends the same bytes (same producer id, epoch and sequence).

A batch's life, one table (STYLE habit 4); `_transition` asserts every move:

    OPEN       taking records; the last batch of its partition's queue   -> IN_FLIGHT, DONE
    QUEUED     closed, waiting in its partition's queue (maybe backing off) -> IN_FLIGHT, DONE
    IN_FLIGHT  drained, awaiting the driver's outcome                    -> QUEUED, DONE
    DONE       completed (acked, failed, expired or aborted); forgotten

A batch is *sendable* when it is not backing off and one of: it is closed (full, or a retry),
`linger.ms` has passed since it was created, a flush is in progress, or an append is waiting for
buffer memory (Kafka's "exhausted" rule: lingering batches would hold the memory it waits for).
`ready()` reports the leaders of partitions with a sendable head batch; `drain(node)` then takes
from every partition that node leads (sendable or not, as Kafka does: the request is going anyway)
in rotating order for fairness, several batches per partition, until `max_request_bytes`
(estimated sizes; the first batch always goes). Taking several batches of one partition per
request is a deliberate difference from Kafka: an RPC costs ~0.5 ms here (DESIGN §12), so requests
should carry more than one 16 KiB batch.

Ordering per partition, under retries:
- the queue is kept sorted by batch id (creation order), and a failed batch goes back into it at
  its place, i.e. ahead of every batch created after it;
- at most `max.in.flight.requests.per.connection` batches of one partition are in flight (at most
  5 with idempotence: the broker remembers the last 5 batches per producer and partition);
- a retried batch is only sent when nothing else of its partition is in flight, so retries go out
  one at a time, in order (Kafka's rule for retries with sequence numbers).
With idempotence (the default), batches get their sequence when first drained — `next_sequence`
per partition for the current (producer id, epoch) — and keep it on every retry, so the broker
drops duplicates and rejects gaps (OUT_OF_ORDER_SEQUENCE_NUMBER). Without idempotence, order
under retries holds only with max.in.flight.requests.per.connection=1, exactly as in Kafka.

Producer id resets (KIP-360's epoch bump). When a batch that was sent with a sequence fails for
good (a non-retriable error, retries or delivery.timeout.ms exhausted), or the broker answers
OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID for the oldest unfinished batch of a partition
(it lost our state), the sequences can no longer be trusted. The core then stops draining, lets
what is in flight finish, and reports `producer_id_required`; the driver gets a new epoch
(InitProducerId) and calls `set_producer_id`, which restarts every partition at sequence 0 and
re-sequences the queued batches. OUT_OF_ORDER_SEQUENCE_NUMBER for a batch behind an unfinished one
is only that earlier batch's failure echoing, and is retried. A batch that fails after a *newer*
batch of its partition was acked under the same epoch was written (the broker takes sequences
only in order) and its response was lost: it completes as a success without an offset (Kafka's
rule for DUPLICATE_SEQUENCE_NUMBER) as soon as that newer ack arrives, and is never re-sent —
re-sending would trust the broker to still remember its sequence, and one that lost it (an
unclean election) would append it twice, after records already acked behind it. As in Kafka, a
batch whose earlier attempt had an unknown outcome and no such proof may be written twice across
an epoch bump.

Delivery timeout. A batch fails with REQUEST_TIMED_OUT once `delivery.timeout.ms` has passed since
it was created (its first record was appended): `expire(now)` fails queued batches, and a failure
reported after the deadline is final. In-flight batches are not expired here: the driver's request
deadline (`request.timeout.ms`) reports them, and delivery.timeout.ms >= linger.ms +
request.timeout.ms (config.py) keeps that within the bound.

Memory. `buffered_bytes` (estimated bytes of all unfinished batches) stays <= `buffer.memory`:
an append that would pass it is refused with BUFFER_FULL and changes nothing; the driver waits for
completions (up to `max.block.ms`) and tries again. A record that could never fit (larger than
buffer.memory, or than max.request.size in a batch) raises RecordTooLargeError at once.

Time is `now_ms` (any monotonic millisecond clock, never decreasing between calls); randomness
(retry jitter) comes from the `random.Random` passed in. Asserts check invariants per batch, never
per record.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from samsa.client.config import IDEMPOTENCE_IN_FLIGHT_MAX, ProducerConfig
from samsa.common.errors import ErrorCode, InvalidRecordError, RecordTooLargeError
from samsa.common.record import codec, header

__all__ = [
    "AppendRefusal",
    "AppendResult",
    "BatchState",
    "Completed",
    "ProducerBatch",
    "ReadyResult",
    "RecordAccumulator",
]

# Estimated (= exact, uncompressed) encoded size: the batch header once, then per record its
# fixed-width array entries plus key and value bytes, per header its two lengths plus its bytes.
BATCH_OVERHEAD_BYTES = header.HEADER_BYTES
RECORD_OVERHEAD_BYTES = codec.ARRAY_BYTES_PER_RECORD
HEADER_OVERHEAD_BYTES = codec.ARRAY_BYTES_PER_HEADER

# Kafka wraps sequence numbers at Integer.MAX_VALUE (DefaultRecordBatch.incrementSequence).
SEQUENCE_MODULUS = 2**31
# Kafka's retry backoff: exponential (x2 per attempt) from retry.backoff.ms to retry.backoff.max.ms
# with +-20% jitter so that producers failed by one event do not retry in lockstep (KIP-580).
RETRY_BACKOFF_MULTIPLIER = 2
RETRY_BACKOFF_JITTER = 0.2
# Timestamps are int64 milliseconds in the batch; Kafka rejects negative ones.
TIMESTAMP_MS_MAX = 2**63 - 1

NO_OFFSET = -1
NO_TIMESTAMP = -1

# Errors about our sequence: "written before" (a success without offset, see _known_written),
# else retried, with a producer-id reset when the batch is the oldest unfinished of its partition.
_SEQUENCE_ERRORS = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
    }
)


_new_tuple = tuple.__new__


class RandomSource(Protocol):
    """The part of `random.Random` the accumulator uses (retry jitter)."""

    def random(self) -> float: ...


class BatchState(enum.Enum):
    OPEN = "open"
    QUEUED = "queued"
    IN_FLIGHT = "in flight"
    DONE = "done"


_TRANSITIONS: dict[BatchState, frozenset[BatchState]] = {
    BatchState.OPEN: frozenset({BatchState.IN_FLIGHT, BatchState.DONE, BatchState.QUEUED}),
    BatchState.QUEUED: frozenset({BatchState.IN_FLIGHT, BatchState.DONE}),
    BatchState.IN_FLIGHT: frozenset({BatchState.QUEUED, BatchState.DONE}),
    BatchState.DONE: frozenset(),
}


class AppendRefusal(enum.Enum):
    """Why an append did not happen (nothing changed; the record is still the caller's)."""

    # buffered_bytes + this record > buffer.memory: wait for completions, then append again.
    BUFFER_FULL = "buffer full"
    # abort_on_new_batch=True and the record needs a new batch: switch the sticky partition.
    NEW_BATCH_NEEDED = "new batch needed"


class AppendResult(NamedTuple):
    """Where a record went: the handle of its future is (batch_id, record_index)."""

    batch_id: int
    record_index: int
    # True when a batch of this partition is full (or no other record fits): wake the sender.
    batch_is_full: bool
    # True when this record opened a new batch.
    new_batch: bool


class ReadyResult(NamedTuple):
    # Leaders with at least one sendable batch: call drain() for each.
    ready_nodes: frozenset[int]
    # The earliest time something becomes sendable or expires (linger, backoff, delivery
    # timeout); None when only an outcome or an append can change anything.
    next_check_ms: int | None
    # Topics with batches but no known leader for some partition: refresh metadata.
    unknown_leader_topics: frozenset[str]
    # Idempotence needs a (new) producer id and epoch: InitProducerId, then set_producer_id().
    producer_id_required: bool


class Completed(NamedTuple):
    """The outcome of every record of one batch."""

    batch_id: int
    topic: str
    partition: int
    record_count: int
    base_offset: int  # NO_OFFSET on error (and with acks=0)
    log_append_time_ms: int  # NO_TIMESTAMP unless the topic uses LogAppendTime
    error_code: ErrorCode  # ErrorCode.NONE on success
    error_message: str


class ProducerBatch:
    """One batch of one partition. The driver reads `encoded` (after drain) and the identity
    fields; everything else belongs to the accumulator."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "batch_id",
        "created_ms",
        "encoded",
        "headers",
        "keys",
        "node_id",
        "partition",
        "retry_at_ms",
        "size_bytes",
        "state",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(self, batch_id: int, topic: str, partition: int, created_ms: int) -> None:
        self.batch_id = batch_id
        self.topic = topic
        self.partition = partition
        self.created_ms = created_ms
        self.state = BatchState.OPEN
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] = []
        self.timestamps: list[int] = []
        # None until a record with headers arrives; then one tuple of pairs per record.
        self.headers: list[tuple[tuple[str, bytes | None], ...]] | None = None
        self.size_bytes = BATCH_OVERHEAD_BYTES
        self.attempts = 0  # times drained
        self.retry_at_ms = 0  # not sendable before this (retry backoff)
        self.base_sequence = header.NO_SEQUENCE
        self.encoded: bytes | None = None
        self.node_id = -1  # the node of the last attempt

    @property
    def record_count(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return (
            f"ProducerBatch(batch_id={self.batch_id}, {self.topic}-{self.partition}, "
            f"records={len(self.values)}, state={self.state.value}, attempts={self.attempts}, "
            f"base_sequence={self.base_sequence})"
        )


class _PartitionState:
    """The batches of one partition that are not done, and its sequence counter."""

    __slots__ = ("in_flight", "last_acked_batch_id", "next_sequence", "open_batch", "queue")

    def __init__(self) -> None:
        # Not in flight, ascending batch id; the open batch, if any, is last.
        self.queue: deque[ProducerBatch] = deque()
        # In flight, ascending batch id (a retry is only sent when this is empty).
        self.in_flight: list[ProducerBatch] = []
        self.open_batch: ProducerBatch | None = None
        self.next_sequence = 0
        # The newest batch acked under the current producer epoch: the broker only accepts
        # sequences in order, so every older batch sent in this epoch was written.
        self.last_acked_batch_id = -1


TopicPartition = tuple[str, int]


class RecordAccumulator:
    """Batches records per partition and tracks them until each batch has an outcome."""

    def __init__(self, config: ProducerConfig, random_source: RandomSource) -> None:
        self._batch_size = config.batch_size
        self._linger_ms = config.linger_ms
        self._max_request_size = config.max_request_size
        self._buffer_memory = config.buffer_memory
        self._delivery_timeout_ms = config.delivery_timeout_ms
        self._retries = config.retries
        self._retry_backoff_ms = min(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._retry_backoff_max_ms = config.retry_backoff_max_ms
        self._idempotent = config.enable_idempotence
        self._transactional = config.transactional_id is not None
        self._compression = (
            header.COMPRESSION_ZSTD
            if config.compression_type == "zstd"
            else header.COMPRESSION_NONE
        )
        in_flight_max = config.max_in_flight_requests_per_connection
        if self._idempotent:
            in_flight_max = min(in_flight_max, IDEMPOTENCE_IN_FLIGHT_MAX)
        self._partition_in_flight_max = in_flight_max
        self._random = random_source

        self._partitions: dict[TopicPartition, _PartitionState] = {}
        # Partitions whose queue is not empty, for ready() and expire().
        self._queued: dict[TopicPartition, _PartitionState] = {}
        # Every batch not done, by id; ids only grow, so the first key is the oldest.
        self._unfinished: dict[int, ProducerBatch] = {}
        self._in_flight: dict[int, ProducerBatch] = {}
        self._next_batch_id = 0
        self._buffered_bytes = 0
        self._memory_waiting = False
        self._flushes_in_progress = 0
        # From the last ready(): each ready node -> its partitions with queued batches.
        self._node_partitions: dict[int, list[TopicPartition]] = {}
        self._drain_starts: dict[int, int] = {}
        self._producer_id = header.NO_PRODUCER_ID
        self._producer_epoch = header.NO_PRODUCER_EPOCH
        self._producer_id_reset_required = self._idempotent

    # --- what the driver reads --------------------------------------------------------------------

    @property
    def buffered_bytes(self) -> int:
        """Estimated bytes of every unfinished batch (bounded by buffer.memory)."""
        return self._buffered_bytes

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def has_unfinished(self) -> bool:
        return bool(self._unfinished)

    # --- records in -------------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp_ms: int | None,
        now_ms: int,
        abort_on_new_batch: bool = False,
    ) -> AppendResult | AppendRefusal:
        """Add one record to its partition's open batch (or a new one). `timestamp_ms` None means
        `now_ms` (CreateTime). Raises InvalidRecordError for a value/key/header of the wrong type
        or a negative timestamp, RecordTooLargeError for a record that could never be sent."""
        if value.__class__ is not bytes and value is not None:
            value = _as_bytes("value", value)
        if key.__class__ is not bytes and key is not None:
            key = _as_bytes("key", key)
        record_bytes = RECORD_OVERHEAD_BYTES
        if value is not None:
            record_bytes += len(value)
        if key is not None:
            record_bytes += len(key)
        record_headers = None
        if headers:
            record_headers, header_bytes = _checked_headers(headers)
            record_bytes += header_bytes
        if timestamp_ms is None:
            timestamp_ms = now_ms
        elif not 0 <= timestamp_ms <= TIMESTAMP_MS_MAX:
            raise InvalidRecordError(
                f"invalid timestamp {timestamp_ms}: must be a non-negative int64 (ms), or None"
            )
        if self._buffered_bytes + record_bytes > self._buffer_memory:
            return self._refuse_for_memory(record_bytes)
        state = self._partitions.get((topic, partition))
        batch = state.open_batch if state is not None else None
        if batch is None or batch.size_bytes + record_bytes > self._batch_size:
            if abort_on_new_batch:
                self._check_record_size(record_bytes)
                return AppendRefusal.NEW_BATCH_NEEDED
            return self._append_to_new_batch(
                topic, partition, key, value, record_headers, timestamp_ms, now_ms, record_bytes
            )
        index = len(batch.values)
        batch.values.append(value)
        batch.keys.append(key)
        batch.timestamps.append(timestamp_ms)
        if record_headers:
            _append_headers(batch, index, record_headers)
        elif batch.headers is not None:
            batch.headers.append(())
        batch.size_bytes += record_bytes
        self._buffered_bytes += record_bytes
        full = batch.size_bytes + RECORD_OVERHEAD_BYTES > self._batch_size
        # tuple.__new__ builds the NamedTuple in C (its own __new__ is Python code): ~0.1 us less
        # per record on the SDK's hottest line.
        return _new_tuple(AppendResult, (batch.batch_id, index, full, False))

    def _append_to_new_batch(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...] | None,
        timestamp_ms: int,
        now_ms: int,
        record_bytes: int,
    ) -> AppendResult | AppendRefusal:
        self._check_record_size(record_bytes)
        if self._buffered_bytes + BATCH_OVERHEAD_BYTES + record_bytes > self._buffer_memory:
            return self._refuse_for_memory(record_bytes)
        topic_partition = (topic, partition)
        state = self._partitions.get(topic_partition)
        if state is None:
            state = self._partitions[topic_partition] = _PartitionState()
        if state.open_batch is not None:
            _transition(state.open_batch, BatchState.QUEUED)  # full: closed, still queued
        batch = ProducerBatch(self._next_batch_id, topic, partition, now_ms)
        self._next_batch_id += 1
        batch.values.append(value)
        batch.keys.append(key)
        batch.timestamps.append(timestamp_ms)
        if headers:
            _append_headers(batch, 0, headers)
        batch.size_bytes += record_bytes
        self._buffered_bytes += batch.size_bytes
        self._memory_waiting = False
        state.open_batch = batch
        state.queue.append(batch)
        self._queued[topic_partition] = state
        self._unfinished[batch.batch_id] = batch
        full = len(state.queue) > 1 or batch.size_bytes + RECORD_OVERHEAD_BYTES > self._batch_size
        return AppendResult(batch.batch_id, 0, full, True)

    def _check_record_size(self, record_bytes: int) -> None:
        batch_bytes = BATCH_OVERHEAD_BYTES + record_bytes
        if batch_bytes > self._max_request_size:
            raise RecordTooLargeError(
                f"The record is {batch_bytes} bytes in a batch of its own, which is larger than "
                f"max.request.size ({self._max_request_size}): raise max.request.size (and the "
                "topic's max.message.bytes) or send a smaller record"
            )

    def _refuse_for_memory(self, record_bytes: int) -> AppendRefusal:
        if BATCH_OVERHEAD_BYTES + record_bytes > self._buffer_memory:
            raise RecordTooLargeError(
                f"The record is {BATCH_OVERHEAD_BYTES + record_bytes} bytes in a batch of its "
                f"own, which is larger than buffer.memory ({self._buffer_memory})"
            )
        # Kafka's "exhausted" rule: while an append waits for memory, every batch is sendable.
        self._memory_waiting = True
        return AppendRefusal.BUFFER_FULL

    # --- batches out ------------------------------------------------------------------------------

    def ready(self, now_ms: int, leaders: Mapping[TopicPartition, int]) -> ReadyResult:
        """Which nodes have sendable batches, and when to look again. Remembers the ready nodes'
        partitions (per `leaders`) for the drain() calls that follow."""
        ready_nodes: set[int] = set()
        unknown_leader_topics: set[str] = set()
        next_check_ms: int | None = None
        node_partitions: dict[int, list[TopicPartition]] = {}
        sending = self._sending_allowed()
        everything_sendable = self._flushes_in_progress > 0 or self._memory_waiting
        for topic_partition, state in self._queued.items():
            batch = state.queue[0]
            # The head is the oldest queued batch: its deadline is the partition's earliest.
            next_check_ms = _earliest(next_check_ms, batch.created_ms + self._delivery_timeout_ms)
            leader = leaders.get(topic_partition)
            if leader is None:
                unknown_leader_topics.add(topic_partition[0])
                continue
            node_partitions.setdefault(leader, []).append(topic_partition)
            if not sending or leader in ready_nodes:
                continue
            if batch.retry_at_ms > now_ms:
                next_check_ms = _earliest(next_check_ms, batch.retry_at_ms)
                continue
            if not self._can_send_head(state, batch):
                continue  # waits for an outcome of its partition, not for time
            linger_end_ms = batch.created_ms + self._linger_ms
            if (
                everything_sendable
                or batch.state is not BatchState.OPEN
                or now_ms >= linger_end_ms
                or batch.size_bytes + RECORD_OVERHEAD_BYTES > self._batch_size
            ):
                ready_nodes.add(leader)
            else:
                next_check_ms = _earliest(next_check_ms, linger_end_ms)
        # drain() serves only the nodes reported ready: a lingering node is not drained early.
        self._node_partitions = {
            node: partitions for node, partitions in node_partitions.items() if node in ready_nodes
        }
        return ReadyResult(
            frozenset(ready_nodes),
            next_check_ms,
            frozenset(unknown_leader_topics),
            self._producer_id_reset_required and not self._in_flight,
        )

    def drain(self, node_id: int, max_request_bytes: int, now_ms: int) -> list[ProducerBatch]:
        """Close, sequence and encode the batches to send to `node_id` in one request: from every
        partition it leads (per the last ready(), which must have reported it ready), in rotating
        order, oldest first, until `max_request_bytes` (estimated; the first batch always goes).
        They are now in flight. Called again for the same node, it fills another request."""
        topic_partitions = self._node_partitions.get(node_id)
        if not topic_partitions or not self._sending_allowed():
            return []
        count = len(topic_partitions)
        start = self._drain_starts.get(node_id, 0) % count
        self._drain_starts[node_id] = start + 1
        drained: list[ProducerBatch] = []
        request_bytes = 0
        for position in range(count):
            topic_partition = topic_partitions[(start + position) % count]
            state = self._partitions[topic_partition]
            while state.queue:
                batch = state.queue[0]
                if batch.retry_at_ms > now_ms or not self._can_send_head(state, batch):
                    break
                if drained and request_bytes + batch.size_bytes > max_request_bytes:
                    return drained
                state.queue.popleft()
                if not state.queue:
                    del self._queued[topic_partition]
                self._start_attempt(state, batch, node_id)
                drained.append(batch)
                request_bytes += batch.size_bytes
        return drained

    def _can_send_head(self, state: _PartitionState, batch: ProducerBatch) -> bool:
        """Ordering rules: a bounded number in flight per partition, and a retry goes alone."""
        if len(state.in_flight) >= self._partition_in_flight_max:
            return False
        return not (batch.attempts and state.in_flight)

    def _sending_allowed(self) -> bool:
        return not (self._idempotent and self._producer_id_reset_required)

    def _start_attempt(self, state: _PartitionState, batch: ProducerBatch, node_id: int) -> None:
        if batch is state.open_batch:
            state.open_batch = None
        _transition(batch, BatchState.IN_FLIGHT)
        if self._idempotent and batch.base_sequence == header.NO_SEQUENCE:
            batch.base_sequence = state.next_sequence
            state.next_sequence = (state.next_sequence + len(batch.values)) % SEQUENCE_MODULUS
            batch.encoded = None
        if batch.encoded is None:
            batch.encoded = self._encode(batch)
        batch.attempts += 1
        batch.node_id = node_id
        assert not state.in_flight or state.in_flight[-1].batch_id < batch.batch_id
        state.in_flight.append(batch)
        self._in_flight[batch.batch_id] = batch

    def _encode(self, batch: ProducerBatch) -> bytes:
        # All-null keys are the common keyless case: one C-level count instead of a column.
        keys = None if batch.keys.count(None) == len(batch.keys) else batch.keys
        encoded = codec.build_batch(
            batch.values,
            keys=keys,
            timestamps=batch.timestamps,
            headers=batch.headers,
            compression=self._compression,
            producer_id=self._producer_id if self._idempotent else header.NO_PRODUCER_ID,
            producer_epoch=self._producer_epoch if self._idempotent else header.NO_PRODUCER_EPOCH,
            base_sequence=batch.base_sequence,
            transactional=self._transactional,
        )
        assert self._compression or len(encoded) == batch.size_bytes, "size estimate drifted"
        return encoded

    # --- outcomes back ----------------------------------------------------------------------------

    def on_batch_acked(
        self, batch_id: int, base_offset: int, log_append_time_ms: int = NO_TIMESTAMP
    ) -> list[Completed]:
        """The broker appended the batch at `base_offset` (NO_OFFSET with acks=0). Also completes
        the older batches of the partition this ack proves written (see _complete_known_written)."""
        batch, state = self._take_in_flight(batch_id)
        completed = [self._complete(batch, base_offset, log_append_time_ms, ErrorCode.NONE, "")]
        if self._idempotent and batch.batch_id > state.last_acked_batch_id:
            state.last_acked_batch_id = batch.batch_id
            completed += self._complete_known_written(state)
        return completed

    def on_batch_failed(
        self, batch_id: int, error_code: ErrorCode | int, retriable: bool, now_ms: int
    ) -> list[Completed]:
        """The attempt failed. A retriable failure within `retries` and delivery.timeout.ms puts
        the batch back at its place in its partition's queue, after an exponential backoff;
        otherwise the batch completes with `error_code`."""
        batch, state = self._take_in_flight(batch_id)
        error_code = ErrorCode(error_code)
        if self._known_written(state, batch) or (
            self._idempotent and error_code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
        ):
            # Written by an earlier attempt, and this answer does not say where: a success
            # without an offset (Kafka's rule for DUPLICATE_SEQUENCE_NUMBER), never re-sent.
            return [self._complete(batch, NO_OFFSET, NO_TIMESTAMP, ErrorCode.NONE, "")]
        if self._idempotent and error_code in _SEQUENCE_ERRORS:
            if self._is_oldest_unfinished(state, batch):
                self._producer_id_reset_required = True  # the broker lost our sequence
            retriable = True
        deadline_ms = batch.created_ms + self._delivery_timeout_ms
        if retriable and batch.attempts <= self._retries and now_ms < deadline_ms:
            batch.retry_at_ms = now_ms + self._retry_backoff(batch.attempts)
            self._requeue(state, batch)
            return []
        if retriable:
            reason = "retries exhausted" if now_ms < deadline_ms else "delivery.timeout.ms passed"
        else:
            reason = "not retriable"
        message = (
            f"{error_code.name} for {batch.topic}-{batch.partition} after "
            f"{batch.attempts} attempt(s): {reason}"
        )
        return [self._complete(batch, NO_OFFSET, NO_TIMESTAMP, error_code, message)]

    def expire(self, now_ms: int) -> list[Completed]:
        """Fail every queued batch created delivery.timeout.ms or more ago (Kafka's
        TimeoutException "Expiring N record(s) ..."): REQUEST_TIMED_OUT."""
        completed: list[Completed] = []
        for topic_partition, state in list(self._queued.items()):
            while state.queue and now_ms - state.queue[0].created_ms >= self._delivery_timeout_ms:
                batch = state.queue.popleft()
                if batch is state.open_batch:
                    state.open_batch = None
                message = (
                    f"Expiring {len(batch.values)} record(s) for {batch.topic}-{batch.partition}: "
                    f"{now_ms - batch.created_ms} ms has passed since batch creation"
                )
                completed.append(
                    self._complete(
                        batch, NO_OFFSET, NO_TIMESTAMP, ErrorCode.REQUEST_TIMED_OUT, message
                    )
                )
            if not state.queue:
                del self._queued[topic_partition]
        return completed

    def abort_all(self, error_code: ErrorCode, message: str) -> list[Completed]:
        """Complete every unfinished batch, in flight or not, with `error_code` (a forced close,
        or a fatal producer error). Outcomes of requests already sent must not be fed back."""
        completed = []
        for batch in list(self._unfinished.values()):
            state = self._partitions[(batch.topic, batch.partition)]
            if batch.state is BatchState.IN_FLIGHT:
                self._take_in_flight(batch.batch_id)
            else:
                state.queue.remove(batch)
            if batch is state.open_batch:
                state.open_batch = None
            completed.append(self._complete(batch, NO_OFFSET, NO_TIMESTAMP, error_code, message))
        self._queued.clear()
        return completed

    def _take_in_flight(self, batch_id: int) -> tuple[ProducerBatch, _PartitionState]:
        batch = self._in_flight.pop(batch_id, None)
        assert batch is not None, f"batch {batch_id} is not in flight: an outcome fed twice?"
        state = self._partitions[(batch.topic, batch.partition)]
        state.in_flight.remove(batch)
        return batch, state

    def _requeue(self, state: _PartitionState, batch: ProducerBatch) -> None:
        """Put a failed batch back at its place: the queue stays sorted by batch id."""
        _transition(batch, BatchState.QUEUED)
        position = 0
        for queued in state.queue:
            if queued.batch_id > batch.batch_id:
                break
            position += 1
        state.queue.insert(position, batch)
        self._queued[(batch.topic, batch.partition)] = state

    def _retry_backoff(self, attempts: int) -> int:
        """Kafka's ExponentialBackoff: retry.backoff.ms * 2^(attempts - 1), jittered by +-20%,
        capped at retry.backoff.max.ms (a static backoff when max <= initial)."""
        initial_ms, max_ms = self._retry_backoff_ms, self._retry_backoff_max_ms
        if max_ms <= initial_ms:
            return max_ms
        exponent = min(attempts - 1, 62)
        term_ms = min(initial_ms * RETRY_BACKOFF_MULTIPLIER**exponent, max_ms)
        jitter = 1 - RETRY_BACKOFF_JITTER + 2 * RETRY_BACKOFF_JITTER * self._random.random()
        return min(int(term_ms * jitter), max_ms)

    def _complete_known_written(self, state: _PartitionState) -> list[Completed]:
        """A newer batch was just acked: the queued retries ahead of it were written (lost
        responses). They complete now, as successes without offset, and are never sent again —
        a re-send would rely on the broker still remembering their sequence, and a broker that
        lost it (an unclean election) would write them twice, after records acked behind them."""
        completed = []
        while state.queue and state.queue[0].batch_id < state.last_acked_batch_id:
            batch = state.queue.popleft()
            assert batch.base_sequence != header.NO_SEQUENCE, "an older batch was never sent"
            completed.append(self._complete(batch, NO_OFFSET, NO_TIMESTAMP, ErrorCode.NONE, ""))
        if completed and not state.queue:
            del self._queued[(completed[0].topic, completed[0].partition)]
        return completed

    def _known_written(self, state: _PartitionState, batch: ProducerBatch) -> bool:
        """An attempt of `batch` was written: a newer batch of its partition was acked under the
        same epoch, and the broker accepts sequences only in order."""
        return (
            self._idempotent
            and batch.base_sequence != header.NO_SEQUENCE
            and state.last_acked_batch_id > batch.batch_id
        )

    def _is_oldest_unfinished(self, state: _PartitionState, batch: ProducerBatch) -> bool:
        """No older batch of the partition is in flight or queued (`batch` is neither now)."""
        older_in_flight = bool(state.in_flight) and state.in_flight[0].batch_id < batch.batch_id
        older_queued = bool(state.queue) and state.queue[0].batch_id < batch.batch_id
        return not older_in_flight and not older_queued

    def _complete(
        self,
        batch: ProducerBatch,
        base_offset: int,
        log_append_time_ms: int,
        error_code: ErrorCode,
        message: str,
    ) -> Completed:
        if (
            error_code is not ErrorCode.NONE
            and self._idempotent
            and batch.base_sequence != header.NO_SEQUENCE
        ):
            # It went out with a sequence and will never be acked: later sequences have a gap.
            self._producer_id_reset_required = True
        _transition(batch, BatchState.DONE)
        del self._unfinished[batch.batch_id]
        self._buffered_bytes -= batch.size_bytes
        assert self._buffered_bytes >= 0
        self._memory_waiting = False  # memory was freed: a waiting append may now fit
        record_count = len(batch.values)
        # Free the records now: the driver keeps its futures, not our columns.
        batch.values, batch.keys, batch.timestamps, batch.headers = [], [], [], None
        batch.encoded = None
        return Completed(
            batch.batch_id,
            batch.topic,
            batch.partition,
            record_count,
            base_offset,
            log_append_time_ms,
            error_code,
            message,
        )

    # --- producer id, flush -----------------------------------------------------------------------

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A new (producer id, epoch) from InitProducerId: every partition restarts at sequence 0
        and every queued batch is sequenced (and encoded) again when drained. Only with nothing
        in flight — the sequences of in-flight batches belong to the old epoch."""
        assert self._idempotent, "set_producer_id without enable.idempotence"
        assert not self._in_flight, "set_producer_id with batches in flight"
        assert producer_id >= 0 and producer_epoch >= 0
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._producer_id_reset_required = False
        for state in self._partitions.values():
            for batch in state.queue:
                # Known-written batches were completed when a newer one was acked.
                assert not self._known_written(state, batch)
                batch.base_sequence = header.NO_SEQUENCE
                batch.encoded = None
            state.next_sequence = 0
            state.last_acked_batch_id = -1

    def begin_flush(self) -> int:
        """Make every batch sendable now, regardless of linger.ms, until flush_done(). Returns
        the flush's target: it is complete when is_flush_complete(target) says so."""
        self._flushes_in_progress += 1
        return self._next_batch_id - 1

    def is_flush_complete(self, target_batch_id: int) -> bool:
        """True when every batch that existed at begin_flush() has completed."""
        oldest = next(iter(self._unfinished), None)
        return oldest is None or oldest > target_batch_id

    def flush_done(self) -> None:
        assert self._flushes_in_progress > 0, "flush_done() without begin_flush()"
        self._flushes_in_progress -= 1

    # --- consistency ------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Assert every structural invariant (O(batches)): for tests and debugging, never on a
        hot path. The simulation calls it after every step."""
        unfinished: dict[int, ProducerBatch] = {}
        for topic_partition, state in self._partitions.items():
            queue_ids = [batch.batch_id for batch in state.queue]
            in_flight_ids = [batch.batch_id for batch in state.in_flight]
            assert queue_ids == sorted(queue_ids) and in_flight_ids == sorted(in_flight_ids)
            assert (topic_partition in self._queued) == bool(state.queue)
            assert len(state.in_flight) <= self._partition_in_flight_max
            if state.open_batch is not None:
                assert state.open_batch is state.queue[-1]
                assert state.open_batch.state is BatchState.OPEN
            for batch in state.queue:
                assert batch.state in (BatchState.OPEN, BatchState.QUEUED)
                assert (batch.state is BatchState.OPEN) == (batch is state.open_batch)
                assert not self._known_written(state, batch), "a written batch would be re-sent"
            for batch in state.in_flight:
                assert batch.state is BatchState.IN_FLIGHT
                assert self._in_flight[batch.batch_id] is batch
                assert not self._idempotent or batch.base_sequence != header.NO_SEQUENCE
            for batch in (*state.queue, *state.in_flight):
                assert (batch.topic, batch.partition) == topic_partition
                unfinished[batch.batch_id] = batch
        assert unfinished.keys() == self._unfinished.keys()
        assert list(self._unfinished) == sorted(self._unfinished)
        assert len(self._in_flight) == sum(len(s.in_flight) for s in self._partitions.values())
        assert self._buffered_bytes == sum(batch.size_bytes for batch in unfinished.values())
        assert self._buffered_bytes <= self._buffer_memory


def _transition(batch: ProducerBatch, target: BatchState) -> None:
    assert target in _TRANSITIONS[batch.state], f"{batch!r}: illegal move to {target.value}"
    batch.state = target


def _earliest(current_ms: int | None, candidate_ms: int) -> int:
    return candidate_ms if current_ms is None or candidate_ms < current_ms else current_ms


def _as_bytes(name: str, item: object) -> bytes:
    """bytes from a bytearray or memoryview (copied: the caller may reuse its buffer)."""
    if isinstance(item, bytearray):
        return bytes(item)
    if isinstance(item, memoryview):
        return item.tobytes()
    raise InvalidRecordError(f"a record's {name} must be bytes or None, got {type(item).__name__}")


def _checked_headers(
    headers: Iterable[tuple[str, bytes | None]],
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """Headers as a tuple of (str, bytes | None) pairs, and their encoded size in bytes."""
    checked = []
    size_bytes = 0
    for pair in headers:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise InvalidRecordError(f"a header must be a (str, bytes | None) pair, got {pair!r}")
        header_key, header_value = pair
        if not isinstance(header_key, str):
            raise InvalidRecordError(f"a header key must be str, got {type(header_key).__name__}")
        try:
            size_bytes += HEADER_OVERHEAD_BYTES + len(header_key.encode())
        except UnicodeEncodeError as error:
            raise InvalidRecordError(f"header key {header_key!r} is not UTF-8: {error}") from None
        if header_value is not None:
            if header_value.__class__ is not bytes:
                header_value = _as_bytes(f"header {header_key!r}", header_value)
            size_bytes += len(header_value)
        checked.append((header_key, header_value))
    return tuple(checked), size_bytes


def _append_headers(
    batch: ProducerBatch, index: int, headers: tuple[tuple[str, bytes | None], ...]
) -> None:
    if batch.headers is None:
        batch.headers = [()] * index
    batch.headers.append(headers)
