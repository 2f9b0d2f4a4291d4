"""The broker's side of the control plane: register, heartbeat, and follow the metadata log.

Theory of operation (DESIGN §2, KIP-631). At startup the broker registers with the active
controller under a fresh incarnation id and gets its broker epoch; it starts fenced. Two loops
then run until shutdown:

- the fetch loop long-polls FetchMetadata with the end offset and hash of its image, replays the
  batches it gets (or loads the snapshot it gets when it is behind or diverged) with the same
  pure `replay` the controllers use, and hands (old image, new image) to `on_change`, which turns
  the difference into partition actions;
- the heartbeat loop sends the applied metadata offset every broker.heartbeat.interval.ms. The
  controller unfences the broker once that offset has caught up, and fences it when heartbeats
  stop. STALE_BROKER_EPOCH (the controller forgot or replaced this registration) means: register
  again.

Controlled shutdown: `shutdown()` heartbeats with want_shutdown until the controller has fenced
the broker (its leaderships moved away), then keeps following the log until its own image shows
the fence — so the partitions have applied the leadership moves and answered their waiting acks=all
produces NOT_LEADER_OR_FOLLOWER before the broker stops serving (KIP-631's controlled shutdown
waits for the same). From then on every heartbeat carries want_shutdown, so a routine heartbeat
can never unfence a broker on its way out. Both waits share one deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable

import grpc

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import MetadataDivergenceError, StaleBatchError, replay
from samsa.metadata.snapshot import from_snapshot
from samsa.services.broker.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.v1 import controller_pb2

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 1_000
SHUTDOWN_TIMEOUT_S = 10.0

ImageListener = Callable[[MetadataImage, MetadataImage], Awaitable[None]]


class MetadataFollower:
    """Registration, heartbeats and the replayed metadata image of one broker process."""

    def __init__(
        self,
        *,
        broker_id: int,
        endpoint: str,
        rack: str,
        controllers: ControllerChannel,
        on_change: ImageListener,
        heartbeat_interval_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.rack = rack
        self.incarnation_id = str(uuid.uuid4())
        self.controllers = controllers
        self.on_change = on_change
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.image = MetadataImage.empty()
        self.broker_epoch = -1
        self.fenced = True
        self._registered = asyncio.Event()
        self._shutting_down = False
        self._image_changed = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Register, then follow and heartbeat until `stop` is set."""
        await self._register(stop)
        tasks = [
            asyncio.create_task(self._fetch_loop(stop), name="metadata-fetch"),
            asyncio.create_task(self._heartbeat_loop(stop), name="broker-heartbeat"),
        ]
        try:
            await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def shutdown(self) -> None:
        """Controlled shutdown: ask to be fenced so leaderships move before the process stops."""
        if self.broker_epoch < 0:
            return
        self._shutting_down = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_TIMEOUT_S
        while loop.time() < deadline:
            try:
                response = await self._heartbeat(want_shutdown=True)
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("controlled shutdown: no controller answered: %s", error)
                return
            if response.status.error_code:
                return
            if response.should_shut_down:
                break
            await asyncio.sleep(0.1)
        while not self.fenced_in_image() and loop.time() < deadline:
            changed = self._image_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=deadline - loop.time())
        if not self.fenced_in_image():
            log.warning("controlled shutdown: the fence did not reach this broker in time")

    def fenced_in_image(self) -> bool:
        """Whether this broker's own image shows this incarnation fenced (or replaced)."""
        me = self.image.brokers.get(self.broker_id)
        return me is None or me.fenced or me.broker_epoch != self.broker_epoch

    # --- registration and heartbeats --------------------------------------------------------

    async def _register(self, stop: asyncio.Event) -> None:
        request = controller_pb2.RegisterBrokerRequest(
            broker_id=self.broker_id,
            incarnation_id=self.incarnation_id,
            endpoint=self.endpoint,
            rack=self.rack,
        )
        while not stop.is_set():
            try:
                response = await self.controllers.write("RegisterBroker", request)
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("registration failed, retrying: %s", error)
                await asyncio.sleep(0.5)
                continue
            if response.status.error_code == ErrorCode.NONE:
                self.broker_epoch = response.broker_epoch
                log.info("registered", extra={"broker_epoch": self.broker_epoch})
                return
            log.warning(
                "registration refused, retrying: %s %s",
                ErrorCode(response.status.error_code).name,
                response.status.error_message,
            )
            await asyncio.sleep(0.5)

    async def _heartbeat(
        self, *, want_shutdown: bool = False
    ) -> controller_pb2.BrokerHeartbeatResponse:
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            metadata_offset=self.image.end_offset,
            want_shutdown=want_shutdown or self._shutting_down,
        )
        timeout_s = max(1.0, self.heartbeat_interval_ms / 1000)
        return await self.controllers.write("BrokerHeartbeat", request, timeout_s)

    async def _heartbeat_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                response = await self._heartbeat()
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("heartbeat failed: %s", error)
            else:
                if response.status.error_code == ErrorCode.STALE_BROKER_EPOCH:
                    log.warning("registration lost (stale broker epoch): registering again")
                    await self._register(stop)
                    continue
                if self.fenced != response.is_fenced:
                    log.info("fenced" if response.is_fenced else "unfenced")
                self.fenced = response.is_fenced
            await _sleep_or_stop(stop, self.heartbeat_interval_ms / 1000)

    # --- following the metadata log ----------------------------------------------------------

    async def _fetch_loop(self, stop: asyncio.Event) -> None:
        resync = False
        while not stop.is_set():
            # After a divergence the log is read again from offset 0 into a fresh image; the
            # partitions only see the difference between the old image and the rebuilt one.
            base = MetadataImage.empty() if resync else self.image
            request = controller_pb2.FetchMetadataRequest(
                end_offset=base.end_offset,
                hash=base.hash if base.end_offset else b"",
                max_wait_ms=0 if resync else FETCH_MAX_WAIT_MS,
            )
            try:
                response = await self.controllers.read(
                    "FetchMetadata", request, FETCH_MAX_WAIT_MS / 1000 + 5
                )
            except grpc.aio.AioRpcError as error:
                log.warning("metadata fetch failed: %s", error.details())
                await _sleep_or_stop(stop, 0.5)
                continue
            try:
                new = apply_fetch(base, response)
            except MetadataDivergenceError:
                log.error("metadata diverged at offset %d: re-reading the log", base.end_offset)
                resync = True
                continue
            resync = False
            if new is not self.image:
                # The image becomes this broker's (and its heartbeats report its offset) only
                # once the partitions have applied it: opening thousands of logs yields to the
                # event loop meanwhile, so heartbeats keep the broker's session alive.
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


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
