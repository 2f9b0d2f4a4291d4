"""The sync Consumer's rule: one thread at a time inside its calls (Kafka's KafkaConsumer
acquire() and release(), which throw ConcurrentModificationException).

Why. A Consumer's positions, buffers, auto-commit and listener calls belong to the thread that
polls: two threads polling at once took records from the same buffers and moved the same
positions, ran the rebalance listener twice and committed positions neither had processed, with
no error. Kafka's consumer refuses a call made while another thread is inside one; so does this
one, with ConcurrentAccessError. The thread inside may call again (a listener that commits or
seeks from poll()): ownership counts, as Kafka's refcount does. close() is exempt: it is how
another thread ends a poll() (this SDK's wakeup()); it hands nothing over to the caller's
buffers and waits on the lock every call takes. The calls made inside an exempt call on its
thread (the on_partitions_revoked that close() runs when it leaves the group, committing or
reading the assignment) are that call's, as a listener's inside poll() are poll()'s: they pass
whoever owns the consumer, as they did before this guard (they were refused while another
thread's poll() waited inside, the very case close() is exempt for).

Cost: one RLock acquire and release without blocking and one call frame, per public call:
about half a microsecond (poll(0) with nothing buffered: 1.8 -> 2.3 us on the development
machine), on poll()'s path too.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Collection
from typing import Any, Protocol, TypeVar

from samsa.client import fork_safety
from samsa.client.errors import ConcurrentAccessError

C = TypeVar("C", bound=type)


class Owned(Protocol):
    """A client whose calls `one_thread_at_a_time` guards: `_owner` is its own RLock."""

    _owner: threading.RLock
    _forked: bool


class _Guests(threading.local):
    """Per thread: the clients (by id) that this thread is inside an exempt call of."""

    def __init__(self) -> None:
        self.inside: list[int] = []


_guests = _Guests()


def one_thread_at_a_time(*, exempt: Collection[str]) -> Callable[[C], C]:
    """A class decorator: every public method of the class (its bases' included), but those
    named in `exempt`, raises ConcurrentAccessError when another thread is inside one; one
    called inside an exempt call, on its thread, always passes."""

    def decorate(cls: C) -> C:
        for name in dir(cls):
            method = inspect.getattr_static(cls, name)
            if name.startswith("_") or not inspect.isfunction(method):
                continue
            setattr(cls, name, _exempt(method) if name in exempt else _owned(method))
        return cls

    return decorate


def _owned(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def owned(self: Owned, *args: Any, **kwargs: Any) -> Any:
        if id(self) in _guests.inside:  # inside an exempt call on this thread: its own call
            return method(self, *args, **kwargs)
        owner = self._owner
        if not owner.acquire(blocking=False):
            raise _refusal(self, method.__name__)
        try:
            return method(self, *args, **kwargs)
        finally:
            owner.release()

    return owned


def _exempt(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def exempt(self: Owned, *args: Any, **kwargs: Any) -> Any:
        _guests.inside.append(id(self))
        try:
            return method(self, *args, **kwargs)
        finally:
            _guests.inside.remove(id(self))

    return exempt


def _refusal(client: Owned, call: str) -> Exception:
    name = type(client).__name__
    if client._forked:  # the owner was a thread of the parent's, at the fork
        return fork_safety.forked_error(name)
    return ConcurrentAccessError(
        f"this {name} is not safe for multi-threaded access: {call}() was called on thread "
        f"{threading.current_thread().name!r} while another thread was inside a call of it; "
        "use it from one thread at a time (close() may come from any)"
    )
