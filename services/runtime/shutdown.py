"""SIGTERM and SIGINT become an asyncio.Event, so a service stops cleanly (health NOT_SERVING,
in-flight RPCs finished, logs checkpointed); a second signal exits at once."""

from __future__ import annotations

import asyncio
import os
import signal


def stop_event() -> asyncio.Event:
    """An event set by the first SIGTERM/SIGINT; must be called inside the running loop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            os._exit(130)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    return stop
