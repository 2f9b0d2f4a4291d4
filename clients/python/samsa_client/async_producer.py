"""AsyncProducer: the producer driver on the caller's own event loop (aiokafka's habit).

    async with AsyncProducer({"bootstrap.servers": "..."}) as producer:
        future = await producer.send("events", b"value")   # queued: an awaitable
        metadata = await future                             # acknowledged: RecordMetadata
        metadata = await producer.send_and_wait("events", b"value")

With a `transactional.id` the transactional calls are the sync Producer's, as coroutines
(`await producer.init_transactions()`, `begin_transaction()`, `await
producer.send_offsets_to_transaction(...)`, `await producer.commit_transaction()`, `await
producer.abort_transaction()`), with the same state machine (transaction_manager.py).

Theory of operation. The same `ProducerDriver` as the sync `Producer` (producer_driver.py), but
its task runs on the caller's loop, so there is no thread hand-off at all: `send()` appends to
the accumulator and, when the append says so, calls the driver's `wake()`, which drains and sends
at once (still on the loop, so still the only drainer). Callbacks
added with `add_done_callback` run through `loop.call_soon`, after the driver's turn, never
inside it. Only two things leave the loop: the first metadata fetch of a topic and metadata
refreshes, which use sync gRPC in a worker thread (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from samsa.client import fork_safety
from samsa.client.async_lifecycle import check_loop, check_not_started
from samsa.client.channels import Channels, tracing_configured
from samsa.client.client_tls import client_security
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config import ProducerConfig
from samsa.client.errors import AuthorizationError, KafkaError, ProduceError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupMetadata
from samsa.client.partition_wait import partition_count_showing
from samsa.client.producer import WAIT_POLL_S
from samsa.client.producer_driver import ProducerDriver
from samsa.client.record_appender import Appended, checked_partition, now_ms, raise_closed
from samsa.client.record_checks import checked_int
from samsa.client.record_future import (
    AsyncRecordFuture,
    BatchOutcome,
    RecordMetadata,
    run_callback,
)
from samsa.client.record_tracing import headers_with_traceparent
from samsa.client.timeouts import checked_timeout
from samsa.client.transaction_driver import group_identity, transactions_of
from samsa.client.transaction_manager import TransactionAbortableError, TransactionManager
from samsa.common.errors import ErrorCode

log = logging.getLogger(__name__)


class AsyncProducer:
    """Kafka's producer for asyncio callers, with Kafka's configuration keys (see config.py)."""

    _forked = False  # set in a process forked after it was made (fork_safety.py)

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = ProducerConfig.from_dict(config)
        self._channels = Channels(security=client_security(config))  # files read once
        self._metadata = ClusterMetadata(
            self.config.bootstrap_servers, self._channels, self.config.metadata_max_idle_ms
        )
        self._driver: ProducerDriver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # start()'s (async_lifecycle.py)
        # Set by the driver after completions: memory was freed, a flush may be done.
        self._progress = asyncio.Event()
        self._closed = False
        fork_safety.track(self)
        fork_safety.call_in_child(self)
        self._tracing = tracing_configured()  # read once (record_tracing.py)

    async def start(self) -> None:
        self._check_not_forked()
        check_not_started(self._loop, "AsyncProducer")
        loop = self._loop = asyncio.get_running_loop()

        def run_callbacks(callbacks: list[Callable[[], None]]) -> None:
            for callback in callbacks:
                loop.call_soon(run_callback, callback)

        self._driver = ProducerDriver(
            self.config, self._metadata, run_callbacks, self._progress.set, self._channels.security
        )
        await self._driver.start()

    @property
    def failed_records(self) -> int:
        """As `Producer.failed_records`: records whose batch failed for good (0 before start)."""
        return 0 if self._driver is None else self._driver.failed_records

    def after_fork_in_child(self) -> None:
        """A child that runs the parent's loop on gives the driver no turn (fork_safety.py)."""
        fork_safety.stop_in_child(self._driver)

    def _check_not_forked(self) -> None:
        if self._forked:  # in a process forked after it was made (fork_safety.py)
            raise fork_safety.forked_error("AsyncProducer")

    def _started(self) -> ProducerDriver:
        self._check_not_forked()
        if self._driver is None or self._closed:
            raise ProduceError(
                "the producer is not started (await start()) or is stopped",
                ErrorCode.INVALID_REQUEST,
            )
        check_loop(self._loop, "AsyncProducer")
        return self._driver

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> AsyncRecordFuture:
        """Queue one record (waiting for the topic's metadata and for buffer memory if need
        be, max.block.ms in all); await the result for its RecordMetadata."""
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        driver = self._started()
        if driver.appender.closed:  # stop() began: it flushes only what came before
            raise_closed()
        if driver.txn is not None:
            driver.txn.check_send()
        if self._tracing:
            headers = headers_with_traceparent(headers)
        now = now_ms()
        if timestamp is None:
            timestamp = now
        count = self._metadata.partition_counts.get(topic)
        if count is None:
            remaining_s = max(0.0, deadline - time.monotonic())
            try:
                count = await asyncio.to_thread(self._metadata.partition_count, topic, remaining_s)
            except AuthorizationError as refused:  # a failed future, as Kafka's send()
                outcome = BatchOutcome.refused(refused)
                return AsyncRecordFuture(outcome, 0, topic, partition or -1, timestamp)
        if partition is not None:
            partition = checked_int("partition", partition)
            if partition >= count:  # added since our metadata? (Kafka's waitOnMetadata)
                count = await asyncio.to_thread(
                    partition_count_showing, self._metadata, topic, (partition,), count, deadline
                )
            partition = checked_partition(topic, partition, count)
        outcome, index, partition, wake = driver.appender.append(
            topic, partition, key, value, headers, timestamp, now, count
        )
        if outcome is None:
            outcome, index, partition, wake = await self._wait_for_memory(
                topic, partition, key, value, headers, timestamp, count, deadline
            )
        if wake:
            driver.wake()
        assert outcome is not None
        return AsyncRecordFuture(outcome, index, topic, partition, timestamp)

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        return await (await self.send(topic, value, key, headers, partition, timestamp))

    async def _wait_for_memory(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp: int,
        count: int,
        deadline: float,
    ) -> Appended:
        """buffer.memory is full: wait (until `deadline`, time.monotonic(): what is left of the
        call's max.block.ms) for completions to free some, then append to `partition` again."""
        driver = self._started()
        appended: Appended = (None, 0, partition, True)
        while appended[0] is None:
            driver.wake()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProduceError(
                    f"buffer.memory ({self.config.buffer_memory} bytes) stayed full until "
                    f"max.block.ms ({self.config.max_block_ms} ms, for metadata and memory "
                    "together) had passed: the cluster is slower than the producer",
                    ErrorCode.REQUEST_TIMED_OUT,
                )
            await self._wait_for_progress(min(remaining, WAIT_POLL_S))
            appended = driver.appender.append(
                topic, partition, key, value, headers, timestamp, now_ms(), count
            )
        return appended

    async def _wait_for_progress(self, timeout_s: float) -> None:
        self._progress.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._progress.wait()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until every record sent so far is settled:
        up to `timeout` seconds (>= 0, else ValueError; None: no limit), then TimeoutError."""
        driver = self._started()
        await driver.flush(None if timeout is None else checked_timeout(timeout))

    # --- transactions (the sync Producer's calls, as coroutines) ---------------------------------

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get this transactional.id's producer id and epoch, fencing any older instance."""
        driver, txn = self._transactional()
        with driver.lock:
            txn.check_init()
        timeout_s = self._timeout_s(timeout)
        await self._within(driver.transaction_driver().init(timeout_s), timeout_s)

    def begin_transaction(self) -> None:
        """Open a transaction: every send() until commit or abort belongs to it."""
        driver, txn = self._transactional()
        with driver.lock:
            txn.begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        group: str | GroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit the group's consumed `offsets` in the transaction (see Producer's)."""
        driver, txn = self._transactional()
        txn.check_send()
        timeout_s = self._timeout_s(timeout)
        coroutine = driver.transaction_driver().send_offsets(
            dict(offsets), *group_identity(group), timeout_s
        )
        await self._within(coroutine, timeout_s)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send everything of the transaction, then commit it (see Producer's)."""
        timeout_s = self._timeout_s(timeout)  # checked before the state moves
        driver, txn = self._transactional()
        with driver.lock:
            txn.begin_commit()
        await self._within(driver.transaction_driver().commit(timeout_s), 2 * timeout_s)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop what was not sent, wait for what was, and abort."""
        timeout_s = self._timeout_s(timeout)  # checked before the state moves
        driver, txn = self._transactional()
        with driver.lock:
            txn.begin_abort()
        await self._within(driver.transaction_driver().abort(timeout_s), 2 * timeout_s)

    def _transactional(self) -> tuple[ProducerDriver, TransactionManager]:
        driver = self._started()
        return driver, transactions_of(driver.txn)

    def _timeout_s(self, timeout: float | None) -> float:
        return self.config.max_block_ms / 1000 if timeout is None else checked_timeout(timeout)

    @staticmethod
    async def _within(coroutine: Coroutine[Any, Any, None], timeout_s: float) -> None:
        """The driver's coroutine has its own deadlines, ending by `timeout_s`; this one only
        guards against a hang."""
        async with asyncio.timeout(timeout_s + 5):
            await coroutine

    async def stop(self, timeout: float | None = None) -> None:
        """Abort a transaction still open (see Producer.close), flush, then stop the driver.
        Records still unsettled after `timeout` fail and stop() returns without an error (as
        Producer.close does); a send() once stop() began raises."""
        self._timeout_s(timeout)  # a bad one is refused before anything is stopped
        if self._driver is None or self._closed:
            return
        check_loop(self._loop, "AsyncProducer")
        with self._driver.lock:  # from now on send() raises (see Producer.close)
            self._driver.appender.closed = True
        try:
            await self._abort_on_close(timeout)
            await self.flush(timeout)
        except TimeoutError:  # as Kafka's close(Duration): the unsettled records fail
            log.warning("stop(): records not delivered within %s s fail", timeout)
        finally:
            self._closed = True
            await self._driver.stop()
            self._channels.close()

    async def _abort_on_close(self, timeout: float | None) -> None:
        """Producer._abort_on_close, as a coroutine."""
        driver = self._started()
        txn = driver.txn
        if txn is None:
            return
        with driver.lock:
            commit = txn.commits_on_close()
            if not (commit or txn.aborts_on_close()):
                return
        timeout_s = self._timeout_s(timeout)
        try:
            if commit:
                try:
                    await self._within(driver.transaction_driver().commit(timeout_s), 2 * timeout_s)
                    return
                except TransactionAbortableError:
                    pass
            with driver.lock:
                txn.begin_abort()
            await self._within(driver.transaction_driver().abort(timeout_s), 2 * timeout_s)
        except (KafkaError, TimeoutError) as error:
            log.warning(
                "stop(): could not end the transaction of transactional.id %r (%s); its "
                "coordinator aborts it after transaction.timeout.ms",
                txn.transactional_id,
                error,
            )

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
