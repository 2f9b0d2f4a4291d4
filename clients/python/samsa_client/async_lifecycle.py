"""What AsyncProducer and AsyncConsumer check before they run: started once, and called on the
event loop that started them.

Why. Their driver is a task of the loop `start()` ran on, its streams and events that loop's.
Called from another loop, or after that loop was closed (two `asyncio.run()` calls: the first
closes its loop and cancels the driver with it), a call found no driver running: a send queued
its record in a producer that never sent it (awaiting it hung), and a poll returned no records
for ever, with no error. And a second `start()` made a second driver whose task nothing stopped.
aiokafka refuses both (its start() asserts it is not started twice; its futures belong to their
loop); so do these, with an error that says what to do.
"""

from __future__ import annotations

import asyncio

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode


def check_not_started(started_on: asyncio.AbstractEventLoop | None, client: str) -> None:
    """start()'s check: a client starts once (a stopped one cannot start again)."""
    if started_on is not None:
        raise KafkaError(
            f"this {client} was already started (a stopped one cannot start again: make a new one)",
            ErrorCode.INVALID_REQUEST,
        )


def check_loop(started_on: asyncio.AbstractEventLoop | None, client: str) -> None:
    """Every call's check once started: it runs on the loop `start()` ran on (None: not
    started, which the caller refuses by itself)."""
    if started_on is None:
        return
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not started_on:
        closed = " (now closed: asyncio.run() closes its loop)" if started_on.is_closed() else ""
        raise KafkaError(
            f"this {client} was started on another event loop{closed}: start it, use it and stop "
            "it on one loop (within one asyncio.run())",
            ErrorCode.INVALID_REQUEST,
        )
