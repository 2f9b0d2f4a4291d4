"""The producer driver: one asyncio task that alone owns drain -> send -> outcome for every broker.

Theory of operation. The accumulator (accumulator.py, a pure core) decides everything about
batches: where a record goes, when a batch is sendable, retries, ordering, expiry, sequences.
This module is its driver, the loop the accumulator's docstring describes, on `grpc.aio`:

- `appender.append()` (record_appender.py) is called by a facade on the caller's thread
  (`Producer`) or on the loop (`AsyncProducer`): partition choice and one accumulator append
  under `lock`, and a `BatchOutcome` shared by the batch's records. It never does I/O; the
  facade wakes the driver only when the append says there is something to send (a batch
  filled, a new batch needs its linger timer, or linger.ms=0).
- `_drain_and_send()` runs `ready()`, `drain()`s each ready broker into one Produce request and
  hands it to the sender (produce_sender.py), which puts it on that broker's long-lived
  ProduceStream (produce_stream.py) without awaiting. It is
  synchronous and only ever runs on the loop — from the task `_run` (timers, answers) or from
  `wake()` (a facade's append) — so the order in which the accumulator drained one partition's
  batches is the order they reach the wire (test_client_producer_order.py shows the two-driver
  design this replaced reordering them).
- Answers arrive on each stream's reader task, on the same loop; the sender feeds them back to
  the accumulator under `lock`, and the driver settles the batch outcomes. User callbacks go to the
  facade's callback runner (a callback thread, or `loop.call_soon`), never run here, so a slow
  callback stalls no answer.
- Idempotence: when `ready()` asks for a producer id, nothing is in flight; producer_ids.py
  bumps the epoch locally (KIP-360), or calls InitProducerId for the first id, when the epoch
  would pass int16, or after INVALID_PRODUCER_EPOCH.
- Retriable errors (leader moved, broker unreachable, timeouts) go back to the accumulator, which
  retries with backoff within `delivery.timeout.ms`, or at once to a new leader the answer names
  (KIP-951; produce_sender.py). Metadata is read with sync gRPC (cluster_metadata.py), so
  refreshes run in a worker thread (`asyncio.to_thread`) while the loop keeps serving answers.

`lock` guards the accumulator, the partitioner and the outcome table; it is held for pure calls
only, never across I/O or an await.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
from collections.abc import Callable, Sequence

from samsa.client.accumulator import ReadyResult, RecordAccumulator
from samsa.client.channels import AioChannels
from samsa.client.client_tls import ClientSecurity
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config import ProducerConfig
from samsa.client.errors import KafkaError
from samsa.client.produce_sender import ProduceSender
from samsa.client.producer_batch import Completed
from samsa.client.producer_ids import ProducerIds
from samsa.client.record_appender import RecordAppender, now_ms
from samsa.client.record_future import BatchOutcomes
from samsa.client.transaction_client import TransactionClient
from samsa.client.transaction_driver import TransactionDriver
from samsa.client.transaction_manager import TransactionManager
from samsa.common.errors import ErrorCode, is_retriable
from samsa.v1 import broker_pb2_grpc

log = logging.getLogger(__name__)

# The longest the driver sleeps with nothing scheduled: bounds how late stream timeouts are seen.
IDLE_WAIT_S = 0.5
# After an unknown leader: how soon to look again once metadata was refreshed.
UNKNOWN_LEADER_WAIT_S = 0.05
# A flush re-checks at least this often (a settlement also wakes it).
FLUSH_POLL_S = 0.1

Callbacks = list[Callable[[], None]]


class ProducerDriver:
    """Runs on one event loop; `append`, `wake_threadsafe` and `lock` are for other threads."""

    def __init__(
        self,
        config: ProducerConfig,
        metadata: ClusterMetadata,
        run_callbacks: Callable[[Callbacks], None],
        on_completions: Callable[[], None],
        security: ClientSecurity | None = None,  # TLS, SASL (client_tls.py); None: PLAINTEXT
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.lock = threading.Lock()
        self.accumulator = RecordAccumulator(config, random.Random())
        self._run_callbacks = run_callbacks
        self._on_completions = on_completions
        self._outcomes = BatchOutcomes()
        self._channels = AioChannels(security)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        # Set on the loop whenever batches settle: what flush() waits on between its checks.
        self._settled: asyncio.Event | None = None
        self._wake_scheduled = False
        # When the sleeping task will look at its timers by itself (now_ms() clock); None while
        # it runs a turn. wake() rouses it only for something due sooner than that.
        self._turn_due_ms: int | None = None
        self._stopping = False
        self._draining = False  # inside _drain_and_send (asserted: never nested)
        # Records whose batch failed for good (Kafka's record-error-total), counted per batch.
        self.failed_records = 0
        self._producer_ids = ProducerIds(metadata, self._stub, config.request_timeout_ms / 1000)
        # A topic with a batch unfinished is not idle: metadata.max.idle.ms counts from its last
        # drain, and a batch in flight longer (request.timeout.ms above it) would be retried
        # after its topic was forgotten, without its topic id (KIP-516).
        metadata.keep(self._unfinished_topics)
        self._task: asyncio.Task[None] | None = None
        # Transactions (transactional.id set): the state machine and the coordinator calls. The
        # partitions join the transaction at their leaders (add_partitions_to_txn, KIP-890 part
        # 2): no AddPartitionsToTxn of ours, and no batch waits for one.
        self.txn: TransactionManager | None = None
        self._txn_client: TransactionClient | None = None
        self.transactions: TransactionDriver | None = None
        if config.transactional_id is not None:
            self.txn = TransactionManager(config.transactional_id)
            self._txn_client = TransactionClient(
                self._channels,
                lambda: list(metadata.bootstrap),
                config.transactional_id,
                config.transaction_timeout_ms,
            )
            self.transactions = TransactionDriver(
                self.txn,
                self._txn_client,
                self.lock,
                self.accumulator,
                self.flush,
                self.abort_queued,
            )
        self.appender = RecordAppender(
            config, self.lock, self.accumulator, self._outcomes, lambda: metadata.leaders, self.txn
        )
        self._sender = ProduceSender(
            config,
            metadata,
            self.lock,
            self.accumulator,
            self._channels,
            self._outcomes,
            self.txn,
            on_fenced=self._producer_ids.on_fenced,
            settle=self._settle,
            wake_task=self._wake_task,
        )

    # --- any thread -------------------------------------------------------------------------------

    def wake_threadsafe(self) -> None:
        """Wake the driver from another thread; one loop hand-off however many callers ask.
        Once the producer closed its loop there is no driver to wake, nor anything to send: its
        stop settled every record, and refuses appends (a flush() after close() returns, as
        Kafka's does, and a send() that appended just before the stop holds a failed future)."""
        loop = self._loop
        if self._wake_scheduled or loop is None:
            return
        self._wake_scheduled = True
        try:
            loop.call_soon_threadsafe(self.wake)
        except RuntimeError:
            if not loop.is_closed():
                raise

    # --- the loop ---------------------------------------------------------------------------------

    def wake(self) -> None:
        """A facade appended something to send: drain and send at once (on the loop, so still
        the only drainer). The task takes a turn only if that left it something to do sooner
        than its own timer: a caller waiting on each record pays for one drain, not two."""
        self._wake_scheduled = False
        if self._wake is None or self._stopping:
            return
        try:
            ready = self._drain_and_send()
        except Exception:
            log.exception("producer driver error")  # the task's turn tries again
            self._wake.set()
            return
        due = self._turn_due_ms
        if (
            due is None
            or ready.producer_id_required
            or ready.unknown_leader_topics
            or (ready.next_check_ms is not None and ready.next_check_ms < due)
            or self.metadata.needs_refresh()
        ):
            self._wake.set()

    def _wake_task(self) -> None:
        """An outcome came back: the task's next turn sends what it allows (never a drain from
        here: this may run inside `_drain_and_send`, whose drained requests must go first)."""
        assert self._wake is not None
        self._wake.set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()
        self._task = self._loop.create_task(self._run(), name="samsa-producer-driver")

    async def stop(self) -> None:
        """End the loop, fail what is still unsettled, close the streams and channels."""
        assert self._task is not None and self._wake is not None, "stop() before start()"
        self._stopping = True
        self._wake.set()
        await self._task
        await self._sender.close()
        with self.lock:
            self.appender.closed = True  # no record is queued after this abort
            completed = self.accumulator.abort_all(
                ErrorCode.REQUEST_TIMED_OUT, "the producer was closed before delivery"
            )
        self._settle(completed)
        if self._txn_client is not None:
            await self._txn_client.close()
        await self._channels.close()

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            self._wake.clear()
            try:
                wait_s = await self._turn()
            except Exception:
                log.exception("producer driver error")
                wait_s = 0.1
            if wait_s > 0 and not self._stopping:
                self._turn_due_ms = now_ms() + int(wait_s * 1000)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):  # no task per turn, unlike wait_for
                        await self._wake.wait()
                self._turn_due_ms = None

    async def _turn(self) -> float:
        """One turn: drain every ready broker and send; returns how long to sleep unless woken."""
        metadata = self.metadata
        if metadata.needs_refresh():
            await self._refresh(())
        ready = self._drain_and_send()
        if ready.producer_id_required and self.accumulator.has_unfinished():
            renewed = await self._renew_producer_id()
            return 0.0 if renewed else self.config.retry_backoff_ms / 1000
        self._sender.expire()
        if ready.unknown_leader_topics:
            await self._refresh(ready.unknown_leader_topics)
            return UNKNOWN_LEADER_WAIT_S
        if ready.next_check_ms is None:
            return IDLE_WAIT_S
        return min(IDLE_WAIT_S, max(0.0, (ready.next_check_ms - now_ms()) / 1000))

    def _drain_and_send(self) -> ReadyResult:
        """Expire, drain every ready broker and hand each request to its stream. Synchronous,
        and only ever run on the loop: no await from drain to send, so wire order = drain
        order, whichever of the task and `wake()` runs it. Batches are encoded after the lock
        is released (accumulator.encode)."""
        assert not self._draining, "a drain inside a drain would reorder requests"
        self._draining = True
        try:
            accumulator = self.accumulator
            with self.lock:
                now = now_ms()
                expired = accumulator.expire(now)
                ready = accumulator.ready(now, self.metadata.leaders)
                requests = [
                    (node, accumulator.drain(node, self.config.max_request_size, now))
                    for node in ready.ready_nodes
                    if self._sender.has_room(node)
                ]
                if self.txn is not None and any(batches for _, batches in requests):
                    self.txn.on_started()
            if requests:  # their topics stay in the metadata (metadata.max.idle.ms): per drain
                self.metadata.use({b.topic for _, batches in requests for b in batches}, now)
            self._settle(expired)
            for node, batches in requests:
                if batches:
                    unencodable = accumulator.encode(batches)
                    if unencodable:
                        self._sender.fail_unencodable(unencodable)
                        batches = [batch for batch in batches if batch.encoded is not None]
                    if batches:
                        self._sender.send(node, batches)
        finally:
            self._draining = False
        return ready

    async def _renew_producer_id(self) -> bool:
        """ready() asks for a (new) producer id and epoch, with nothing in flight
        (producer_ids.py). False when that failed: the caller waits retry.backoff.ms and asks
        again; a non-retriable failure fails the queued batches at once. A transactional
        producer's identity comes only from InitTransactions and EndTxn, and it needs a new one
        only after a batch of the transaction failed for good: the transaction can then only
        abort, so what waits behind that batch fails now (Kafka's abortUndrainedBatches), not at
        delivery.timeout.ms, which a flush() or commit_transaction() would wait out."""
        if self.txn is not None:
            self.abort_queued(
                "not sent: an earlier batch of this transaction failed, so it can only abort "
                "(call abort_transaction())"
            )
            return False
        identity = await self._producer_ids.next_identity(*self.accumulator.producer_identity)
        code = identity.error_code
        if code is not ErrorCode.NONE:
            log.warning("InitProducerId failed: %s %s", code.name, identity.error_message)
            if not is_retriable(code):
                with self.lock:
                    completed = self.accumulator.abort_all(
                        code, f"InitProducerId: {identity.error_message}"
                    )
                self._settle(completed)
            return False
        with self.lock:
            self.accumulator.set_producer_id(identity.producer_id, identity.producer_epoch)
        return True

    async def flush(self, timeout_s: float | None) -> None:
        """On the loop: send everything buffered now and wait until every record sent so far is
        settled (AsyncProducer.flush, and the transaction ends of both facades). Raises
        TimeoutError after `timeout_s` (None: no limit)."""
        assert self._loop is not None and self._settled is not None, "flush() before start()"
        deadline = None if timeout_s is None else self._loop.time() + timeout_s
        with self.lock:
            target = self.accumulator.begin_flush()
        try:
            self.wake()
            while True:
                with self.lock:
                    if self.accumulator.is_flush_complete(target) and self.settled_through(target):
                        return
                remaining = None if deadline is None else deadline - self._loop.time()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"flush did not complete within {timeout_s} s")
                # Batches settle only on this loop, so none can settle between the check above
                # and this clear: the wait below misses no settlement.
                self._settled.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(
                        FLUSH_POLL_S if remaining is None else min(remaining, FLUSH_POLL_S)
                    ):
                        await self._settled.wait()
        finally:
            with self.lock:
                self.accumulator.flush_done()

    # --- transactions (transaction_driver.py) ---------------------------------------------------

    def transaction_driver(self) -> TransactionDriver:
        """The transactional calls' driver (the facades call it directly)."""
        assert self.transactions is not None, "no transactional.id"
        return self.transactions

    def abort_queued(self, message: str) -> None:
        with self.lock:
            completed = self.accumulator.abort_queued(ErrorCode.INVALID_TXN_STATE, message)
        self._settle(completed)

    def _stub(self, endpoint: str) -> broker_pb2_grpc.BrokerServiceStub:
        return broker_pb2_grpc.BrokerServiceStub(self._channels.get(endpoint))

    def _unfinished_topics(self) -> set[str]:
        """The metadata's refresh asks it, on a thread holding no lock of ours."""
        with self.lock:
            return self.accumulator.unfinished_topics()

    async def _refresh(self, topics: Sequence[str] | frozenset[str]) -> None:
        try:
            await asyncio.to_thread(self.metadata.refresh, topics)
        except KafkaError as error:
            log.warning("metadata refresh failed: %s", error)

    def settled_through(self, batch_id: int) -> bool:
        """Whether the outcome (the futures) of every batch up to `batch_id` is settled. A batch
        leaves the accumulator under the lock and is settled just after, outside it: a flush
        waits for both, so no future it covers is still pending when it returns."""
        try:
            oldest = next(iter(self._outcomes.by_batch_id), None)
        except RuntimeError:  # the loop thread changed the table meanwhile: look again later
            return False
        return oldest is None or oldest > batch_id

    def _settle(self, completed: list[Completed]) -> None:
        """Settle the outcomes of completed batches; user callbacks go to the runner."""
        if not completed:
            return
        self.failed_records += sum(
            done.record_count for done in completed if done.error_code is not ErrorCode.NONE
        )
        if self.txn is not None:
            for done in completed:
                if done.error_code is not ErrorCode.NONE and self.txn.in_transaction:
                    error = KafkaError(
                        f"a batch of {done.topic}-{done.partition} failed: {done.error_message}",
                        done.error_code,
                    )
                    with self.lock:
                        self.txn.on_error(error)
        callbacks = self._outcomes.settle(completed)
        if callbacks:
            self._run_callbacks(callbacks)
        self._on_completions()
        if self._settled is not None:
            self._settled.set()
