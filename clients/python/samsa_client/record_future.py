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
holding each batch's outcome they share and how many of them it holds.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from samsa.client.errors import KafkaError, ProduceError
from samsa.client.producer_batch import NO_OFFSET, Completed
from samsa.common.errors import ErrorCode

log = logging.getLogger(__name__)

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

    __slots__ = ("base_offset", "callbacks", "done", "error", "event", "log_append_time", "wakers")

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
        if self.error is not None:
            raise self.error
        offset = NO_OFFSET if self.base_offset == NO_OFFSET else self.base_offset + index
        if self.log_append_time >= 0:
            timestamp = self.log_append_time
        return RecordMetadata(topic, partition, offset, timestamp)


class BatchOutcomes:
    """The outcomes of unfinished batches, by batch id. Made under the driver's lock when a
    record opens its batch, so a batch cannot complete before its outcome exists."""

    def __init__(self) -> None:
        # Filled by the driver's append() (inline: it is the hottest path), emptied by settle().
        self.by_batch_id: dict[int, BatchOutcome] = {}
        self._messages: dict[int, str] = {}  # batch id -> the broker's last error message

    def note_message(self, batch_id: int, message: str) -> None:
        self._messages[batch_id] = message

    def settle(self, completed: list[Completed]) -> list[Callable[[], None]]:
        """Settle each completed batch's outcome; return the user callbacks to run elsewhere."""
        callbacks: list[Callable[[], None]] = []
        for done in completed:
            outcome = self.by_batch_id.pop(done.batch_id, None)
            message = self._messages.pop(done.batch_id, "")  # the broker's words, if any
            if outcome is None:
                continue
            error = None
            if done.error_code != ErrorCode.NONE:
                error = ProduceError(f"{done.error_message} {message}".strip(), done.error_code)
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
        producer's callback runner, off the I/O path."""
        outcome = self._outcome
        with _EVENT_LOCK:
            if not outcome.done:
                if outcome.callbacks is None:
                    outcome.callbacks = []
                outcome.callbacks.append(lambda: callback(self))
                return
        callback(self)


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
        return self._outcome.error


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
        """The batch's error once settled (None on success or while not settled)."""
        return self._outcome.error


class RecordsFuture:
    """The future of a `send_many` call: done once every batch its records went to is settled.
    It keeps one (outcome, record count) pair per batch touched, not one handle per record."""

    __slots__ = ("_parts", "record_count")

    def __init__(self) -> None:
        self._parts: list[tuple[BatchOutcome, int]] = []
        self.record_count = 0

    def add(self, parts: list[tuple[BatchOutcome, int]]) -> None:
        """Records appended (by the producer, while the call runs): their batches' outcomes."""
        self._parts += parts
        self.record_count += sum(count for _, count in parts)

    def done(self) -> bool:
        return all(outcome.done for outcome, _ in self._parts)

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for outcome, _ in self._parts:
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
        return next((o.error for o, _ in self._parts if o.error is not None), None)

    def failed_count(self, timeout: float | None = None) -> int:
        """How many of the records failed (each failed batch fails all its records)."""
        self._wait(timeout)
        return sum(count for outcome, count in self._parts if outcome.error is not None)

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
        self._queue.put(None)
        self._thread.join(timeout=self._stop_timeout_s)
