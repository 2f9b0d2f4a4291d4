"""Following the metadata log from the controllers: the image a member process serves from.

Theory of operation (DESIGN §2). A broker or a coordinator long-polls FetchMetadata with the end
offset and hash of its image, replays the batches it gets with the same pure `replay` the
controllers use (or, when it is behind or diverged, loads the snapshot the answer names, fetched
in chunks with FetchSnapshot and checked whole against its id before anything of it is applied:
metadata/snapshot_transfer.py), and hands (old image, new image) to `on_change`. At start, and
when it re-reads the log after a divergence, it hands nothing before the image reached the
committed end the controller named (a long log comes in pieces, and a prefix is an older
cluster, as Kafka's metadata loader also waits). The new image
becomes `image` only once `on_change` returns, so whatever the process reports (a heartbeat's
metadata offset) is what it has acted on. Registration and heartbeats are the caller's: they
differ between brokers and coordinators.

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
from samsa.metadata.snapshot import InvalidSnapshotError
from samsa.metadata.snapshot_transfer import SnapshotAssembler
from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.v1 import controller_pb2

T = TypeVar("T")

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 1_000
# The deadline of one FetchSnapshot chunk (limits.metadata_snapshot_chunk_bytes at most).
SNAPSHOT_CHUNK_TIMEOUT_S = 30.0

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
        # loop.time() at which the last answered fetch was sent (None: no answer has yet left
        # the image caught up): how current this process knows its image to be.
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
        # The image being built, and while catching up (at start, and after a divergence) the
        # committed end it must reach before `on_change` sees it (None: not catching up).
        base = self.image
        catch_up_to: int | None = -1  # -1: set from the first answer
        while not stop.is_set():
            request = controller_pb2.FetchMetadataRequest(
                end_offset=base.end_offset,
                hash=base.hash if base.end_offset else b"",
                max_wait_ms=0 if catch_up_to is not None else FETCH_MAX_WAIT_MS,
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
            self.quorum = QuorumView.of(response)
            if response.HasField("snapshot_id"):
                loaded = await self._load_snapshot(stop, response.snapshot_id)
                if loaded is None:
                    continue  # stopped, or the transfer failed: ask FetchMetadata again
                new = loaded
            else:
                try:
                    new = apply_fetch(base, response)
                except MetadataDivergenceError:
                    # The log is read again from offset 0 into a fresh image; the listener
                    # only sees the difference between the old image and the rebuilt one.
                    log.error("metadata diverged at offset %d: re-reading the log", base.end_offset)
                    base, catch_up_to = MetadataImage.empty(), -1
                    continue
            if (
                new is base
                and response.committed_end_offset < self.controllers.committed_offset_seen
            ):
                # Nothing new from a controller behind what the active one committed: it lags
                # or is cut off from the quorum, and this image would stand still with it.
                log.warning(
                    "the controller answering metadata fetches is at offset %d, the active one "
                    "committed %d: reading from another",
                    response.committed_end_offset,
                    self.controllers.committed_offset_seen,
                )
                self.controllers.move_reads()
            if catch_up_to is not None:
                if catch_up_to < 0:
                    catch_up_to = response.committed_end_offset
                # A controller answers a long log in pieces: a prefix of it is an older cluster
                # (old leader epochs, topics since deleted and re-created under their name),
                # which the listener must not act on. Not chased for ever: the end the first
                # answer named is enough; a piece that brought nothing ends the catching up.
                if new.end_offset < catch_up_to and new is not base:
                    base = new
                    continue
                catch_up_to = None
            base = new
            self.last_answered_fetch_sent = sent
            if new is not self.image:
                # The image becomes this process's (and its heartbeats report its offset) only
                # once the listener has applied it: opening thousands of logs yields to the
                # event loop meanwhile, so heartbeats keep the session alive.
                await self.on_change(self.image, new)
                self.image = new
                self._image_changed.set()
                self._image_changed = asyncio.Event()

    async def _load_snapshot(
        self, stop: asyncio.Event, snapshot_id: controller_pb2.SnapshotId
    ) -> MetadataImage | None:
        """The image of the snapshot `snapshot_id` names, fetched chunk by chunk and checked
        whole; None when `stop` is set or the transfer fails (the controller no longer holds the
        snapshot, the reads moved to another one, the bytes do not match the id)."""
        try:
            assembler = SnapshotAssembler(snapshot_id)
            while not assembler.done:
                request = controller_pb2.FetchSnapshotRequest(
                    snapshot_id=snapshot_id, position=assembler.position
                )
                response = await unless_stopped(
                    stop,
                    self.controllers.read("FetchSnapshot", request, SNAPSHOT_CHUNK_TIMEOUT_S),
                )
                if response is None:
                    return None
                assembler.accept(response.chunk)
            # Parsing and replaying it is CPU work (~1 s at 100,000 partitions): on a thread, so
            # that the loop keeps heartbeating meanwhile (it gets the GIL every 5 ms).
            return await asyncio.to_thread(assembler.image)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                log.warning("metadata snapshot fetch failed: %s", error.details())
                await sleep_or_stop(stop, 0.5)
        except InvalidSnapshotError as error:
            log.error("metadata snapshot at offset %d refused: %s", snapshot_id.end_offset, error)
            await sleep_or_stop(stop, 0.5)
        return None


def apply_fetch(
    image: MetadataImage, response: controller_pb2.FetchMetadataResponse
) -> MetadataImage:
    """The image after a FetchMetadata answer's batches, replayed in order (a deposed leader's
    stale batch is skipped, as every replica skips it; a gap before a batch raises
    MetadataDivergenceError, as a hash that does not match does). An answer naming a snapshot
    is the follower's to fetch (`MetadataLogFollower._load_snapshot`)."""
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
