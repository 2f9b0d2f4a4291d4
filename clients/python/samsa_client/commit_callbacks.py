"""The sync Consumer's commit_async() futures: their done callbacks run on the application's
thread, inside its next poll(), commit(), commit_async() or close() (Kafka's OffsetCommitCallback,
which invokeCompletedOffsetCommitCallbacks runs on the polling thread), in the order of the
commit_async() calls.

Why. A commit completes on the consumer's loop thread, and concurrent.futures runs a future's done
callbacks on the thread that completes it. So a callback ran on the loop thread, while the
application's thread was inside poll(): one that called the consumer (committed(), position(),
commit()) was refused with ConcurrentAccessError (thread_owner.py), and while it was inside such
a call, the polling thread's own next call was refused.

How. `CommitFuture` is a concurrent.futures.Future whose state is its commit's: `result()`,
`exception()`, `done()`, `wait` and `as_completed` see the coordinator's answer at once, on any
thread, and `cancel()` cancels the commit. Only its done callbacks are held back:
`CommitCallbacks.run_completed()`, which the Consumer calls on the caller's thread, runs them for
each future done, oldest commit first, and stops at the first not done yet (commits are sent one
after the other, group_driver.py, so an older one is answered first anyway). The completion
notifies the Consumer's condition, so a poll() waiting for records runs them at once. A callback
added to a future whose callbacks already ran runs at once, on the thread that adds it (as
concurrent.futures does for a done future); what a callback raises is logged and the next runs,
also as concurrent.futures does. close() runs them last, once every commit ended (the ones cut
short by the close are cancelled).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Callback = Callable[["CommitFuture"], object]


class CommitFuture(concurrent.futures.Future[None]):
    """A commit_async() future: its state is `source`'s, its done callbacks are held back (see
    the module doc)."""

    def __init__(
        self, source: concurrent.futures.Future[None], on_done: Callable[[], None]
    ) -> None:
        super().__init__()
        self._source = source
        self._on_done = on_done
        self._held: list[Callback] = []  # under _condition, the base class's lock
        self._delivered = False  # its callbacks ran: new ones run at once
        source.add_done_callback(self._copy)

    def _copy(self, source: concurrent.futures.Future[None]) -> None:
        """Any thread (the loop's, or close()'s cancelling it): take the commit's outcome."""
        if source.cancelled():
            concurrent.futures.Future.cancel(self)
        elif (error := source.exception()) is not None:
            self.set_exception(error)
        else:
            self.set_result(None)
        self._on_done()

    def cancel(self) -> bool:
        """Cancel the commit (its task on the loop); this future is cancelled with it."""
        return self._source.cancel()

    def add_done_callback(self, fn: Callback) -> None:  # type: ignore[override]
        """Run `fn(future)` on the consumer's thread once the commit ended (module doc)."""
        with self._condition:
            if not self._delivered:
                self._held.append(fn)
                return
        _call(fn, self)

    def run_callbacks(self) -> None:
        """The callbacks held so far, now, on this thread; later ones run when added."""
        with self._condition:
            self._delivered = True
            held, self._held = self._held, []
        for fn in held:
            _call(fn, self)


def _call(fn: Callback, future: CommitFuture) -> None:
    try:
        fn(future)
    except Exception:
        log.exception("exception calling callback for %r", future)


class CommitCallbacks:
    """The commit_async() futures whose callbacks have not run yet, oldest first."""

    def __init__(self, on_done: Callable[[], None]) -> None:
        self._on_done = on_done  # any thread: a commit ended (the Consumer wakes a poll())
        self._futures: deque[CommitFuture] = deque()
        self._lock = threading.Lock()

    def track(self, source: concurrent.futures.Future[None]) -> CommitFuture:
        """The future to hand out for a commit just handed to the loop (`source`'s)."""
        future = CommitFuture(source, self._on_done)
        with self._lock:
            self._futures.append(future)
        return future

    def run_completed(self) -> None:
        """On the application's thread: the callbacks of every commit ended, in commit order,
        up to the first still running. A callback may call the consumer (and so this) again."""
        futures = self._futures
        while futures:  # empty: one truth test, on poll()'s path
            with self._lock:
                if not futures or not futures[0].done():
                    return
                future = futures.popleft()
            future.run_callbacks()
