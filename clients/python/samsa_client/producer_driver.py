"""The producer driver: one asyncio task that alone owns drain -> send -> outcome for every broker.

Theory of operation. The accumulator (accumulator.py, a pure core) decides everything about
batches: where a record goes, when a batch is sendable, retries, ordering, expiry, sequences.
This module is its driver, the loop the accumulator's docstring describes, on `grpc.aio`:

- `append()` is called by a facade on the caller's thread (`Producer`) or on the loop
  (`AsyncProducer`): partition choice and one accumulator append under `lock`, and a
  `BatchOutcome` shared by the batch's records. It never does I/O; the facade wakes the driver
  only when the append says there is something to send (a batch filled, a new batch needs its
  linger timer, or linger.ms=0).
- `_drain_and_send()` runs `ready()`, `drain()`s each ready broker into one Produce request and
  hands it to that broker's long-lived ProduceStream (produce_stream.py) without awaiting. It is
  synchronous and only ever runs on the loop — from the task `_run` (timers, answers) or from
  `wake()` (a facade's append) — so the order in which the accumulator drained one partition's
  batches is the order they reach the wire (test_client_producer_order.py shows the two-driver
  design this replaced reordering them).
- Answers arrive on each stream's reader task, on the same loop; their outcomes go back to the
  accumulator under `lock` and settle the batch outcomes. User callbacks are handed to the
  facade's callback runner (a callback thread, or `loop.call_soon`), never run here, so a slow
  callback stalls no answer.
- Idempotence: when `ready()` asks for a producer id, nothing is in flight; producer_ids.py
  bumps the epoch locally (KIP-360), or calls InitProducerId for the first id, when the epoch
  would pass int16, or after INVALID_PRODUCER_EPOCH.
- Retriable errors (leader moved, broker unreachable, timeouts) go back to the accumulator, which
  retries with backoff within `delivery.timeout.ms`; NOT_LEADER_OR_FOLLOWER and the like also mark
  the metadata stale, unless the answer names a newer leader (KIP-951): then that partition's
  leader is updated at once and the batch retried to it with no backoff. Metadata is read with
  sync gRPC (cluster_metadata.py), so refreshes run in a worker thread (`asyncio.to_thread`)
  while the loop keeps serving answers.

`lock` guards the accumulator, the partitioner and the outcome table; it is held for pure calls
only, never across I/O or an await.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

import grpc

from samsa.client.accumulator import ReadyResult, RecordAccumulator
from samsa.client.channels import AioChannels, tracing_configured
from samsa.client.cluster_metadata import (
    NEW_LEADER_ERRORS,
    STALE_METADATA_ERRORS,
    ClusterMetadata,
)
from samsa.client.config import ProducerConfig
from samsa.client.errors import KafkaError, ProduceError
from samsa.client.partitioner import Partitioner
from samsa.client.produce_message import produce_request
from samsa.client.produce_stream import (
    ByPartition,
    ProduceStream,
    raw_produce_stream,
    stream_error_outcome,
)
from samsa.client.producer_batch import NO_OFFSET, Completed, ProducerBatch
from samsa.client.producer_ids import ProducerIds
from samsa.client.record_batcher import AppendRefusal
from samsa.client.record_checks import CheckedRecords
from samsa.client.record_future import BatchOutcome, BatchOutcomes
from samsa.client.record_tracing import sampled_traceparent
from samsa.client.transaction_client import TransactionClient
from samsa.client.transaction_manager import TransactionManager
from samsa.common.errors import ErrorCode, is_retriable
from samsa.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger(__name__)

# The longest the driver sleeps with nothing scheduled: bounds how late stream timeouts are seen.
IDLE_WAIT_S = 0.5
# After an unknown leader: how soon to look again once metadata was refreshed.
UNKNOWN_LEADER_WAIT_S = 0.05

Callbacks = list[Callable[[], None]]


def now_ms() -> int:
    """Wall-clock milliseconds: record timestamps default to it, so the core runs on it too."""
    return time.time_ns() // 1_000_000


# What `append()` did: (outcome, record index, partition, wake). `wake`: the driver has something
# new to do. `outcome` None: buffer.memory is full; wait for completions, then append again to
# that partition (sticky=False). A plain tuple: it is built once per record.
Appended = tuple[BatchOutcome | None, int, int, bool]
# What `append_many()` did: (next record index, [(outcome, record count)], wake).
ManyOutcomes = tuple[int, list[tuple[BatchOutcome, int]], bool]


def raise_no_partition(topic: str, partition: int, count: int) -> NoReturn:
    raise ProduceError(
        f"partition {partition} of {topic!r} does not exist (it has {count})",
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )


class ProducerDriver:
    """Runs on one event loop; `append`, `wake_threadsafe` and `lock` are for other threads."""

    def __init__(
        self,
        config: ProducerConfig,
        metadata: ClusterMetadata,
        run_callbacks: Callable[[Callbacks], None],
        on_completions: Callable[[], None],
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.lock = threading.Lock()
        self.accumulator = RecordAccumulator(config, random.Random())
        self._partitioner = Partitioner(random.Random(), ignore_keys=config.partitioner_ignore_keys)
        self._run_callbacks = run_callbacks
        self._on_completions = on_completions
        self._outcomes = BatchOutcomes()
        self._outcomes_by_batch_id = self._outcomes.by_batch_id  # read by append(), hot
        self._ignore_keys = config.partitioner_ignore_keys
        self._wake_every_record = config.linger_ms == 0
        self._streams: dict[str, ProduceStream] = {}  # by broker endpoint
        self._channels = AioChannels()
        self._tracing = tracing_configured()  # read once, as the producer does
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._wake_scheduled = False
        # When the sleeping task will look at its timers by itself (now_ms() clock); None while
        # it runs a turn. wake() rouses it only for something due sooner than that.
        self._turn_due_ms: int | None = None
        self._stopping = False
        self._draining = False  # inside _drain_and_send (asserted: never nested)
        self._producer_ids = ProducerIds(metadata, self._stub, config.request_timeout_ms / 1000)
        self._task: asyncio.Task[None] | None = None
        # Transactions (transactional.id set): the state machine and the coordinator calls. The
        # partitions join the transaction at their leaders (add_partitions_to_txn, KIP-890 part
        # 2): no AddPartitionsToTxn of ours, and no batch waits for one.
        self.txn: TransactionManager | None = None
        self._txn_client: TransactionClient | None = None
        if config.transactional_id is not None:
            self.txn = TransactionManager(config.transactional_id)
            self._txn_client = TransactionClient(
                self._channels,
                lambda: list(metadata.bootstrap),
                config.transactional_id,
                config.transaction_timeout_ms,
            )

    # --- any thread -------------------------------------------------------------------------------

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
        with self.lock:
            if partition is None:
                partition = self._partitioner.partition(topic, key, count)
            result = accumulator.append(
                topic, partition, key, value, headers, timestamp, now, sticky
            )
            if result is AppendRefusal.NEW_BATCH_NEEDED:
                self._partitioner.on_batch_closed(topic, partition)
                partition = self._partitioner.partition(topic, key, count)
                result = accumulator.append(
                    topic, partition, key, value, headers, timestamp, now, False
                )
            if result.__class__ is AppendRefusal:  # BUFFER_FULL
                return None, 0, partition, True
            batch_id, index, full, new_batch = result
            outcome = self._outcomes_by_batch_id.get(batch_id)
            if outcome is None:
                outcome = self._outcomes_by_batch_id[batch_id] = BatchOutcome()
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
        `append` places them one by one). Returns (next index, [(outcome, records)], wake);
        a next index short of the end means buffer.memory is full: wait, then call again."""
        accumulator = self.accumulator
        outcomes = self._outcomes_by_batch_id
        parts: list[tuple[BatchOutcome, int]] = []
        wake = self._wake_every_record
        end = len(records.values)
        with self.lock:
            while start < end:
                sticky = partition is None
                target = self._partitioner.partition(topic, None, count) if sticky else partition
                appended = accumulator.append_many(
                    topic, target, records, start, timestamp, now, sticky
                )
                for batch_id, _, record_count in appended.segments:
                    outcome = outcomes.get(batch_id)
                    if outcome is None:
                        outcome = outcomes[batch_id] = BatchOutcome()
                    parts.append((outcome, record_count))
                wake = wake or appended.wake
                start = appended.next_index
                if appended.refusal is not AppendRefusal.NEW_BATCH_NEEDED:
                    break
                # The sticky batch is full: `append`'s own dance moves the record that did not
                # fit to the next sticky partition, where it opens a batch.
                self._partitioner.on_batch_closed(topic, target)
                target = self._partitioner.partition(topic, None, count)
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
                parts.append((outcome, 1))
                wake = True
                start += 1
        return start, parts, wake

    def wake_threadsafe(self) -> None:
        """Wake the driver from another thread; one loop hand-off however many callers ask."""
        if self._wake_scheduled or self._loop is None:
            return
        self._wake_scheduled = True
        self._loop.call_soon_threadsafe(self.wake)

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
        self._task = self._loop.create_task(self._run(), name="samsa-producer-driver")

    async def stop(self) -> None:
        """End the loop, fail what is still unsettled, close the streams and channels."""
        assert self._task is not None and self._wake is not None, "stop() before start()"
        self._stopping = True
        self._wake.set()
        await self._task
        for stream in list(self._streams.values()):
            await stream.close()  # requests still waiting fail, and go back to the queue
        self._streams.clear()
        with self.lock:
            completed = self.accumulator.abort_all(
                ErrorCode.REQUEST_TIMED_OUT, "the producer was closed before delivery"
            )
        self._settle(completed)
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
        for stream in list(self._streams.values()):
            stream.expire(self.config.request_timeout_ms / 1000)
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
                    if self._has_room(node)
                ]
            self._settle(expired)
            for node, batches in requests:
                if batches:
                    accumulator.encode(batches)
                    self._send_request(node, batches)
        finally:
            self._draining = False
        return ready

    async def _renew_producer_id(self) -> bool:
        """ready() asks for a (new) producer id and epoch, with nothing in flight
        (producer_ids.py). False when that failed: the caller waits retry.backoff.ms and asks
        again; a non-retriable failure fails the queued batches at once. A transactional
        producer's identity comes only from InitTransactions and EndTxn: its batches wait (and
        expire, failing the transaction) rather than restart sequences mid-transaction."""
        if self.txn is not None:
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

    # --- transactions -----------------------------------------------------------------------------

    async def init_transactions(self, timeout_s: float) -> None:
        assert self._txn_client is not None and self.txn is not None
        deadline = asyncio.get_running_loop().time() + timeout_s
        identity = await self._txn_client.init(deadline)
        with self.lock:
            self.accumulator.set_producer_id(*identity)
            self.txn.on_initialized()

    async def send_offsets(
        self,
        offsets: dict[tuple[str, int], int],
        group_id: str,
        member_id: str,
        member_epoch: int,
        timeout_s: float,
    ) -> None:
        assert self._txn_client is not None and self.txn is not None
        deadline = asyncio.get_running_loop().time() + timeout_s
        self.txn.on_started()
        try:
            await self._txn_client.add_offsets(
                self.accumulator.producer_identity,
                offsets,
                group_id,
                member_id,
                member_epoch,
                deadline,
            )
        except KafkaError as error:
            with self.lock:
                self.txn.on_error(error)
            raise

    async def end_transaction(self, committed: bool, timeout_s: float) -> None:
        """EndTxn, once nothing of the transaction is queued or in flight (the caller flushed or
        aborted the queue); adopts the bumped epoch for the next transaction. A transaction
        that sent nothing never reached the coordinator: it ends here, without a call."""
        assert self._txn_client is not None and self.txn is not None
        if not self.txn.started:
            with self.lock:
                self.txn.on_ended()
            return
        deadline = asyncio.get_running_loop().time() + timeout_s
        try:
            identity = await self._txn_client.end(
                self.accumulator.producer_identity, committed, deadline
            )
        except KafkaError as error:
            with self.lock:
                self.txn.on_end_failed(error)
            raise
        with self.lock:
            self.accumulator.set_producer_id(*identity)
            self.txn.on_ended()

    def abort_queued(self, message: str) -> None:
        with self.lock:
            completed = self.accumulator.abort_queued(ErrorCode.INVALID_TXN_STATE, message)
        self._settle(completed)

    def _stub(self, endpoint: str) -> broker_pb2_grpc.BrokerServiceStub:
        return broker_pb2_grpc.BrokerServiceStub(self._channels.get(endpoint))

    async def _refresh(self, topics: Sequence[str] | frozenset[str]) -> None:
        try:
            await asyncio.to_thread(self.metadata.refresh, topics)
        except KafkaError as error:
            log.warning("metadata refresh failed: %s", error)

    def _has_room(self, node: int) -> bool:
        endpoint = self.metadata.endpoints.get(node)
        stream = self._streams.get(endpoint) if endpoint is not None else None
        return stream is None or stream.broken or stream.has_room()

    def _send_request(self, node: int, batches: list[ProducerBatch]) -> None:
        by_partition: ByPartition = {}
        for batch in batches:
            by_partition.setdefault((batch.topic, batch.partition), []).append(batch)
        endpoint = self.metadata.endpoints.get(node)
        if endpoint is None:
            self.metadata.mark_stale()
            self._fail_batches(by_partition, ErrorCode.BROKER_NOT_AVAILABLE, retriable=True)
            return
        request = produce_request(
            self.config.acks,
            self.config.request_timeout_ms,
            {tp: [batch.encoded for batch in group] for tp, group in by_partition.items()},  # type: ignore[misc]
            transactional_id=self.config.transactional_id or "",
            add_partitions_to_txn=self.txn is not None,
        )
        if self.txn is not None:
            self.txn.on_started()  # the leader may add partitions to the transaction now
        acks_zero = self.config.acks == 0

        def on_answer(
            response: broker_pb2.ProduceResponse | None, error: grpc.RpcError | None
        ) -> None:
            if not acks_zero:
                self._on_response(response, error, by_partition)

        traceparent = sampled_traceparent(b.headers for b in batches) if self._tracing else ""
        while not self._stream(endpoint).send(request, on_answer, traceparent):
            self._streams.pop(endpoint, None)  # broken: the next call opens a new one
        if acks_zero:
            with self.lock:
                completed = [
                    done
                    for batch in batches
                    for done in self.accumulator.on_batch_acked(batch.batch_id, NO_OFFSET)
                ]
            self._settle(completed)

    def _stream(self, endpoint: str) -> ProduceStream:
        stream = self._streams.get(endpoint)
        if stream is None or stream.broken:
            channel = self._channels.get(endpoint, traced=False)
            stream = self._streams[endpoint] = ProduceStream(raw_produce_stream(channel))
        return stream

    def _on_response(
        self,
        response: broker_pb2.ProduceResponse | None,
        error: grpc.RpcError | None,
        by_partition: ByPartition,
    ) -> None:
        if error is not None:
            log.warning("produce request failed: %s %s", error.code(), error.details())
            self.metadata.mark_stale()
            code, retriable = stream_error_outcome(error)
            self._fail_batches(by_partition, code, retriable=retriable)
            return
        assert response is not None
        completed: list[Completed] = []
        now = now_ms()
        failed = False
        with self.lock:
            for topic in response.topics:
                for result in topic.partitions:
                    group = by_partition.get((topic.name, result.partition), [])
                    completed += self._partition_outcome(topic.name, group, result, now)
                    failed = failed or result.error_code != ErrorCode.NONE
            queued = self.accumulator.has_queued()
        self._settle(completed)
        if failed or queued:  # a retry, or batches an in-flight slot may now let out
            self._wake_task()

    def _partition_outcome(
        self,
        topic: str,
        group: list[ProducerBatch],
        result: broker_pb2.ProduceResponse.PartitionResponse,
        now: int,
    ) -> list[Completed]:
        """Under the lock: feed one partition's answer back to the accumulator."""
        completed: list[Completed] = []
        if result.error_code == ErrorCode.NONE:
            base = result.base_offset
            for batch in group:
                count = batch.record_count  # before the ack frees the records
                completed += self.accumulator.on_batch_acked(
                    batch.batch_id, base, result.log_append_time_ms
                )
                base += count
            return completed
        code = ErrorCode(result.error_code)
        # KIP-951: the answer names the new leader; go there now, no backoff, no refresh.
        retry_now = (
            code in NEW_LEADER_ERRORS
            and result.HasField("current_leader")
            and self.metadata.update_leader(
                (topic, result.partition),
                result.current_leader.leader_id,
                result.current_leader.leader_epoch,
            )
        )
        if code in STALE_METADATA_ERRORS and not retry_now:
            self.metadata.mark_stale()
        elif code is ErrorCode.INVALID_PRODUCER_EPOCH:
            self._producer_ids.on_fenced()
        for batch in group:
            completed += self.accumulator.on_batch_failed(
                batch.batch_id, code, is_retriable(code), now, retry_now=retry_now
            )
            self._outcomes.note_message(batch.batch_id, result.error_message)
        return completed

    def _fail_batches(self, by_partition: ByPartition, code: ErrorCode, *, retriable: bool) -> None:
        now = now_ms()
        with self.lock:
            completed = [
                done
                for group in by_partition.values()
                for batch in group
                for done in self.accumulator.on_batch_failed(batch.batch_id, code, retriable, now)
            ]
        self._settle(completed)
        self._wake_task()

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
