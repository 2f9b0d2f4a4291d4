"""The transactional producer's calls, on the producer driver's loop, in Kafka's order.

transaction_manager.py (pure) decides which call is legal when and transaction_client.py carries
each request to the coordinator; this module runs what the facades ask for (init_transactions,
send_offsets_to_transaction, commit_transaction, abort_transaction) and keeps two rules of
Kafka's TransactionManager that the calls of several threads or tasks would otherwise break:

- One coordinator request at a time (`_calls`, an asyncio.Lock, first come first served), as
  Kafka's sends its transactional requests one by one, AddOffsetsToTxn and TxnOffsetCommit
  ahead of EndTxn: a send_offsets_to_transaction() that began before a commit has its offsets
  answered before the commit's EndTxn goes out, so a committed transaction never lacks offsets
  whose call then reports success. One that gets its turn once a commit or abort has begun is
  refused (INVALID_TXN_STATE): the state is checked again under the lock, in its turn.
- One end at a time (`_ending`): a commit_transaction() (or abort_transaction()) called while the
  same one is in progress, from another thread or task or from close(), awaits that one's
  outcome instead of sending a second EndTxn (Kafka's cached TransactionalRequestResult): one
  EndTxn, and every call returns (or raises) what it did.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from samsa.client.accumulator import RecordAccumulator
from samsa.client.errors import AuthorizationError, KafkaError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.transaction_client import TransactionClient
from samsa.client.transaction_manager import TransactionAbortableError, TransactionManager
from samsa.common.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.client.group_driver import GroupMetadata

log = logging.getLogger(__name__)


def group_identity(group: str | GroupMetadata) -> tuple[str, str, int]:
    """(group id, member id, member epoch) for send_offsets_to_transaction: a consumer's
    group_metadata(), or a group id alone (a consumer outside the group protocol)."""
    if isinstance(group, str):
        return group, "", -1
    return group.group_id, group.member_id, group.member_epoch


def transactions_of(txn: TransactionManager | None) -> TransactionManager:
    """The producer's transaction state, or the error saying that it has no transactional.id."""
    if txn is None:
        raise KafkaError(
            "this producer has no transactional.id: set one to use transactions",
            ErrorCode.INVALID_TXN_STATE,
        )
    return txn


