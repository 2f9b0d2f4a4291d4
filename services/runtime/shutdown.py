"""SIGTERM and SIGINT become an asyncio.Event, so a service stops cleanly (health NOT_SERVING,
in-flight RPCs finished, logs checkpointed); a second signal exits at once, with 128 + its
number (143 for SIGTERM, 130 for SIGINT), as a shell reports a process a signal ended.

The signals are counted, not read off the event: a service also sets the event itself (a broker
whose metadata log stopped following stops), and a supervisor's first SIGTERM during that clean
stop must not count as a second one and cut it short (no checkpoint, no clean-shutdown mark)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable


class SignalCounter:
    """What the first and a later signal do (pure but for `exit_now`)."""

    def __init__(self, stop: asyncio.Event, exit_now: Callable[[int], None] = os._exit) -> None:
        self.stop = stop
        self.received = 0
        self._exit_now = exit_now

    def on_signal(self, signum: int) -> None:
        self.received += 1
        if self.received > 1:
            self._exit_now(128 + signum)
            return
        self.stop.set()


def stop_event() -> asyncio.Event:
    """An event set by the first SIGTERM/SIGINT; must be called inside the running loop."""
    loop = asyncio.get_running_loop()
    counter = SignalCounter(asyncio.Event())
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, counter.on_signal, signum)
    return counter.stop
