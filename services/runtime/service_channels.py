"""The grpc.aio channels a service dials its peers with: sized for the largest message Samsa
sends, TLS when the process is (transport.py), and traced when tracing is on
(telemetry.outgoing_interceptors), so that a call made while serving a traced request carries
the trace on.

Theory of operation (ChannelCache). A channel's TLS credentials are fixed when it is made, and
a channel that reconnects (its peer restarted) presents them again: a process that keeps its
channels for its lifetime would, after its certificate was rotated, present the old one at its
next reconnection, refused once the old one expired or its CA left the peers' bundles. So the
long-lived channels (to the controllers, to a leader, to the brokers, to the coordinators) are
held in a `ChannelCache`, which compares `transport.credentials_generation()` (moved by each
rotation the process takes; looked at at most once a second) at each use with the one its
channels were dialled at. When it moved, every channel is dropped from the cache, the next use
dials a new one with the new files, and the holder is told (`on_redial`) so that it drops the
stubs and streams it built on the old ones: its streams open again on the new channels, as
after a peer's restart. An old channel is closed once its calls ended, or after
RETIRED_CHANNEL_GRACE_S: longer than every deadline a holder gives a call, so that a call on it
ends on its own (answered, or its deadline), never by this close's cancel, which grpc.aio
raises in the caller as a CancelledError; what is left then are streams nobody waits on (the
holder already opened new ones), and their cancel is harmless (`cancelled_by_close` lets a
holder tell such a cancel from its task's own, to retry it).

Kafka's inter-broker clients do the same: each new connection is built from the reconfigured
keystore (KIP-226).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from samsa.common import limits
from samsa.services.runtime import transport
from samsa.services.runtime.telemetry import outgoing_interceptors

log = logging.getLogger(__name__)

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
]
# How long a channel dropped at a rotation may finish its calls before it is closed: longer than
# the longest deadline a holder gives a call (a snapshot chunk from a controller, 30 s).
RETIRED_CHANNEL_GRACE_S = 40.0

Stub = TypeVar("Stub")


def service_channel(endpoint: str, *, traced: bool = True) -> grpc.aio.Channel:
    """A channel to `endpoint` (host:port); build it on the event loop that will use it.
    `traced=False` for a channel that carries only connection streams and fetches (the replica
    fetcher's): those run in the background with no context to carry, and an interceptor would
    cost every message (common/quiet_rpcs.py)."""
    interceptors = outgoing_interceptors() if traced else None
    return transport.dial(endpoint, options=CHANNEL_OPTIONS, interceptors=interceptors)


class ChannelCache:
    """Channels by endpoint, dialled again after a TLS rotation (module docstring). Use it on
    one event loop; `dial` and `generation` are the transport's unless a test gives others."""

    def __init__(
        self,
        *,
        traced: bool = True,
        on_redial: Callable[[], None] | None = None,
        dial: Callable[..., grpc.aio.Channel] = service_channel,
        generation: Callable[[], int] = transport.credentials_generation,
        grace_s: float = RETIRED_CHANNEL_GRACE_S,
    ) -> None:
        self._traced = traced
        self._on_redial = on_redial
        self._dial = dial
        self._generation_now = generation
        self._grace_s = grace_s
        self.generation = generation()  # the one the cached channels were dialled at
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[str, Callable[..., Any]], Any] = {}
        self._retiring: dict[asyncio.Task[None], grpc.aio.Channel] = {}

    def follow(self) -> bool:
        """Drop every channel if the process took rotated TLS files since they were dialled
        (closing each once its calls ended) and tell the holder; True when it did."""
        now = self._generation_now()
        if now == self.generation:
            return False
        self.generation = now
        retired = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        if retired:
            log.info("TLS files rotated: dialling %d peer channels again", len(retired))
            loop = asyncio.get_running_loop()
            for channel in retired:
                task = loop.create_task(channel.close(self._grace_s))
                self._retiring[task] = channel
                task.add_done_callback(self._retired)
        if self._on_redial is not None:
            self._on_redial()
        return True

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.pop(task, None)

    def get(self, endpoint: str) -> grpc.aio.Channel:
        """The channel to `endpoint`, dialled with the newest TLS files."""
        self.follow()
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = self._dial(endpoint, traced=self._traced)
        return channel

    def stub(self, endpoint: str, make: Callable[[grpc.aio.Channel], Stub]) -> Stub:
        """`make(channel)` over the channel to `endpoint`, kept until the channel is dropped."""
        channel = self.get(endpoint)
        stub: Stub | None = self._stubs.get((endpoint, make))
        if stub is None:
            stub = self._stubs[(endpoint, make)] = make(channel)
        return stub

    async def close(self) -> None:
        """Close every channel now, those still finishing their calls too."""
        retiring = dict(self._retiring)
        for task in retiring:
            task.cancel()
        await asyncio.gather(*retiring, return_exceptions=True)
        channels = [*retiring.values(), *self._channels.values()]
        self._channels.clear()
        self._stubs.clear()
        await asyncio.gather(*(channel.close() for channel in channels))

    @property
    def retiring(self) -> int:
        """How many dropped channels are still finishing their calls."""
        return len(self._retiring)


def cancelled_by_close() -> bool:
    """Whether a CancelledError a call raised in the current task came from its channel's close
    (a channel dropped at a rotation, after RETIRED_CHANNEL_GRACE_S), not from the task being
    cancelled: then it is a call that failed, to try again on the new channel."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0
