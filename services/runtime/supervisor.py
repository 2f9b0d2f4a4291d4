"""Background loops that outlive their errors: `supervise` runs one again after it raised.

Theory of operation. A service's background loops (the broker's maintenance, log cleaner, ISR
manager and scrubber, and its replica fetch loops, one per leader; the controller's session
fencing, leader rebalancing and coordinator housekeeping) run for the life of the process.
Each catches the failures it expects, but an unexpected one (a bug, a file gone under it) used
to end its task for good, in silence: the exception sat in the task until shutdown gathered it,
while the work stopped — a log cleaner dead after one bad pass let `__consumer_offsets` grow
without bound. Under `supervise` such an error is logged once at ERROR with its traceback (the
service's JSON log) and counted (`samsa.task.restarts` {task}, when metrics are on), and the
loop is started again after a backoff: 1 s, doubling up to 30 s while it keeps failing, back to
1 s once a run lasted a healthy minute (`RestartBackoff`, pure). The loop starts from scratch:
whatever it keeps in locals is rebuilt, which is what each of them does at process start anyway.

What is not restarted: a loop that returns (it stops when told to, or has nothing to do), and
cancellation, which passes straight through, so stopping a service still stops its loops at
once — also during a backoff, which also ends when the `stop` event is set. The loops whose
failure must stop the process (following the metadata log: its image would stand still) are
not supervised; their callers stop the service instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry.metrics import Counter

from samsa.services.runtime import metrics

log = logging.getLogger(__name__)

RESTART_BACKOFF_INITIAL_S = 1.0
# The longest wait between two restarts of a loop that keeps failing: a persistent fault is
# retried (and logged) twice a minute rather than flooding the log or being given up on.
RESTART_BACKOFF_MAX_S = 30.0
# A run this long was healthy: the next failure waits RESTART_BACKOFF_INITIAL_S again.
RESTART_HEALTHY_S = 60.0


@dataclass
class RestartBackoff:
    """How long to wait before restarting a loop that failed: `initial_s`, doubled after each
    failure up to `max_s`, and `initial_s` again after a run of at least `healthy_s`."""

    initial_s: float = RESTART_BACKOFF_INITIAL_S
    max_s: float = RESTART_BACKOFF_MAX_S
    healthy_s: float = RESTART_HEALTHY_S
    _next_s: float = field(init=False)

    def __post_init__(self) -> None:
        assert 0 < self.initial_s <= self.max_s, "backoffs are positive and bounded"
        assert self.healthy_s >= 0
        self._next_s = self.initial_s

    def after_failure(self, ran_s: float) -> float:
        """The wait before the restart of a run that failed after `ran_s` seconds."""
        if ran_s >= self.healthy_s:
            self._next_s = self.initial_s
        delay_s = self._next_s
        self._next_s = min(self._next_s * 2, self.max_s)
        return delay_s


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    stop: asyncio.Event | None = None,
    backoff: RestartBackoff | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Await `run()` until it returns; after it raises, log the error, count the restart and
    await a fresh `run()` once the backoff passed. Returns at once when `stop` is set during a
    backoff; a cancellation ends it at any point (see the module docstring)."""
    backoff = backoff or RestartBackoff()
    while True:
        started = clock()
        try:
            await run()
            return
        except Exception:  # CancelledError is not one: it ends the loop
            delay_s = backoff.after_failure(clock() - started)
            log.exception(
                "background task %s failed; restarting it in %.1f s",
                name,
                delay_s,
                extra={"task": name, "restart_in_s": delay_s},
            )
        _restarts().add(1, {"task": name})
        if stop is None:
            await asyncio.sleep(delay_s)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay_s)
            return


@functools.cache
def _restarts() -> Counter:
    """The restart counter, made at the first restart (after `metrics.start`, when on)."""
    return metrics.meter().create_counter(
        "samsa.task.restarts",
        description="background loops restarted after an unexpected error, by task",
    )
