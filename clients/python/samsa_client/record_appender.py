"""The producer's appends: a record (or a column of records) into the accumulator, under the lock.

`Producer.send()` calls `append` on the caller's thread, `AsyncProducer.send()` on the loop; both
are the SDK's hottest path, so the appender does only what must be done per record: the
partition (the partitioner, sticky when keyless: KIP-480), one accumulator append, and the
`BatchOutcome` that every record of the batch shares (record_future.py). It never does I/O and
never wakes the driver itself: it says when the driver must be woken (a batch filled, a new batch
needs its linger timer, or linger.ms=0), and the facade wakes it. `lock` is the driver's
(producer_driver.py): the same lock guards the accumulator, the partitioner and the outcome
table wherever they are touched.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from samsa.client.accumulator import RecordAccumulator
from samsa.client.config import ProducerConfig
from samsa.client.errors import ProduceError
from samsa.client.partitioner import UNAVAILABLE, Partitioner
from samsa.client.record_batcher import AppendRefusal
from samsa.client.record_checks import CheckedRecords, as_bytes, checked_int
from samsa.client.record_future import BatchOutcome, BatchOutcomes
from samsa.client.transaction_manager import TransactionManager
from samsa.common.errors import ErrorCode

# The enum member, read once: on CPython 3.11 reading an Enum member off its class costs ~0.2 us,
# once per send() on its hottest line (append(): 3.69 -> 3.34 us per call on the development
# machine).
NEW_BATCH_NEEDED = AppendRefusal.NEW_BATCH_NEEDED


def now_ms() -> int:
    """Wall-clock milliseconds: record timestamps default to it, so the core runs on it too."""
    return time.time_ns() // 1_000_000


# What `append()` did: (outcome, record index, partition, wake). `wake`: the driver has something
# new to do. `outcome` None: buffer.memory is full; wait for completions, then append again to
# that partition (sticky=False). A plain tuple: it is built once per record.
Appended = tuple[BatchOutcome | None, int, int, bool]
# What `append_many()` did: (next record index, [(outcome, first record index in its batch,
# record count)], wake).
ManyOutcomes = tuple[int, list[tuple[BatchOutcome, int, int]], bool]


def checked_partition(topic: str, partition: object, count: int) -> int:
    """A partition a caller named: an int (InvalidRecordError otherwise) of the topic's."""
    number = checked_int("partition", partition)
    if not 0 <= number < count:
        raise_no_partition(topic, number, count)
    return number


def raise_no_partition(topic: str, partition: int, count: int) -> NoReturn:
    raise ProduceError(
        f"partition {partition} of {topic!r} does not exist (it has {count})",
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )


def raise_closed() -> NoReturn:
    raise ProduceError(
        "the producer is closed (or closing): no record is accepted once close() began",
        ErrorCode.INVALID_REQUEST,
    )


