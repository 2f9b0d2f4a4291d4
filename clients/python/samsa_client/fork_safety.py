"""The clients (Producer, Consumer, their asyncio twins, Admin) in a process forked after they
were made.

Why. A sync client's work is done by its threads (the loop thread, the producer's callback
thread), and os.fork() copies none of them into the child: only the client's state, with the
records the parent had queued or in flight. Used in the child, a producer queued records that
nothing would send (their futures, a flush() and a close() without a timeout waited for ever), and
a consumer's poll() returned no records, without an error. Kafka's clients cannot be forked, and
librdkafka's (confluent-kafka) must not be used across a fork either; here every call of such a
client in the child raises an error that says so, and close() returns at once (the threads and
the loop it would stop are the parent's). Make the clients in the child, after the fork.

The same holds for what is not a thread. A sent record's future (record_future.py) from before
the fork is settled by the parent's driver only: in the child every one still pending fails at
once with that error (waiting on it hung for ever). The gRPC channels (channels.py), which
gRPC does not carry across a fork, refuse every call: the Admin's calls raise the error instead
of retrying on them until their timeout. The asyncio clients, whose driver task stayed on the
parent's loop, refuse their calls as the sync ones do (a send hung, a poll returned nothing).
A child that goes on running that loop (the copy of it the fork made) would still give their
drivers turns: sending the parent's queued batches again from the child, over the parent's
connections. Their drivers are stopped in the child (`stop_in_child`): each driver task is
cancelled, so that its next step raises at the await it waits in, and its loop-side wake() finds
it stopping.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any, Protocol

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode


class Forkable(Protocol):
    """A sync client: `_closed` makes close() return at once, `_forked` its calls raise
    `forked_error`."""

    _closed: bool
    _forked: bool


class AfterFork(Protocol):
    """What has more to undo in a child than a client's flags (channels, futures)."""

    def after_fork_in_child(self) -> None: ...


_clients: weakref.WeakSet[Forkable] = weakref.WeakSet()
_parts: weakref.WeakSet[AfterFork] = weakref.WeakSet()


class Driver(Protocol):
    """A driver of an asyncio client: its loop's task, and the flag its turns and wakes check."""

    _stopping: bool
    _task: asyncio.Task[Any] | None


def stop_in_child(*drivers: Driver | None) -> None:
    """In a forked child: none of `drivers` takes another turn, should the child run the loop."""
    for driver in drivers:
        if driver is not None:
            driver._stopping = True
            if driver._task is not None:
                driver._task.cancel()


def track(client: Forkable) -> None:
    """Mark `client` forked and closed in any child process forked while it lives."""
    _clients.add(client)


def call_in_child(part: AfterFork) -> None:
    """Call `part.after_fork_in_child()` in any child process forked while it lives."""
    _parts.add(part)


def forked_error(client: str) -> KafkaError:
    return KafkaError(
        f"this {client} was made in another process, before os.fork(): its threads and "
        f"connections did not follow into this one; make a new {client} here",
        ErrorCode.INVALID_REQUEST,
    )


def _in_child() -> None:
    for client in list(_clients):
        client._forked = client._closed = True
    _clients.clear()
    for part in list(_parts):
        part.after_fork_in_child()
    _parts.clear()


os.register_at_fork(after_in_child=_in_child)
