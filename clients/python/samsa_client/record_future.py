"""The futures of sent records: one shared outcome per batch, one small handle per record.

Theory of operation. At 300k records/s a `concurrent.futures.Future` per record (a lock and a
condition each) would be most of the budget, so every record of a batch shares one
`BatchOutcome`, which the driver settles once, on its event loop, and each record gets a slotted
handle (`RecordFuture` for the sync facade, `AsyncRecordFuture` for asyncio callers) holding its
index in the batch. Waiting objects are made only when someone waits:

- a sync `result()` makes a `threading.Event` (under `_EVENT_LOCK`, so the driver cannot settle
  between the check and the creation);
- an `await` makes an `asyncio.Future` on the driver's loop, resolved by a waker the driver runs
  inline when it settles the batch (internal, never user code);
- `add_done_callback` callbacks are user code: the driver hands them to the facade's callback
  runner (the sync Producer's `CallbackThread`, or `loop.call_soon(run_callback, ...)`), never
  runs them on the I/O path.

`Producer.send_many` goes one step further: one `RecordsFuture` for all the records of the call,
holding each batch's outcome they share and which of its records are the call's.

A batch the broker found too large goes on in pieces (batch_completion.py), each with its own
offsets or error: the outcome keeps one entry per piece (`pieces`) and is settled, once, with
the last; a record's result is its piece's.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Generator
from operator import itemgetter
from typing import Any, NamedTuple

from samsa.client import fork_safety
from samsa.client.errors import (
    CLUSTER_RESOURCE,
    AuthorizationError,
    KafkaError,
    ProduceError,
    RecordAuthenticationError,
    RecordAuthorizationError,
    record_refusal,
)
from samsa.client.producer_batch import NO_OFFSET, Completed
from samsa.common.errors import ErrorCode

log = logging.getLogger(__name__)

# A settled piece of a split batch: (index of its first record, base offset, log append time,
# error or None).
Piece = tuple[int, int, int, KafkaError | None]
_first_index = itemgetter(0)

# Guards the lazy creation of waiting objects against the driver settling at the same time.
_EVENT_LOCK = threading.Lock()


class RecordMetadata(NamedTuple):
    """Where a record was written."""

    topic: str
    partition: int
    offset: int  # -1 with acks=0, or for a batch proven written whose answer was lost
    timestamp: int


class BatchOutcome:
    """The outcome every record of one batch shares; settled once, by the driver."""

    __slots__ = (
        "base_offset",
        "callbacks",
        "done",
        "error",
        "event",
        "log_append_time",
        "pieces",
        "wakers",
    )

    def __init__(self) -> None:
        self.done = False
        self.base_offset = NO_OFFSET
        self.log_append_time = -1
        self.error: KafkaError | None = None
        self.event: threading.Event | None = None
        # User callbacks, run by the facade's callback runner once settled.
        self.callbacks: list[Callable[[], None]] | None = None
        # Internal wakers (asyncio futures to resolve), run inline by the driver once settled.
        self.wakers: list[Callable[[], None]] | None = None
        # None unless the batch was split: its pieces, by first index (the last one included).
        self.pieces: list[Piece] | None = None

    @classmethod
    def refused(cls, refused: AuthorizationError) -> BatchOutcome:
        """A record refused before it was queued (the ACLs refused its topic's metadata):
        settled at once, as Kafka's send() answers a failed future rather than raise, with an
        error that is both the AuthorizationError (its topic) and a ProduceError."""
        outcome = cls()
        outcome.settle(NO_OFFSET, -1, record_refusal(refused))
        return outcome

    def add_piece(self, piece: Piece) -> None:
        """A piece of the split batch settled (by the driver, before `settle`)."""
        if self.pieces is None:
            self.pieces = []
        self.pieces.append(piece)

    def _piece_of(self, index: int) -> Piece:
        assert self.pieces is not None
        return self.pieces[bisect_right(self.pieces, index, key=_first_index) - 1]

    def error_of(self, index: int) -> KafkaError | None:
        """Record `index`'s error once settled (None: written)."""
        return self.error if self.pieces is None else self._piece_of(index)[3]

    def failures(self, first: int, count: int) -> tuple[KafkaError | None, int]:
        """Among records [first, first + count): the first error, and how many failed."""
        if self.pieces is None:
            return self.error, count if self.error is not None else 0
        first_error, failed = None, 0
        for index in range(first, first + count):
            error = self.error_of(index)
            if error is not None:
                first_error = first_error or error
                failed += 1
        return first_error, failed

    def settle(
        self, base_offset: int, log_append_time: int, error: KafkaError | None
    ) -> list[Callable[[], None]]:
        """Record the outcome, wake the waiters; return the user callbacks to run elsewhere."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        with _EVENT_LOCK:
            self.done = True
            if self.event is not None:
                self.event.set()
            wakers, callbacks = self.wakers, self.callbacks
            self.wakers = self.callbacks = None
        for waker in wakers or ():
            waker()
        return callbacks or []

    def metadata(self, index: int, topic: str, partition: int, timestamp: int) -> RecordMetadata:
        """The settled result of record `index` (raises the batch's error)."""
        base_offset, log_append_time, error = self.base_offset, self.log_append_time, self.error
        if self.pieces is not None:
            first, base_offset, log_append_time, error = self._piece_of(index)
            index -= first
        if error is not None:
            raise error
        offset = NO_OFFSET if base_offset == NO_OFFSET else base_offset + index
        if log_append_time >= 0:
            timestamp = log_append_time
        return RecordMetadata(topic, partition, offset, timestamp)


class BatchOutcomes:
    """The outcomes of unfinished batches, by batch id. Made under the driver's lock when a
    record opens its batch, so a batch cannot complete before its outcome exists."""

    def __init__(self) -> None:
        # Filled by the driver's append() (inline: it is the hottest path), emptied by settle().
        self.by_batch_id: dict[int, BatchOutcome] = {}
        self._messages: dict[int, str] = {}  # batch id -> the broker's last error message
        fork_safety.call_in_child(self)

    def after_fork_in_child(self) -> None:
        """In a child process forked while these batches were unsettled: the driver that would
        settle them stayed in the parent, so each fails here at once with the fork error (a
        result() waited for ever). No thread of the parent's waits here, and the callbacks are
        the parent's to run: both are dropped. The lock is new: a parent thread may have held
        it at the fork."""
        global _EVENT_LOCK
        _EVENT_LOCK = threading.Lock()
        error = fork_safety.forked_error("producer")
        for outcome in self.by_batch_id.values():
            outcome.error, outcome.pieces, outcome.done = error, None, True
            outcome.event = outcome.wakers = outcome.callbacks = None
        self.by_batch_id.clear()

    def note_message(self, batch_id: int, message: str) -> None:
        self._messages[batch_id] = message

    def settle(self, completed: list[Completed]) -> list[Callable[[], None]]:
        """Settle each completed batch's outcome; return the user callbacks to run elsewhere."""
        callbacks: list[Callable[[], None]] = []
        for done in completed:
            if done.batch_done:
                outcome = self.by_batch_id.pop(done.batch_id, None)
            else:
                outcome = self.by_batch_id.get(done.batch_id)
            message = self._messages.pop(done.batch_id, "")  # the broker's words, if any
            if outcome is None:
                continue
            error = None
            if done.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                # The broker answered the topic refused (per partition, as Kafka's Produce):
                # the AuthorizationError naming it, as for a refused topic's metadata.
                error = RecordAuthorizationError(
                    message or done.error_message, done.error_code, f"topic:{done.topic}"
                )
            elif done.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                # InitProducerId refused (an idempotent producer needs IDEMPOTENT_WRITE on the
                # cluster or WRITE on a topic, KIP-679): Kafka's ClusterAuthorizationException.
                error = RecordAuthorizationError(
                    message or done.error_message, done.error_code, CLUSTER_RESOURCE
                )
            elif done.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED:  # the login failed
                error = RecordAuthenticationError(message or done.error_message)
            elif done.error_code != ErrorCode.NONE:
                error = ProduceError(f"{done.error_message} {message}".strip(), done.error_code)
            if done.first_index or not done.batch_done:  # a piece of a split batch
                outcome.add_piece(
                    (done.first_index, done.base_offset, done.log_append_time_ms, error)
                )
            if done.batch_done:
                callbacks += outcome.settle(done.base_offset, done.log_append_time_ms, error)
        return callbacks


class _RecordHandle:
    __slots__ = ("_index", "_outcome", "_partition", "_timestamp", "_topic")

    def __init__(
        self, outcome: BatchOutcome, index: int, topic: str, partition: int, timestamp: int
    ) -> None:
        self._outcome = outcome
        self._index = index
        self._topic = topic
        self._partition = partition
        self._timestamp = timestamp

    def done(self) -> bool:
        return self._outcome.done

    def _metadata(self) -> RecordMetadata:
        return self._outcome.metadata(self._index, self._topic, self._partition, self._timestamp)

    def add_done_callback(self, callback: Callable[[Any], Any]) -> None:
        """Call `callback(self)` once settled: at once (on this thread) if it is, else on the
        producer's callback runner, off the I/O path. What a callback raises is logged and
        ignored either way, as concurrent.futures does (it reached the caller when settled)."""
        outcome = self._outcome
        with _EVENT_LOCK:
            if not outcome.done:
                if outcome.callbacks is None:
                    outcome.callbacks = []
                outcome.callbacks.append(lambda: callback(self))
                return
        run_callback(lambda: callback(self))


class RecordFuture(_RecordHandle):
    """The future of one record sent by the sync `Producer`: `result()` blocks until settled."""

    __slots__ = ()

    def _wait(self, timeout: float | None) -> None:
        outcome = self._outcome
        if outcome.done:
            return
        with _EVENT_LOCK:
            if outcome.done:
                return
            if outcome.event is None:
                outcome.event = threading.Event()
        if not outcome.event.wait(timeout):
            raise TimeoutError(f"the record was not acknowledged within {timeout} s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        return self._metadata()

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        self._wait(timeout)
        return self._outcome.error_of(self._index)


class AsyncRecordFuture(_RecordHandle):
    """The awaitable of one record sent by `AsyncProducer`: `await` it for its RecordMetadata."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        outcome = self._outcome
        if not outcome.done:
            waiter = asyncio.get_running_loop().create_future()

            def wake() -> None:
                if not waiter.done():
                    waiter.set_result(None)

            with _EVENT_LOCK:
                if outcome.done:
                    wake()
                else:
                    if outcome.wakers is None:
                        outcome.wakers = []
                    outcome.wakers.append(wake)
            yield from waiter.__await__()
        return self._metadata()

    def exception(self) -> KafkaError | None:
        """The record's error once settled (None on success or while not settled)."""
        outcome = self._outcome
        return outcome.error_of(self._index) if outcome.done else None


class RecordsFuture:
    """The future of a `send_many` call: done once every batch its records went to is settled.
    It keeps one (outcome, first record index, record count) triple per batch touched, not one
    handle per record."""

    __slots__ = ("_parts", "record_count")

    def __init__(self) -> None:
        self._parts: list[tuple[BatchOutcome, int, int]] = []
        self.record_count = 0

    @classmethod
    def refused(cls, refused: AuthorizationError, record_count: int) -> RecordsFuture:
        """send_many's records, every one failed: the ACLs refused their topic's metadata."""
        future = cls()
        future.add([(BatchOutcome.refused(refused), 0, record_count)])
        return future

    def add(self, parts: list[tuple[BatchOutcome, int, int]]) -> None:
        """Records appended (by the producer, while the call runs): their batches' outcomes."""
        self._parts += parts
        self.record_count += sum(count for _, _, count in parts)

    def done(self) -> bool:
        return all(outcome.done for outcome, _, _ in self._parts)

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for outcome, _, _ in self._parts:
            if outcome.done:
                continue
            with _EVENT_LOCK:
                if outcome.done:
                    continue
                if outcome.event is None:
                    outcome.event = threading.Event()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not outcome.event.wait(remaining):
                raise TimeoutError(f"the records were not all acknowledged within {timeout} s")

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        """The first failure among the records' batches (in the order they were appended), or
        None when every record was written."""
        self._wait(timeout)
        failures = (outcome.failures(first, count)[0] for outcome, first, count in self._parts)
        return next((error for error in failures if error is not None), None)

    def failed_count(self, timeout: float | None = None) -> int:
        """How many of the records failed (a failed batch, or piece, fails all its records)."""
        self._wait(timeout)
        return sum(outcome.failures(first, count)[1] for outcome, first, count in self._parts)

    def result(self, timeout: float | None = None) -> int:
        """The number of records written; raises the first failure if any record failed."""
        error = self.exception(timeout)
        if error is not None:
            raise error
        return self.record_count


def run_callback(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:
        log.exception("a send() callback raised")


class CallbackThread:
    """Runs user callbacks in order, off the driver's loop."""

    def __init__(self, stop_timeout_s: float) -> None:
        self._stop_timeout_s = stop_timeout_s
        self._queue: queue.SimpleQueue[list[Callable[[], None]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="samsa-callbacks", daemon=True)
        self._thread.start()

    def submit(self, callbacks: list[Callable[[], None]]) -> None:
        self._queue.put(callbacks)

    def _run(self) -> None:
        while (callbacks := self._queue.get()) is not None:
            for callback in callbacks:
                run_callback(callback)

    def stop(self) -> None:
        """Run what is queued, then end. Called by a callback (close() inside one), it cannot
        wait for itself: the thread ends once that callback returns."""
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=self._stop_timeout_s)