class RecordAppender:
    """Appends for the facades, from any thread (see the module docstring)."""

    def __init__(
        self,
        config: ProducerConfig,
        lock: threading.Lock,
        accumulator: RecordAccumulator,
        outcomes: BatchOutcomes,
        leaders: Callable[[], Mapping[tuple[str, int], int]],
        txn: TransactionManager | None = None,
    ) -> None:
        self.lock = lock
        self.accumulator = accumulator
        self._leaders = leaders
        # The partitions without a leader, per (topic, partition count), in the view of the
        # cluster `_leaders_seen` (ClusterMetadata swaps a new mapping in on each refresh).
        self._leaders_seen: Mapping[tuple[str, int], int] | None = None
        self._leaderless: dict[tuple[str, int], list[int]] = {}
        self.partitioner = Partitioner(
            random.Random(), ignore_keys=config.partitioner_ignore_keys, loads=self._loads
        )
        # Keyless records (or keys ignored) go to the sticky partition: one frame less per record.
        self._sticky_partition = self.partitioner.sticky.partition
        self._outcomes_by_batch_id = outcomes.by_batch_id  # read by append(), hot
        self._ignore_keys = config.partitioner_ignore_keys
        self._wake_every_record = config.linger_ms == 0
        # Set under `lock` when the facade's close() (or stop()) begins, and again when the
        # driver stops: a record appended after that (by another thread, a callback, or a send()
        # that waited for the memory the stop freed) would miss close()'s flush and fail at the
        # stop, or be queued where nothing sends it; it raises instead, as Kafka's producer
        # refuses a send() once close() began (IllegalStateException). What was appended
        # before is flushed by close(), within its timeout.
        self.closed = False
        # A transactional producer's state, checked again under `lock` at each append: a send()
        # checks it when called, then may wait (metadata, buffer.memory) while another thread
        # or task commits or aborts. begin_commit/begin_abort take `lock` too, so a record is
        # appended before the transaction's end starts (its flush covers it) or is refused, as
        # Kafka's append is (maybeAddPartition) — never sent outside, or into the next, one.
        self._txn = txn

    def _loads(self, topic: str, partition_count: int) -> list[int]:
        """Each partition's load for the sticky partitioner's next draw (partitioner.py): the
        accumulator's (its queue, or UNAVAILABLE when stalled), and UNAVAILABLE where the
        metadata knows no leader. Under the lock, once per draw."""
        leaders = self._leaders()
        if leaders is not self._leaders_seen:  # a refresh swapped the view in: look again
            self._leaders_seen = leaders
            self._leaderless.clear()
        leaderless = self._leaderless.get((topic, partition_count))
        if leaderless is None:
            leaderless = [p for p in range(partition_count) if (topic, p) not in leaders]
            self._leaderless[(topic, partition_count)] = leaderless
        loads = self.accumulator.partition_loads(topic, partition_count, now_ms())
        for partition in leaderless:
            loads[partition] = UNAVAILABLE
        return loads

    def append(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp: int,
        now: int,
        count: int,
    ) -> Appended:
        """Append one record (`partition` None: the partitioner picks, sticky when keyless).
        The SDK's hottest path: plain tuples, no extra calls (~2 us per record in all)."""
        sticky = partition is None and (key is None or self._ignore_keys)
        accumulator = self.accumulator
        lock = self.lock
        # acquire/release rather than `with`: ~0.25 us less per record on CPython 3.11, where
        # a lock's __enter__/__exit__ cost more than twice its acquire and release.
        lock.acquire()
        try:
            if self.closed:
                raise_closed()
            if self._txn is not None:
                self._txn.check_send()
            if sticky:
                partition = self._sticky_partition(topic, count)
            elif partition is None:
                if key.__class__ is not bytes:  # the partitioner hashes it: bytes only
                    key = as_bytes("key", key)
                partition = self.partitioner.partition(topic, key, count)
            result = accumulator.append(
                topic, partition, key, value, headers, timestamp, now, sticky
            )
            if result is NEW_BATCH_NEEDED:
                self.partitioner.on_batch_closed(topic, partition)
                partition = self._sticky_partition(topic, count)
                result = accumulator.append(
                    topic, partition, key, value, headers, timestamp, now, False
                )
            if result.__class__ is AppendRefusal:  # BUFFER_FULL
                return None, 0, partition, True
            batch_id, index, full, new_batch = result
            outcome = self._outcomes_by_batch_id.get(batch_id)
            if outcome is None:
                outcome = self._outcomes_by_batch_id[batch_id] = BatchOutcome()
        finally:
            lock.release()
        wake = full or new_batch or self._wake_every_record
        return outcome, index, partition, wake

    def append_many(
        self,
        topic: str,
        partition: int | None,
        records: CheckedRecords,
        start: int,
        timestamp: int,
        now: int,
        count: int,
    ) -> ManyOutcomes:
        """`append` for records [start:] of a `send_many` call bound for one partition, under
        one lock (`partition` None: keyless records, placed by the sticky partitioner as
        `append` places them one by one). Returns (next index, [(outcome, first, records)],
        wake);
        a next index short of the end means buffer.memory is full: wait, then call again."""
        accumulator = self.accumulator
        outcomes = self._outcomes_by_batch_id
        parts: list[tuple[BatchOutcome, int, int]] = []
        wake = self._wake_every_record
        end = len(records.values)
        with self.lock:
            if self.closed:
                raise_closed()
            if self._txn is not None:
                self._txn.check_send()
            while start < end:
                sticky = partition is None
                target = self.partitioner.partition(topic, None, count) if sticky else partition
                appended = accumulator.append_many(
                    topic, target, records, start, timestamp, now, sticky
                )
                for batch_id, first, record_count in appended.segments:
                    outcome = outcomes.get(batch_id)
                    if outcome is None:
                        outcome = outcomes[batch_id] = BatchOutcome()
                    parts.append((outcome, first, record_count))
                wake = wake or appended.wake
                start = appended.next_index
                if appended.refusal is not NEW_BATCH_NEEDED:
                    break
                # The sticky batch is full: `append`'s own dance moves the record that did not
                # fit to the next sticky partition, where it opens a batch.
                self.partitioner.on_batch_closed(topic, target)
                target = self.partitioner.partition(topic, None, count)
                headers = records.headers[start] if records.headers is not None else None
                result = accumulator.append(
                    topic,
                    target,
                    records.keys[start],
                    records.values[start],
                    headers,
                    timestamp,
                    now,
                    False,
                )
                if result.__class__ is AppendRefusal:  # BUFFER_FULL
                    break
                outcome = outcomes.get(result.batch_id)
                if outcome is None:
                    outcome = outcomes[result.batch_id] = BatchOutcome()
                parts.append((outcome, result.record_index, 1))
                wake = True
                start += 1
        return start, parts, wake
