"""The Producer: a sync facade over the producer driver, which runs on one background loop thread.

Theory of operation. Everything about batches is decided by the accumulator (a pure core), and
everything about the network by the driver (producer_driver.py): one asyncio task on `grpc.aio`
that alone drains, sends and feeds outcomes back, so one partition's batches reach the wire in
the order they were drained. This facade adds three threads' worth of plumbing and no rule:

- `send()` runs on the caller's thread: partition count from metadata (fetched, blocking, the
  first time), one append under the driver's lock, and a `RecordFuture` sharing its batch's
  outcome (record_future.py). It hands nothing to the loop unless the driver must be woken (a
  batch filled, a new batch needs its linger timer, or linger.ms=0), and even then at most one
  `call_soon_threadsafe` is pending at a time; the woken driver drains and sends at once.
- The loop thread runs the driver (and the gRPC streams). Its metadata refreshes run on a worker
  thread; close() cancels one under way rather than close the channel under it (channels.py).
- The callback thread runs `add_done_callback` callbacks, in settlement order, so a slow callback
  delays other callbacks but never an answer, a send or a retry.

Why a sync facade over asyncio: DESIGN §12 measured a sync caller over a grpc.aio stream on a
loop thread nearly as fast as sync gRPC with a reader thread (~0.1 ms more at p50), and an
asyncio caller faster. One driver buys ordering and simplicity; `AsyncProducer` runs the same
driver on the caller's own loop, with no thread hand-off at all.

Idempotence is on by default, as in Kafka >= 3.0 (config.py turns it off when acks is not all
and enable.idempotence was not set): a retried batch is written once and in order.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from samsa.client import fork_safety
from samsa.client.channels import Channels, tracing_configured
from samsa.client.client_tls import client_security
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config import ProducerConfig
from samsa.client.errors import AuthorizationError, ProduceError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupMetadata
from samsa.client.partition_wait import partition_count_showing
from samsa.client.partitioner import partition_groups
from samsa.client.producer_driver import ProducerDriver
from samsa.client.record_appender import checked_partition, now_ms, raise_closed
from samsa.client.record_checks import CheckedRecords, checked_int, checked_partitions_column
from samsa.client.record_future import BatchOutcome, CallbackThread, RecordFuture, RecordsFuture
from samsa.client.record_tracing import headers_column_with_traceparent, headers_with_traceparent
from samsa.client.timeouts import checked_timeout
from samsa.client.transaction_admin import PreparedTransaction
from samsa.client.transaction_driver import group_identity, transactions_of
from samsa.client.transaction_manager import TransactionManager
from samsa.common import event_loops
from samsa.common.errors import ErrorCode

log = logging.getLogger(__name__)

# How long close() waits for the driver to stop and the threads to end.
STOP_TIMEOUT_S = 5.0
# Waits for memory and flushes re-check at least this often (a completion also wakes them).
WAIT_POLL_S = 0.1
# send_many() checks, places and appends records this many at a time: bounds the lists it builds
# and how long it holds the driver's lock (one partition's share of a chunk, ~1 ms).
SEND_MANY_CHUNK_RECORDS = 8192


class Producer:
    """Kafka's producer, with Kafka's configuration keys (see config.py)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = ProducerConfig.from_dict(config)
        self._channels = Channels(security=client_security(config))  # files read once
        self._metadata = ClusterMetadata(
            self.config.bootstrap_servers, self._channels, self.config.metadata_max_idle_ms
        )
        self._callbacks = CallbackThread(STOP_TIMEOUT_S)
        self._driver = ProducerDriver(
            self.config,
            self._metadata,
            self._callbacks.submit,
            self._notify_completions,
            self._channels.security,
        )
        self._append = self._driver.appender.append  # send() is the hot path: one lookup less
        self._txn = self._driver.txn  # None unless transactional.id is set
        # Completions free memory and end flushes; waiters sleep on the driver's lock.
        self._space = threading.Condition(self._driver.lock)
        self._closed = False
        # Read once: with no tracer provider, send() does no tracing work (record_tracing.py).
        self._tracing = tracing_configured()
        self._loop = event_loops.new_thread_loop("samsa-producer")
        run = self._loop.run_forever
        self._loop_thread = threading.Thread(target=run, name="samsa-producer", daemon=True)
        self._loop_thread.start()
        self._forked = False  # in a process forked after it was made (fork_safety.py)
        fork_safety.track(self)
        asyncio.run_coroutine_threadsafe(self._driver.start(), self._loop).result()

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordFuture:
        """Queue one record; the future says where it was written (or why it was not). Blocks
        at most max.block.ms in all, waiting for the topic's metadata and then for memory."""
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        try:
            now, count = self._before_send(topic, deadline)
        except AuthorizationError as refused:  # a failed future, as Kafka's send()
            return RecordFuture(BatchOutcome.refused(refused), 0, topic, partition or -1, -1)
        if self._tracing:
            headers = headers_with_traceparent(headers)
        if timestamp is None:
            timestamp = now
        if partition is not None:
            partition = checked_int("partition", partition)
            if partition >= count:  # added since our metadata? (Kafka's waitOnMetadata)
                wait = partition_count_showing  # refreshes until max.block.ms
                count = wait(self._metadata, topic, (partition,), count, deadline)
            partition = checked_partition(topic, partition, count)
        outcome, index, partition, wake = self._append(
            topic, partition, key, value, headers, timestamp, now, count
        )
        while outcome is None:
            self._wait_for_memory(deadline)
            outcome, index, partition, wake = self._append(
                topic, partition, key, value, headers, timestamp, now_ms(), count
            )
        if wake:
            self._driver.wake_threadsafe()
        return RecordFuture(outcome, index, topic, partition, timestamp)

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
        partitions: Sequence[int | None] | None = None,
        timestamp: int | None = None,
    ) -> RecordsFuture:
        """Queue many records of one topic (columns: record i is values[i], keys[i], ...): each
        goes where send() would put it, each partition's in the order given, with send()'s
        batching, idempotence and transaction rules, but column at a time (keys hashed
        together, whole runs appended to a batch) and one future for them all. A bad record
        raises before any is queued; buffer.memory staying full for max.block.ms raises with
        the records before it queued (the first wait shares max.block.ms with the metadata
        wait, as one send() does; each record appended since starts it anew). A topic the ACLs
        refuse fails every record of the future (AuthorizationError), as send()'s future."""
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        try:
            now, count = self._before_send(topic, deadline)
        except AuthorizationError as refused:  # a bad record still raises first
            stamp = now_ms() if timestamp is None else timestamp
            self._driver.accumulator.check_records(keys, values, headers, stamp)
            if partitions is not None:
                checked_partitions_column(partitions, len(values))
            return RecordsFuture.refused(refused, len(values))
        if timestamp is None:
            timestamp = now
        if partitions is not None:
            named = checked_partitions_column(partitions, len(values))
            wanted = [p for p in named if p is not None and p >= count]
            count = partition_count_showing(self._metadata, topic, wanted, count, deadline)
            partitions = [None if p is None else checked_partition(topic, p, count) for p in named]
        if self._tracing:
            headers = headers_column_with_traceparent(headers, len(values))
        records = self._driver.accumulator.check_records(keys, values, headers, timestamp)
        future = RecordsFuture()
        for start in range(0, len(values), SEND_MANY_CHUNK_RECORDS):
            stop = start + SEND_MANY_CHUNK_RECORDS
            chunk_partitions = None if partitions is None else partitions[start:stop]
            chunk = records.slice(start, stop)
            self._send_chunk(topic, chunk, chunk_partitions, timestamp, count, future, deadline)
        return future

    def _send_chunk(
        self,
        topic: str,
        records: CheckedRecords,
        partitions: Sequence[int | None] | None,
        timestamp: int,
        count: int,
        future: RecordsFuture,
        call_deadline: float,
    ) -> None:
        """send_many's records, a bounded chunk at a time (the driver's lock is held per
        partition of a chunk, and the driver woken per chunk). A wait for memory before any
        record of the call was appended ends by `call_deadline` (max.block.ms from the call,
        its metadata wait included); one after progress starts max.block.ms anew."""
        groups = partition_groups(
            records.keys, partitions, count, ignore_keys=self.config.partitioner_ignore_keys
        )
        wake = False
        for partition, indexes in groups:
            share = records if indexes is None else records.select(indexes)
            start, stuck_at, deadline = 0, -1, call_deadline
            while True:
                start, parts, woke = self._driver.appender.append_many(
                    topic, partition, share, start, timestamp, now_ms(), count
                )
                future.add(parts)
                wake = wake or woke
                if start == len(share.values):
                    break
                if start != stuck_at:
                    stuck_at = start
                    if future.record_count:  # progress since the call began: max.block.ms anew
                        deadline = time.monotonic() + self.config.max_block_ms / 1000
                self._wait_for_memory(deadline)
        if wake:
            self._driver.wake_threadsafe()

    def _before_send(self, topic: str, deadline: float) -> tuple[int, int]:
        """send()'s and send_many()'s checks: (now in ms, the topic's partition count). An
        unknown topic's metadata is waited for until `deadline` (time.monotonic()): the
        call's max.block.ms, which a wait for memory then gets only the rest of (Kafka's
        producer blocks for max.block.ms in all, metadata and memory together)."""
        self._check_open()
        if self._txn is not None:
            self._txn.check_send()
        now = now_ms()
        count = self._metadata.partition_counts.get(topic)
        if count is None:
            remaining_s = max(0.0, deadline - time.monotonic())
            count = self._metadata.partition_count(topic, remaining_s)
        return now, count

    def _wait_for_memory(self, deadline: float) -> None:
        """An append found buffer.memory full: wait a little for completions to free some (the
        caller then appends again), or raise once `deadline` (time.monotonic()) has passed."""
        self._driver.wake_threadsafe()  # lingering batches are sendable while we wait
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ProduceError(
                f"buffer.memory ({self.config.buffer_memory} bytes) stayed full until "
                f"max.block.ms ({self.config.max_block_ms} ms, for metadata and memory "
                "together) had passed: the cluster is slower than the producer",
                ErrorCode.REQUEST_TIMED_OUT,
            )
        with self._space:
            self._space.wait(min(remaining, WAIT_POLL_S))

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until every record sent so far is settled:
        up to `timeout` seconds (>= 0, else ValueError; None: no limit), then TimeoutError."""
        if self._forked:
            raise fork_safety.forked_error("Producer")
        deadline = None if timeout is None else time.monotonic() + checked_timeout(timeout)
        accumulator = self._driver.accumulator
        with self._space:
            target = accumulator.begin_flush()
        try:
            self._driver.wake_threadsafe()
            with self._space:
                while not (
                    accumulator.is_flush_complete(target) and self._driver.settled_through(target)
                ):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"flush did not complete within {timeout} s")
                    wait_s = WAIT_POLL_S if remaining is None else min(remaining, WAIT_POLL_S)
                    self._space.wait(wait_s)
        finally:
            with self._space:
                accumulator.flush_done()

    # --- transactions (confluent-kafka's names) ---------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get this transactional.id's producer id and epoch from its coordinator, fencing any
        older instance (whose open transaction is aborted first). Call once, before the first
        begin_transaction()."""
        txn = self._transactions()
        with self._space:
            txn.check_init()
        timeout_s = self._timeout_s(timeout)
        self._on_loop(self._driver.transaction_driver().init(timeout_s), timeout_s)

    def begin_transaction(self) -> None:
        """Open a transaction: every send() until commit or abort belongs to it."""
        txn = self._transactions()
        with self._space:
            txn.begin()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        group: str | GroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit the group's consumed `offsets` ((topic, partition) -> next offset to read, or
        an OffsetAndMetadata also naming the last record's leader epoch) in the transaction:
        they take effect if and only if it commits. Pass the consumer's `group_metadata()`: its
        member id and epoch prove it still owns the partitions (KIP-447), so a zombie's
        transaction cannot commit them. A group id alone is for a consumer outside the group
        protocol (assign() with a group.id)."""
        self._transactions().check_send()
        timeout_s, calls = self._timeout_s(timeout), self._driver.transaction_driver()
        self._on_loop(
            calls.send_offsets(dict(offsets), *group_identity(group), timeout_s), timeout_s
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send everything of the transaction, then commit it. Raises the first failure of the
        transaction (then call abort_transaction()), or, once fenced, the fencing error. A
        timeout (TimeoutError, or a retriable KafkaError from the coordinator) leaves the commit
        in progress: call commit_transaction() again for its outcome."""
        timeout_s = self._timeout_s(timeout)  # checked before the state moves
        txn = self._transactions()
        with self._space:
            txn.begin_commit()
        # The flush and EndTxn in one hand-over to the loop (TransactionDriver.commit).
        self._on_loop(self._driver.transaction_driver().commit(timeout_s), 2 * timeout_s)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Send everything of the open transaction and leave it open for another process to
        complete (`Admin.complete_transaction`, KIP-939's idea: the Spark sink's tasks prepare,
        its driver commits). send() is refused from the call on. Raises the transaction's first
        failure (then abort it); after a timeout, call it again or abort. Then close the
        producer. Not completed in transaction.timeout.ms, the coordinator aborts it."""
        timeout_s = self._timeout_s(timeout)  # checked before the state moves
        txn = self._transactions()
        with self._space:
            txn.begin_prepare()
        self.flush(timeout_s)
        with self._space:
            txn.begin_prepare()  # raises if a batch of the transaction failed meanwhile
            producer_id, producer_epoch = self._driver.accumulator.producer_identity
            txn.on_prepared()
        return PreparedTransaction(txn.transactional_id, producer_id, producer_epoch)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop what was not sent, wait for what was, and abort: read_committed consumers never
        see any record of the transaction."""
        timeout_s = self._timeout_s(timeout)  # checked before the state moves
        txn = self._transactions()
        with self._space:
            txn.begin_abort()
        self._on_loop(self._driver.transaction_driver().abort(timeout_s), 2 * timeout_s)

    def _transactions(self) -> TransactionManager:
        self._check_open()
        return transactions_of(self._txn)

    def _check_open(self) -> None:
        if self._forked:
            raise fork_safety.forked_error("Producer")
        if self._closed or self._driver.appender.closed:
            raise_closed()

    def _timeout_s(self, timeout: float | None) -> float:
        return self.config.max_block_ms / 1000 if timeout is None else checked_timeout(timeout)

    def _on_loop(self, coroutine: Coroutine[Any, Any, None], timeout_s: float) -> None:
        """Run one of the driver's coroutines on its loop; its own deadlines end by `timeout_s`
        (capped where a thread's wait overflows: max.block.ms may be Long.MAX_VALUE)."""
        wait_s = min(timeout_s + 5, threading.TIMEOUT_MAX)
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(wait_s)

    def close(self, timeout: float | None = None) -> None:
        """Abort a transaction still open (as Kafka's producer does), flush, then stop the
        driver. Records still unsettled after `timeout` fail (ProduceError, REQUEST_TIMED_OUT)
        and close() returns without an error, as Kafka's close(Duration) does (a warning is
        logged). A send() once close() began raises (another thread's, a callback's): only
        what was sent before is delivered. A close() on another thread at the same time
        flushes too (within its own timeout) but leaves the stop to the first."""
        self._timeout_s(timeout)  # a bad one is refused before anything is closed
        if self._closed:
            return
        with self._space:  # from now on send() raises: close() flushes only what came before
            self._driver.appender.closed = True
        try:
            if self._txn is not None:  # end the transaction if close() must (end_at_close)
                calls = self._driver.transaction_driver()
                calls.end_at_close(self._on_loop, self._timeout_s(timeout))
            self.flush(timeout)
        except TimeoutError:  # Kafka's close(Duration): the unsettled records fail, no error
            log.warning("close(): records not delivered within %s s fail", timeout)
        finally:
            with self._space:  # one stop: a second would find the loop stopped or closed
                stopping, self._closed = not self._closed, True
            if stopping:
                self._stop()

    def _stop(self) -> None:
        """close()'s end, run once: stop the driver, the loop and the threads."""
        self._metadata.stop_waiting()
        stopped = asyncio.run_coroutine_threadsafe(self._stop_on_loop(), self._loop)
        try:
            stopped.result(STOP_TIMEOUT_S)
        except TimeoutError:  # closed all the same, as Kafka's close() is: no error to raise
            log.warning("the producer's driver did not stop in %s s", STOP_TIMEOUT_S)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(STOP_TIMEOUT_S)
            if not self._loop.is_running():
                self._loop.close()
            self._callbacks.stop()
            # A refresh still in flight (a send() waiting for metadata, the driver's worker
            # thread) is cancelled, not closed under; the channels close once it left.
            self._channels.close()

    async def _stop_on_loop(self) -> None:
        """Stop the driver, then finish what asyncio.run() finishes before its loop closes (the
        streams' request generators, the metadata refreshes' worker threads), so that nothing
        of the producer is left to run on a closed loop."""
        await self._driver.stop()
        await self._loop.shutdown_asyncgens()
        await self._loop.shutdown_default_executor()

    @property
    def batch_retries(self) -> int:
        """How many times a batch was sent again after a failed attempt (all partitions)."""
        return self._driver.accumulator.batch_retries

    @property
    def batch_splits(self) -> int:
        """How many times the broker found a batch too large and it was split (Kafka's
        batch-split-total): a topic's max.message.bytes below batch.size shows here."""
        return self._driver.accumulator.batch_splits

    @property
    def failed_records(self) -> int:
        """How many records failed for good, their futures settled with an error (Kafka's
        record-error-total): counted per batch, so an application that sends without keeping
        or calling back on every future still learns that some were lost."""
        return self._driver.failed_records

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _notify_completions(self) -> None:
        """On the loop: batches completed, so memory was freed and flushes may be done."""
        with self._space:
            self._space.notify_all()
