"""Following the metadata log from the controllers: the image a member process serves from.

Theory of operation (DESIGN §2). A broker or a coordinator long-polls FetchMetadata with the end
offset and hash of its image, replays the batches it gets (or loads the snapshot it gets when it
is behind or diverged) with the same pure `replay` the controllers use, and hands (old image, new
image) to `on_change`. The new image becomes `image` only once `on_change` returns, so whatever
the process reports (a heartbeat's metadata offset) is what it has acted on. Registration and
heartbeats are the caller's: they differ between brokers and coordinators.

Each answer also says who the controllers are, which one is active and the cluster's id; the
follower keeps the last (`quorum`), so that a broker answers DescribeCluster as a controller
would (services/broker/metadata/metadata_servicer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import grpc

from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import MetadataDivergenceError, StaleBatchError, replay
from samsa.metadata.snapshot import from_snapshot
from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.v1 import controller_pb2

T = TypeVar("T")

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 1_000

ImageListener = Callable[[MetadataImage, MetadataImage], Awaitable[None]]


@dataclass(frozen=True)
class QuorumView:
    """The controller quorum as the last answered FetchMetadata described it."""

    cluster_id: str = ""
    controllers: Mapping[int, str] = field(default_factory=dict)  # node id -> gRPC endpoint
    active_node_id: int | None = None  # None: the answering controller knew of none
    committed_end_offset: int = 0  # the committed end of the log at the answering controller

    @classmethod
    def of(cls, response: controller_pb2.FetchMetadataResponse) -> QuorumView:
        active = (
            response.status.active_controller
            if response.status.HasField("active_controller")
            else None
        )
        return cls(
            cluster_id=response.cluster_id,
            controllers={c.node_id: c.endpoint for c in response.controllers},
            active_node_id=active.node_id if active is not None else None,
            committed_end_offset=response.committed_end_offset,
        )


class MetadataLogFollower:
    """The replayed metadata image of one process, kept current by `run`."""

    def __init__(self, controllers: ControllerChannel, on_change: ImageListener) -> None:
        self.controllers = controllers
        self.on_change = on_change
        self.image = MetadataImage.empty()
        # loop.time() at which the last answered fetch was sent (None: none yet): how current
        # this process knows its image to be.
        self.last_answered_fetch_sent: float | None = None
        self.quorum = QuorumView()
        self._image_changed = asyncio.Event()

    async def wait_for_change(self, timeout_s: float) -> None:
        """Return when the image next changes, or after `timeout_s`."""
        changed = self._image_changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=timeout_s)

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the log until `stop` is set."""
        resync = False
        while not stop.is_set():
            # After a divergence the log is read again from offset 0 into a fresh image; the
            # listener only sees the difference between the old image and the rebuilt one.
            base = MetadataImage.empty() if resync else self.image
            request = controller_pb2.FetchMetadataRequest(
                end_offset=base.end_offset,
                hash=base.hash if base.end_offset else b"",
                max_wait_ms=0 if resync else FETCH_MAX_WAIT_MS,
            )
            sent = asyncio.get_running_loop().time()
            try:
                response = await unless_stopped(
                    stop,
                    self.controllers.read("FetchMetadata", request, FETCH_MAX_WAIT_MS / 1000 + 5),
                )
            except grpc.aio.AioRpcError as error:
                log.warning("metadata fetch failed: %s", error.details())
                await sleep_or_stop(stop, 0.5)
                continue
            if response is None:
                return  # stopped during the long-poll
            self.last_answered_fetch_sent = sent
            self.quorum = QuorumView.of(response)
            try:
                new = apply_fetch(base, response)
            except MetadataDivergenceError:
                log.error("metadata diverged at offset %d: re-reading the log", base.end_offset)
                resync = True
                continue
            resync = False
            if new is not self.image:
                # The image becomes this process's (and its heartbeats report its offset) only
                # once the listener has applied it: opening thousands of logs yields to the
                # event loop meanwhile, so heartbeats keep the session alive.
                await self.on_change(self.image, new)
                self.image = new
                self._image_changed.set()
                self._image_changed = asyncio.Event()


def apply_fetch(
    image: MetadataImage, response: controller_pb2.FetchMetadataResponse
) -> MetadataImage:
    """The image after a FetchMetadata answer: its snapshot, or its batches replayed in order
    (a deposed leader's stale batch is skipped, as every replica skips it)."""
    if response.HasField("snapshot"):
        return from_snapshot(response.snapshot)
    for batch in response.batches:
        try:
            image = replay(image, batch)
        except StaleBatchError:
            continue
    return image


async def unless_stopped(stop: asyncio.Event, call: Awaitable[T]) -> T | None:
    """`call`'s result, or None when `stop` is set first (the call is then cancelled): a
    long-poll must not hold a stopping service for the rest of its wait."""
    task = asyncio.ensure_future(call)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait((task,))
    return None


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds`, or less when `stop` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