class TransactionDriver:
    """Runs on the driver's loop; `lock` is the driver's (it guards `txn` and the accumulator)."""

    def __init__(
        self,
        txn: TransactionManager,
        client: TransactionClient,
        lock: threading.Lock,
        accumulator: RecordAccumulator,
        flush: Callable[[float], Awaitable[None]],
        abort_queued: Callable[[str], None],
    ) -> None:
        self.txn = txn
        self._client = client
        self._lock = lock
        self._accumulator = accumulator
        self._flush = flush
        self._abort_queued = abort_queued
        # Held for each coordinator request (bound to the loop at its first use).
        self._calls = asyncio.Lock()
        # The commit (True) or abort (False) in progress, shared by every call that asks for it.
        self._ending: tuple[bool, asyncio.Task[None]] | None = None

    async def init(self, timeout_s: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        async with self._calls:
            try:
                identity = await self._client.init(deadline)
            except AuthorizationError as refused:  # fatal, as Kafka's initTransactions
                with self._lock:
                    self.txn.on_error(refused)
                raise
            with self._lock:
                self._accumulator.set_producer_id(*identity)
                self.txn.on_initialized()

    async def send_offsets(
        self,
        offsets: dict[tuple[str, int], int | OffsetAndMetadata],
        group_id: str,
        member_id: str,
        member_epoch: int,
        timeout_s: float,
    ) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        async with self._calls:
            with self._lock:
                self.txn.check_send()  # a commit or abort begun while this waited refuses it
                self.txn.on_started()
            try:
                await self._client.add_offsets(
                    self._accumulator.producer_identity,
                    offsets,
                    group_id,
                    member_id,
                    member_epoch,
                    deadline,
                )
            except KafkaError as error:
                with self._lock:
                    self.txn.on_error(error)
                    raised = self.txn.to_raise(error)
                if raised is error:
                    raise
                raise raised from error

    async def commit(self, timeout_s: float) -> None:
        """Flush, then EndTxn(commit), in one coroutine: a sync caller hands over to the loop
        once for both, not once for each. The facade checked `begin_commit()` first; it is
        checked again in EndTxn's turn, which raises if a batch of the transaction, or its
        offsets, failed meanwhile. Each step has `timeout_s`, as the two calls had."""
        await self._shared_end(True, timeout_s)

    async def abort(self, timeout_s: float) -> None:
        """Drop what was not sent, wait for what was, then EndTxn(abort), in one coroutine."""
        await self._shared_end(False, timeout_s)

    async def _shared_end(self, committed: bool, timeout_s: float) -> None:
        """Join the same end in progress, or start one (after an end of the other kind, which
        a commit that failed before its EndTxn leaves for the abort that follows). Shielded:
        a caller that gives up (cancelled) leaves the end to finish for the others."""
        ending = self._ending
        if ending is not None and not ending[1].done():
            if ending[0] is committed:
                await asyncio.shield(ending[1])
                return
            await asyncio.wait([ending[1]])
        run = self._commit(timeout_s) if committed else self._abort(timeout_s)
        task = asyncio.get_running_loop().create_task(run)
        task.add_done_callback(_retrieve)
        self._ending = (committed, task)
        await asyncio.shield(task)

    async def _commit(self, timeout_s: float) -> None:
        await self._flush(timeout_s)
        async with self._calls:
            with self._lock:
                self.txn.begin_commit()
            await self._end(True, timeout_s)

    async def _abort(self, timeout_s: float) -> None:
        self._abort_queued("the transaction was aborted before this record was sent")
        await self._flush(timeout_s)
        async with self._calls:
            await self._end(False, timeout_s)

    async def _end(self, committed: bool, timeout_s: float) -> None:
        """EndTxn, once nothing of the transaction is queued or in flight (the caller flushed or
        aborted the queue); adopts the bumped epoch for the next transaction. A transaction
        that drained nothing never reached the coordinator: it ends here, without a call."""
        if not self.txn.started:
            with self._lock:
                self.txn.on_ended()
            return
        deadline = asyncio.get_running_loop().time() + timeout_s
        try:
            identity = await self._client.end(
                self._accumulator.producer_identity, committed, deadline
            )
        except KafkaError as error:
            with self._lock:
                raised = self.txn.on_end_failed(error)
            if raised is error:
                raise
            raise raised from error
        with self._lock:
            self._accumulator.set_producer_id(*identity)
            self.txn.on_ended()

    def end_at_close(
        self,
        run: Callable[[Coroutine[Any, Any, None], float], None],
        timeout_s: float,
    ) -> None:
        """On the sync Producer's thread, for its close(): end the transaction, if it must:
        abort one left open (aborts_on_close), finish a commit whose call failed
        (commits_on_close; aborted if it cannot commit), so that read_committed readers do not
        wait for transaction.timeout.ms. `run` runs one of these coroutines on the loop and
        bounds the wait. A failure is logged: close() still closes, and the
        coordinator aborts the transaction at its timeout."""
        txn = self.txn
        with self._lock:
            commit = txn.commits_on_close()
            if not (commit or txn.aborts_on_close()):
                return
        try:
            if commit:
                try:
                    run(self.commit(timeout_s), 2 * timeout_s)
                    return
                except TransactionAbortableError:
                    pass
            with self._lock:
                txn.begin_abort()
            run(self.abort(timeout_s), 2 * timeout_s)
        except (KafkaError, TimeoutError) as error:
            log.warning(
                "close(): could not end the transaction of transactional.id %r (%s); its "
                "coordinator aborts it after transaction.timeout.ms",
                txn.transactional_id,
                error,
            )


def _retrieve(task: asyncio.Task[None]) -> None:
    """An end whose callers all gave up: its error is theirs to miss, not asyncio's to log."""
    if not task.cancelled():
        task.exception()
