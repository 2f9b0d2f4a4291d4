"""One owned partition of `__transaction_state` at run time: the transaction shard on the shared
partition runtime (coordinator_partition.py), phase 2 of every decided transaction, and timeouts.

Theory of operation (DESIGN §5). A handler asks the pure `TransactionShard` for a `TxnStep` and
hands it to `run`, which carries it out in a task of its own (so a client that hangs up cannot
leave a transactional id pending forever):

1. the step's record, if any, is written; once durable the shard applies it (`on_durable`), and
   if the write failed the old state stands (`on_failed`) and the caller answers
   NOT_COORDINATOR (the partition reloads from the log);
2. the answer is returned to the handler;
3. the step's markers, if any, start phase 2 in the background: `_finish` writes a COMMIT or
   ABORT marker to every partition of the transaction through its leader (WriteTxnMarkers,
   signed as this coordinator), retrying until each is written or moot. COMPLETE_x is then the
   id's state at once, and an add waiting on phase 2 goes on; COMPLETE_x's own record follows
   `COMPLETION_DELAY_S` later through the same `run`, unless that add's record superseded it
   (transaction_shard.py, "Completion before its record").

Phase 2 retries forever while the partition is owned: the decision is durable, and read_committed
consumers wait on every partition of the transaction until its marker is there. A marker is moot
when the topic is gone from the image, or the broker refuses it as late (INVALID_PRODUCER_EPOCH:
the producer already wrote at a newer epoch there, or a marker of the other type ended the
transaction there at that epoch, as an operator's AbortTransaction does; the warning logged
names it). After a failover the new owner resumes phase
2 of everything decided (`on_loaded`); so does this owner when its work fails unexpectedly
(`_give_up` ends the partition, and the coordinator loads it again). The timer aborts
transactions past their timeout (which fences the producer: the abort bumps its epoch) every
`abort_interval_ms`, and forgets transactional ids idle for `transactional.id.expiration.ms`.

New producer ids (first InitTransactions of an id, or an exhausted epoch) come from
`allocate_producer_id`, which the coordinator answers from a broker's block; one is taken before
the step and is simply unused when the state changed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import TRANSACTION_STATE_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.coordinator import transaction_records
from samsa.services.coordinator.coordinator_partition import (
    RETRY_BACKOFF_MAX_S,
    RETRY_BACKOFF_S,
    CoordinatorPartition,
    KeyValue,
    PartitionUnavailableError,
    now_ms,
)
from samsa.services.coordinator.offsets_log import OffsetsLog
from samsa.services.coordinator.transaction_model import PREPARED, MarkerWrite
from samsa.services.coordinator.transaction_shard import TransactionShard, TxnStep
from samsa.services.coordinator.transaction_state import (
    TRANSACTION_TIMEOUT_MS_MAX,
    TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
)
from samsa.services.runtime import faults
from samsa.v1 import transactions_pb2 as x

log = logging.getLogger(__name__)

R = TypeVar("R")

# Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms.
ABORT_INTERVAL_MS_DEFAULT = 10_000
# How long AddPartitionsToTxn and AddOffsetsToTxn wait here while their transactional id is busy
# (a write in flight, or phase 2 of its last transaction) before answering
# CONCURRENT_TRANSACTIONS. A producer begins its next transaction as soon as EndTxn answers, so
# its first AddPartitionsToTxn meets the markers of the last one nearly every time: answered the
# moment they are done, it does not pay a client's retry backoff on every transaction.
SETTLE_WAIT_S = 0.5
# How long COMPLETE_x waits, once phase 2 is done, for the producer's next transaction to
# supersede it (its first add, usually already waiting here): the add then writes one record, not
# two. Nothing waits on COMPLETE_x's own record.
COMPLETION_DELAY_S = 0.01


@dataclass(frozen=True)
class TransactionConfig:
    """The transaction coordinator's settings (Kafka's names in the docstrings of the flags)."""

    abort_interval_ms: int = ABORT_INTERVAL_MS_DEFAULT
    id_expiration_ms: int = TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT
    # The longest transaction.timeout.ms a producer may ask for; also how long a partition's
    # transaction must have been silent before AbortTransaction calls it hanging.
    max_timeout_ms: int = TRANSACTION_TIMEOUT_MS_MAX


class TransactionPartition(CoordinatorPartition):
    """The transactional ids of one partition of `__transaction_state`."""

    topic = TRANSACTION_STATE_TOPIC

    def __init__(
        self,
        assignment: CoordinatorAssignment,
        *,
        coordinator_id: int,
        offsets_log: OffsetsLog,
        config: TransactionConfig,
        allocate_producer_id: Callable[[], Awaitable[int]],
        on_ended: Callable[[CoordinatorPartition], None],
    ) -> None:
        super().__init__(
            assignment, coordinator_id=coordinator_id, offsets_log=offsets_log, on_ended=on_ended
        )
        self.shard = TransactionShard()
        self.config = config
        self.allocate_producer_id = allocate_producer_id
        self._work: set[asyncio.Task[object]] = set()
        self._changed: asyncio.Future[None] | None = None  # resolved when a step is applied

    # --- the runtime's hooks ----------------------------------------------------------------

    def replay_record(self, key: bytes, value: bytes | None, offset: int) -> None:
        self.shard.replay(key, value)

    def writer_epoch_record(self) -> KeyValue:
        return transaction_records.encode_writer_epoch(
            self.coordinator_id, self.assignment.assignment_epoch
        )

    def on_loaded(self) -> None:
        for step in self.shard.resume_after_load():
            self._spawn(self.run(step))

    def describe_loaded(self) -> dict[str, object]:
        return {"transactional_ids": len(self.shard.transactions)}

    async def timer_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.abort_interval_ms / 1000)
            if self.ended:
                # The partition failed on its own (its write loop raised): the runtime's gather
                # does not cancel this loop, and a new owner object does this work from now on.
                return
            now = now_ms()
            steps = self.shard.abort_timed_out(now)
            steps += self.shard.expire(now, self.config.id_expiration_ms)
            for step in steps:
                self._spawn(self.run(step))
            if keepalive := self.keepalive_records(now):
                try:
                    await self.write_encoded(keepalive)
                except PartitionUnavailableError:
                    return

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._work):
            task.cancel()
        await asyncio.gather(*self._work, return_exceptions=True)

    # --- handlers' side ---------------------------------------------------------------------

    async def init_transactions(
        self, request: x.InitTransactionsRequest
    ) -> TxnStep[x.InitTransactionsResponse]:
        """The InitTransactions step, with a new producer id taken first when it needs one."""
        max_timeout_ms = self.config.max_timeout_ms
        new_producer_id = None
        while True:
            self.check_serving()
            if new_producer_id is not None or not self.shard.init_needs_producer_id(
                request, max_timeout_ms
            ):
                return self.shard.init_transactions(
                    request, now_ms(), new_producer_id, max_timeout_ms
                )
            new_producer_id = await self.allocate_producer_id()

    async def end_transaction(self, request: x.EndTxnRequest) -> TxnStep[x.EndTxnResponse]:
        """The EndTxn step, with a new producer id taken first when the epoch is exhausted."""
        new_producer_id = None
        while True:
            self.check_serving()
            if new_producer_id is not None or not self.shard.end_needs_producer_id(request):
                return self.shard.end_transaction(request, now_ms(), new_producer_id)
            new_producer_id = await self.allocate_producer_id()

    async def run(self, step: TxnStep[R]) -> R:
        """Carry `step` out (see the module docstring) and return its answer; raises
        PartitionUnavailableError when its record could not be written."""
        task = self._spawn(self._carry_out(step))
        return await asyncio.shield(task)  # type: ignore[return-value]

    # --- carrying steps out -----------------------------------------------------------------

    def _spawn(self, work: Awaitable[object]) -> asyncio.Task[object]:
        task = asyncio.ensure_future(work)
        self._work.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[object]) -> None:
        self._work.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is None or isinstance(error, PartitionUnavailableError):
            return
        log.error(
            "transaction work failed: giving the partition up to reload it",
            exc_info=error,
            extra={"partition": self.partition},
        )
        self._give_up(f"the coordinator failed on partition {self.partition}: {error!r}")

    def _give_up(self, message: str) -> None:
        """Poison the partition after an unexpected error in its work: the shard may be half
        changed (an id left pending for ever) and phase 2 of a decided transaction would stop
        for good, leaving its id answering CONCURRENT_TRANSACTIONS until some reload. Ending it
        makes its owner load it again from the log, which resumes phase 2 (`on_loaded`)."""
        if self.ended:
            return
        self._end(ErrorCode.NOT_COORDINATOR, message)
        if self._task is not None:
            self._task.cancel()  # its write loop would wait for a wake-up that never comes

    async def run_when_settled(
        self, decide: Callable[[], TxnStep[R]], wait_s: float = SETTLE_WAIT_S
    ) -> R:
        """Run the step `decide` returns; while it is CONCURRENT_TRANSACTIONS, decide again after
        each change to this partition's state, for up to `wait_s` (see SETTLE_WAIT_S)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            self.check_serving()
            step = decide()
            remaining = deadline - loop.time()
            if step.outcome.error != ErrorCode.CONCURRENT_TRANSACTIONS or remaining <= 0:
                return await self.run(step)
            if self._changed is None or self._changed.done():
                self._changed = loop.create_future()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._changed), remaining)

    def _signal_change(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)

    async def _carry_out(self, step: TxnStep[R]) -> R:
        record = step.record
        if record is not None:
            try:
                await self.write_encoded([record])
            except BaseException:
                self.shard.on_failed(step)
                self._signal_change()
                raise
            self.shard.on_durable(step)
            self._signal_change()
        if step.outcome.markers is not None:
            self._spawn(self._finish(step.outcome.markers))
        return step.response

    async def _finish(self, markers: MarkerWrite) -> None:
        """Phase 2: every marker, then COMPLETE_x."""
        if not await self._write_markers(markers):
            return
        current = self.shard.transactions.get(markers.transactional_id)
        if (
            current is None
            or current.state not in PREPARED
            or (current.producer_id, current.producer_epoch)
            != (markers.producer_id, markers.producer_epoch)
        ):
            return  # finished by someone else (a reload resumed it)
        completed = self.shard.markers_written(markers.transactional_id, now_ms())
        self._signal_change()  # an add waiting on phase 2 decides now
        await asyncio.sleep(COMPLETION_DELAY_S)
        step = self.shard.completion_step(completed)
        if step is None:
            return  # superseded by the next transaction's record
        try:
            await self.run(step)
        except PartitionUnavailableError:
            return  # the partition reloads and resumes phase 2 from PREPARE_x

    async def _write_markers(self, markers: MarkerWrite) -> bool:
        """Write the markers until every partition has its own (or it is moot); False when the
        partition was given up first."""
        remaining = set(markers.partitions)
        backoff = RETRY_BACKOFF_S
        while remaining:
            if self.ended:
                return False
            if faults.fire("txn.lose_markers"):  # tests: a hanging transaction
                log.warning(
                    "transaction markers lost", extra={"transactional_id": markers.transactional_id}
                )
                return True
            results = await self.offsets_log.write_txn_markers(
                producer_id=markers.producer_id,
                producer_epoch=markers.producer_epoch,
                committed=markers.txn_commit,
                coordinator_epoch=self.assignment.assignment_epoch,
                partitions=sorted(remaining),
            )
            image = self.offsets_log.image()
            for (topic, number), (code, message) in results.items():
                if code == ErrorCode.NONE:
                    remaining.discard((topic, number))
                    continue
                topic_image = image.topics.get(topic)
                gone = topic_image is None or number not in topic_image.partitions
                if gone or code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    log.warning(
                        "transaction marker moot",
                        extra={
                            "transactional_id": markers.transactional_id,
                            "partition": f"{topic}-{number}",
                            "error": f"{ErrorCode(code).name} {message}",
                        },
                    )
                    remaining.discard((topic, number))
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        return not self.ended
