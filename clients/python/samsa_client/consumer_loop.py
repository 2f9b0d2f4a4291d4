"""The sync Consumer's hand-offs to its loop thread, and the rule that keeps them safe against a
close() on another thread.

Theory of operation. The Consumer (consumer.py) runs its drivers on an event loop of its own
thread, which the application's threads hand work to: coroutines to run (commits, lookups) and
callbacks (the drivers' wakes, an auto-commit to start). close() sets `_closed` under the
driver's lock, and only then stops the loop and closes it. So every hand-off is made under that
lock and only while `_closed` is false: it is then queued before the loop's stop and runs (a
coroutine still running when close() stops the drivers is cancelled, and its caller raises the
closed error); once closed it is refused with the closed error. Made after an unlocked check, a
hand-off raced close(): RuntimeError('Event loop is closed'), or on a loop stopped but not yet
closed a call that never ran and a caller waiting for it for ever.

close() waits for the drivers' stop only up to STOP_TIMEOUT_S, then stops the loop anyway (and
says so in a warning, not an error: the consumer is closed all the same): a
coroutine still running then is never cancelled by that stop and would never end. So the
futures of every coroutine handed over are kept until done, and those left when the loop stops
are cancelled: their callers raise the closed error (commit_async()'s future is cancelled).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.client import fork_safety
from samsa.client.consumer_calls import cancel_other_tasks, check_open
from samsa.common import event_loops

if TYPE_CHECKING:
    from samsa.client.consumer_driver import ConsumerDriver
    from samsa.client.group_driver import GroupDriver

T = TypeVar("T")

log = logging.getLogger(__name__)

# How long close() waits for the driver to stop and the loop thread to end.
STOP_TIMEOUT_S = 5.0


class LoopCalls:
    """The Consumer's calls across to its loop (a base class: the state is the Consumer's)."""

    _loop: asyncio.AbstractEventLoop
    _loop_thread: threading.Thread
    _progress: threading.Condition  # on the driver's lock
    _closed: bool  # set under that lock
    _driver: ConsumerDriver
    _handed_over: set[concurrent.futures.Future[Any]]  # not done yet (see the module docstring)

    _forked = False  # in a process forked after the consumer was made (fork_safety.py)

    def _start_loop(self) -> None:
        """Make the loop and start its thread (the Consumer's constructor)."""
        self._loop = event_loops.new_thread_loop("samsa-consumer")
        run_loop = self._loop.run_forever
        self._loop_thread = threading.Thread(target=run_loop, name="samsa-consumer", daemon=True)
        self._loop_thread.start()
        fork_safety.track(self)

    def _check_open(self) -> None:
        if self._forked:
            raise fork_safety.forked_error("Consumer")
        check_open(self._closed)

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Hand `coroutine` to the loop while open (see the module docstring)."""
        with self._progress:
            if self._closed:
                coroutine.close()  # never awaited: no warning
                self._check_open()
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
            self._handed_over.add(future)
        future.add_done_callback(self._handed_over.discard)
        return future

    def _on_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and wait for it; the closed error when close() ends it."""
        try:
            return self._submit(coroutine).result()
        except concurrent.futures.CancelledError:  # close() on another thread: say so
            self._check_open()
            raise

    def _wake_drivers(self, group: GroupDriver) -> None:
        """Under the lock: wake both drivers while open; once closed there is nothing to wake."""
        if not self._closed:
            group.wake_threadsafe()
            self._driver.wake_threadsafe()

    def _notify_progress(self) -> None:
        """On the loop: an answer was applied, so records, positions or errors may be ready."""
        with self._progress:
            self._progress.notify_all()

    def _stop_loop(self) -> None:
        """Once `_closed` is set: stop the drivers on the loop, then the loop and its thread."""
        stopped = asyncio.run_coroutine_threadsafe(self._stop_on_loop(), self._loop)
        try:
            stopped.result(STOP_TIMEOUT_S)
        except TimeoutError:  # closed all the same, as Kafka's close() is: no error to raise
            log.warning(
                "the consumer's drivers did not stop within %s s; stopped anyway", STOP_TIMEOUT_S
            )
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(STOP_TIMEOUT_S)
            for future in self._handed_over.copy():  # before the loop closes: cancel() asks it
                future.cancel()  # to cancel the task too; its caller raises the closed error
            if not self._loop.is_running():
                self._loop.close()

    async def _stop_on_loop(self) -> None:
        """Stop the driver, then finish what asyncio.run() finishes before its loop closes."""
        await self._driver.stop()
        await cancel_other_tasks()  # calls other threads wait for (poll()'s) end too
        await self._loop.shutdown_asyncgens()
        await self._loop.shutdown_default_executor()
