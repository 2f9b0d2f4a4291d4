"""The sync clients (Producer, Consumer) in a process forked after they were made.

Why. A sync client's work is done by its threads (the loop thread, the producer's callback
thread), and os.fork() copies none of them into the child: only the client's state, with the
records the parent had queued or in flight. Used in the child, a producer queued records that
nothing would send (their futures, a flush() and a close() without a timeout waited for ever), and
a consumer's poll() returned no records, without an error. Kafka's clients cannot be forked, and
librdkafka's (confluent-kafka) must not be used across a fork either; here every call of such a
client in the child raises an error that says so, and close() returns at once (the threads and
the loop it would stop are the parent's). Make the clients in the child, after the fork.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode


class Forkable(Protocol):
    """A sync client: `_closed` makes close() return at once, `_forked` its calls raise
    `forked_error`."""

    _closed: bool
    _forked: bool


_clients: weakref.WeakSet[Forkable] = weakref.WeakSet()


def track(client: Forkable) -> None:
    """Mark `client` forked and closed in any child process forked while it lives."""
    _clients.add(client)


def forked_error(client: str) -> KafkaError:
    return KafkaError(
        f"this {client} was made in another process, before os.fork(): its threads did not "
        f"follow into this one; make a new {client} here",
        ErrorCode.INVALID_REQUEST,
    )


def _in_child() -> None:
    for client in list(_clients):
        client._forked = client._closed = True
    _clients.clear()


os.register_at_fork(after_in_child=_in_child)
