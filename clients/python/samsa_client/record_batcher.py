"""Records into batches: batching, memory and linger — a pure core under the accumulator.

Theory of operation. Records of one partition go to its *open* batch (producer_batch.py). When a
record would take the batch past `batch.size` a new batch opens; a batch always takes its first
record, up to `max.request.size`. A keyless record (sticky partitioning, KIP-480) is appended
with `abort_on_new_batch=True`: on NEW_BATCH_NEEDED the driver tells the partitioner the batch
closed, picks again and appends with `abort_on_new_batch=False`, so the record that did not fit
starts the next partition's batch.

Linger. An open batch that is not full becomes sendable `linger.ms` after its first record;
a closed or full one at once (`sendable_at_ms`). While a flush is in progress (`begin_flush` to
`flush_done`) every batch is sendable. The accumulator adds the other rules (a retry's backoff,
the ordering rules).

Memory. `buffered_bytes` (estimated bytes of all unfinished batches) stays <= `buffer.memory`:
an append that would pass it is refused with BUFFER_FULL and changes nothing; the driver waits for
completions (up to `max.block.ms`) and tries again. While an append waits, `memory_waiting` makes
every batch sendable (Kafka's "exhausted" rule: lingering batches would hold the memory it waits
for). A record that could never fit (larger than buffer.memory, or than max.request.size in a
batch) raises RecordTooLargeError at once.

The batcher owns the unfinished batches' bookkeeping, which the accumulator reads and moves:
`partitions`, `queued` (partitions with a non-empty queue) and `unfinished` (by id, oldest
first). What a record must be (types, timestamp) is record_checks.py's.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Sequence
from itertools import repeat
from operator import sub
from typing import NamedTuple

from samsa.client.config import ProducerConfig
from samsa.client.producer_batch import (
    BATCH_OVERHEAD_BYTES,
    RECORD_OVERHEAD_BYTES,
    BatchState,
    PartitionState,
    ProducerBatch,
    TopicPartition,
    transition,
)
from samsa.client.record_checks import (
    TIMESTAMP_MS_MAX,
    CheckedRecords,
    as_bytes,
    check_columns,
    checked_headers,
    checked_int,
)
from samsa.common.errors import InvalidRecordError, RecordTooLargeError

_new_tuple = tuple.__new__


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


class ManyAppended(NamedTuple):
    """What `append_many` did with records [start, stop) of one partition."""

    # The first record not appended (`stop` when all were): it is refused for `refusal`.
    next_index: int
    # (batch id, index of the first record in that batch, how many), in record order.
    segments: list[tuple[int, int, int]]
    refusal: AppendRefusal | None
    # A batch filled or a new one opened: wake the sender (as AppendResult says per record).
    wake: bool


class RecordBatcher:
    def __init__(self, config: ProducerConfig) -> None:
        self._batch_size = config.batch_size
        self._linger_ms = config.linger_ms
        self._max_request_size = config.max_request_size
        self.buffer_memory = config.buffer_memory
        self.partitions: dict[TopicPartition, PartitionState] = {}
        # Partitions whose queue is not empty, for ready() and expire().
        self.queued: dict[TopicPartition, PartitionState] = {}
        # Every batch not done, by id; ids only grow, so the first key is the oldest.
        self.unfinished: dict[int, ProducerBatch] = {}
        self.next_batch_id = 0
        self.buffered_bytes = 0
        self.memory_waiting = False
        self.flushes_in_progress = 0  # while > 0, every batch is sendable (begin_flush)

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
            value = as_bytes("value", value)
        if key.__class__ is not bytes and key is not None:
            key = as_bytes("key", key)
        record_bytes = RECORD_OVERHEAD_BYTES
        if value is not None:
            record_bytes += len(value)
        if key is not None:
            record_bytes += len(key)
        record_headers = None
        if headers:
            record_headers, header_bytes = checked_headers(headers)
            record_bytes += header_bytes
        if timestamp_ms is None:
            timestamp_ms = now_ms
        elif timestamp_ms.__class__ is not int:
            timestamp_ms = checked_int("timestamp", timestamp_ms)
        if not 0 <= timestamp_ms <= TIMESTAMP_MS_MAX:
            raise InvalidRecordError(
                f"invalid timestamp {timestamp_ms}: must be a non-negative int64 (ms), or None"
            )
        if self.buffered_bytes + record_bytes > self.buffer_memory:
            return self._refuse_for_memory(record_bytes)
        state = self.partitions.get((topic, partition))
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
        self.buffered_bytes += record_bytes
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
        if self.buffered_bytes + BATCH_OVERHEAD_BYTES + record_bytes > self.buffer_memory:
            return self._refuse_for_memory(record_bytes)
        topic_partition = (topic, partition)
        state = self.partitions.get(topic_partition)
        if state is None:
            state = self.partitions[topic_partition] = PartitionState()
        if state.open_batch is not None:
            transition(state.open_batch, BatchState.QUEUED)  # full: closed, still queued
        batch = ProducerBatch(self.next_batch_id, topic, partition, now_ms)
        self.next_batch_id += 1
        batch.values.append(value)
        batch.keys.append(key)
        batch.timestamps.append(timestamp_ms)
        if headers:
            _append_headers(batch, 0, headers)
        batch.size_bytes += record_bytes
        self.buffered_bytes += batch.size_bytes
        self.memory_waiting = False
        state.open_batch = batch
        state.queue.append(batch)
        self.queued[topic_partition] = state
        self.unfinished[batch.batch_id] = batch
        full = len(state.queue) > 1 or batch.size_bytes + RECORD_OVERHEAD_BYTES > self._batch_size
        return AppendResult(batch.batch_id, 0, full, True)

    def check_records(
        self,
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
        timestamp_ms: int,
    ) -> CheckedRecords:
        """`append`'s checks for a column of records (all with `timestamp_ms`), before any is
        appended: a wrong type or timestamp raises InvalidRecordError (record_checks.py) and a
        record that could never be sent RecordTooLargeError, so a failing `send_many` appends
        nothing."""
        records = check_columns(keys, values, headers, timestamp_ms)
        cumulative = records.cumulative_sizes
        if records.values:
            largest = max(map(sub, cumulative[1:], cumulative))
            self._check_record_size(largest)
            if BATCH_OVERHEAD_BYTES + largest > self.buffer_memory:
                self._refuse_for_memory(largest)  # raises: it could never fit
        return records

    def append_many(
        self,
        topic: str,
        partition: int,
        records: CheckedRecords,
        start: int,
        timestamp_ms: int,
        now_ms: int,
        abort_on_new_batch: bool = False,
    ) -> ManyAppended:
        """Append `records` from index `start` on to one partition, in order. Each batch takes
        whole runs of records (list slices) up to `batch.size`; a record that needs a new batch
        opens it through `append`'s own path. Stops at the first record refused (BUFFER_FULL,
        or NEW_BATCH_NEEDED with `abort_on_new_batch`): the caller resumes from `next_index`."""
        keys, values, headers, cumulative = records
        stop = len(values)
        index = start
        segments: list[tuple[int, int, int]] = []
        wake = False
        state = self.partitions.get((topic, partition))
        while index < stop:
            batch = state.open_batch if state is not None else None
            run_end = index
            if batch is not None:
                # Never negative: a batch holding one record larger than batch.size has no room.
                room = max(
                    0,
                    min(
                        self.buffer_memory - self.buffered_bytes,
                        self._batch_size - batch.size_bytes,
                    ),
                )
                run_end = bisect_right(cumulative, cumulative[index] + room, index, stop + 1) - 1
            if run_end == index:  # record `index` does not fit: memory, or a new batch
                record_bytes = cumulative[index + 1] - cumulative[index]
                if self.buffered_bytes + record_bytes > self.buffer_memory:
                    refusal = self._refuse_for_memory(record_bytes)
                    return ManyAppended(index, segments, refusal, wake)
                if abort_on_new_batch:
                    return ManyAppended(index, segments, AppendRefusal.NEW_BATCH_NEEDED, wake)
                result = self._append_to_new_batch(
                    topic,
                    partition,
                    keys[index],
                    values[index],
                    headers[index] if headers is not None else None,
                    timestamp_ms,
                    now_ms,
                    record_bytes,
                )
                if result.__class__ is AppendRefusal:
                    return ManyAppended(index, segments, result, wake)
                segments.append((result.batch_id, 0, 1))
                wake = True  # a new batch: its linger timer, and the old one closed
                state = self.partitions[(topic, partition)]
                index += 1
                continue
            assert batch is not None
            first = len(batch.values)
            batch.values += values[index:run_end]
            batch.keys += keys[index:run_end]
            batch.timestamps += repeat(timestamp_ms, run_end - index)
            if headers is not None:
                for position in range(index, run_end):
                    if headers[position]:
                        _append_headers(batch, first + position - index, headers[position])
                    elif batch.headers is not None:
                        batch.headers.append(())
            elif batch.headers is not None:
                batch.headers += repeat((), run_end - index)
            run_bytes = cumulative[run_end] - cumulative[index]
            batch.size_bytes += run_bytes
            self.buffered_bytes += run_bytes
            if segments and segments[-1][0] == batch.batch_id:  # the batch opened just above
                batch_id, segment_first, count = segments[-1]
                segments[-1] = (batch_id, segment_first, count + run_end - index)
            else:
                segments.append((batch.batch_id, first, run_end - index))
            index = run_end
        if state is not None and state.open_batch is not None:
            wake = wake or state.open_batch.size_bytes + RECORD_OVERHEAD_BYTES > self._batch_size
        return ManyAppended(index, segments, None, wake)

    def _check_record_size(self, record_bytes: int) -> None:
        batch_bytes = BATCH_OVERHEAD_BYTES + record_bytes
        if batch_bytes > self._max_request_size:
            raise RecordTooLargeError(
                f"The record is {batch_bytes} bytes in a batch of its own, which is larger than "
                f"max.request.size ({self._max_request_size}): raise max.request.size (and the "
                "topic's max.message.bytes) or send a smaller record"
            )

    def _refuse_for_memory(self, record_bytes: int) -> AppendRefusal:
        if BATCH_OVERHEAD_BYTES + record_bytes > self.buffer_memory:
            raise RecordTooLargeError(
                f"The record is {BATCH_OVERHEAD_BYTES + record_bytes} bytes in a batch of its "
                f"own, which is larger than buffer.memory ({self.buffer_memory})"
            )
        # Kafka's "exhausted" rule: while an append waits for memory, every batch is sendable.
        self.memory_waiting = True
        return AppendRefusal.BUFFER_FULL

    def sendable_at_ms(self, batch: ProducerBatch) -> int:
        """When linger lets `batch` go: at once (0) when closed or full, else linger.ms after
        its first record."""
        if (
            batch.state is not BatchState.OPEN
            or batch.size_bytes + RECORD_OVERHEAD_BYTES > self._batch_size
        ):
            return 0
        return batch.created_ms + self._linger_ms

    def begin_flush(self) -> int:
        """Make every batch sendable now, regardless of linger.ms, until flush_done(). Returns
        the flush's target: it is complete when is_flush_complete(target) says so."""
        self.flushes_in_progress += 1
        return self.next_batch_id - 1

    def is_flush_complete(self, target_batch_id: int) -> bool:
        """True when every batch that existed at begin_flush() has completed."""
        oldest = next(iter(self.unfinished), None)
        return oldest is None or oldest > target_batch_id

    def flush_done(self) -> None:
        assert self.flushes_in_progress > 0, "flush_done() without begin_flush()"
        self.flushes_in_progress -= 1

    def take_head(self, topic_partition: TopicPartition, state: PartitionState) -> ProducerBatch:
        """Remove the head of a partition's queue (it is being drained or expired)."""
        batch = state.queue.popleft()
        if not state.queue:
            del self.queued[topic_partition]
        if batch is state.open_batch:
            state.open_batch = None
        return batch

    def requeue(self, state: PartitionState, batch: ProducerBatch) -> None:
        state.requeue(batch)
        self.queued[(batch.topic, batch.partition)] = state

    def release(self, batch: ProducerBatch) -> None:
        """The batch is done: forget it and free its memory (a waiting append may now fit)."""
        del self.unfinished[batch.batch_id]
        self.buffered_bytes -= batch.size_bytes
        assert self.buffered_bytes >= 0
        self.memory_waiting = False

    def check_invariants(self) -> None:
        """Assert the structure of every partition's batches and the memory count."""
        unfinished: dict[int, ProducerBatch] = {}
        for topic_partition, state in self.partitions.items():
            queue_ids = [batch.batch_id for batch in state.queue]
            in_flight_ids = [batch.batch_id for batch in state.in_flight]
            assert queue_ids == sorted(queue_ids) and in_flight_ids == sorted(in_flight_ids)
            assert (topic_partition in self.queued) == bool(state.queue)
            if state.open_batch is not None:
                assert state.open_batch is state.queue[-1]
                assert state.open_batch.state is BatchState.OPEN
            for batch in state.queue:
                assert batch.state in (BatchState.OPEN, BatchState.QUEUED)
                assert (batch.state is BatchState.OPEN) == (batch is state.open_batch)
            for batch in state.in_flight:
                assert batch.state is BatchState.IN_FLIGHT
            for batch in (*state.queue, *state.in_flight):
                assert (batch.topic, batch.partition) == topic_partition
                unfinished[batch.batch_id] = batch
        assert unfinished.keys() == self.unfinished.keys()
        assert list(self.unfinished) == sorted(self.unfinished)
        assert self.buffered_bytes == sum(batch.size_bytes for batch in unfinished.values())
        assert self.buffered_bytes <= self.buffer_memory


def _append_headers(
    batch: ProducerBatch, index: int, headers: tuple[tuple[str, bytes | None], ...]
) -> None:
    if batch.headers is None:
        batch.headers = [()] * index
    batch.headers.append(headers)
