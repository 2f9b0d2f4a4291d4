"""The broker's side of the control plane: register, heartbeat, and follow the metadata log.

Theory of operation (DESIGN §2, KIP-631). At startup the broker registers with the active
controller under a fresh incarnation id and gets its broker epoch; it starts fenced. It names
the epoch its data directory last stopped cleanly under (`previous_broker_epoch`, -1: not
clean), so that the controller knows whether it may have lost its unflushed tail (KIP-966); a
stop before that (SIGTERM while no controller answers) ends the registration at once. Two
loops then run until shutdown:

- the fetch loop (services/runtime/metadata_log.py) long-polls FetchMetadata and replays what it
  gets, handing (old image, new image) to `on_change`, which turns the difference into partition
  actions;
- the heartbeat loop sends the applied metadata offset every broker.heartbeat.interval.ms. The
  controller unfences the broker once that offset has caught up, and fences it when heartbeats
  stop. STALE_BROKER_EPOCH (the controller forgot or replaced this registration) means: register
  again.

If either loop fails (applying an image raised), `run` ends with that failure and the
heartbeats with it: a broker must not keep its session alive while its metadata stands still.

Controlled shutdown: `shutdown()` heartbeats with want_shutdown until the controller has fenced
the broker (its leaderships moved away), then keeps following the log until its own image shows
the fence — so the partitions have applied the leadership moves and answered their waiting acks=all
produces NOT_LEADER_OR_FOLLOWER before the broker stops serving (KIP-631's controlled shutdown
waits for the same). From then on every heartbeat carries want_shutdown; and before its first one
it waits for the routine heartbeat in flight (sent without it, and retried across controllers for
up to an interval), which would otherwise land after it. A routine heartbeat can still reach a
controller late (one this side gave up on may yet be applied there), so the controller keeps the
broker's registration marked in controlled shutdown and no heartbeat of it unfences the broker
again (KIP-841, services/controller/broker_control.py). All the waits share one deadline.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import grpc

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.runtime.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.services.runtime.metadata_log import (
    ImageListener,
    MetadataLogFollower,
    sleep_or_stop,
    unless_stopped,
)
from samsa.v1 import controller_pb2

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 10.0
REGISTER_BACKOFF_S = 0.5  # between two registration attempts


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
        # The internal listener's advertised address ("" without one), set once it is bound.
        self.internal_endpoint = ""
        self.rack = rack
        self.incarnation_id = str(uuid.uuid4())
        self.controllers = controllers
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.log = MetadataLogFollower(controllers, on_change)
        self.broker_epoch = -1
        # The epoch the data directory last stopped cleanly under (-1: not clean), which the
        # broker reads before `run` (clean_shutdown.py); the first registration sends it.
        self.previous_broker_epoch = -1
        self.fenced = True
        self._shutting_down = False
        self._failed = False  # run ended with a loop's failure: the image follows no more
        # The heartbeat loop's call in flight, which shutdown() lets land before its own.
        self._routine_heartbeat: asyncio.Task[controller_pb2.BrokerHeartbeatResponse] | None = None

    @property
    def image(self) -> MetadataImage:
        return self.log.image

    async def run(self, stop: asyncio.Event) -> None:
        """Register, then follow and heartbeat until `stop` is set. Raises what ended either
        loop before that (applying an image failed: a disk error opening a log, a bug): the
        heartbeats stop with it, since they would keep alive a broker serving from an image
        frozen at that moment; the broker stops on it (broker.py)."""
        await self._register(stop)
        tasks = [
            asyncio.create_task(self.log.run(stop), name="metadata-fetch"),
            asyncio.create_task(self._heartbeat_loop(stop), name="broker-heartbeat"),
        ]
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    self._failed = True
                    raise task.exception()  # type: ignore[misc]
        finally:
            for task in [stopped, *tasks]:
                task.cancel()
            await asyncio.gather(stopped, *tasks, return_exceptions=True)

    async def shutdown(self) -> None:
        """Controlled shutdown: ask to be fenced so leaderships move before the process stops."""
        if self.broker_epoch < 0:
            return
        self._shutting_down = True  # every heartbeat built from now on carries want_shutdown
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_TIMEOUT_S
        routine = self._routine_heartbeat  # sent without want_shutdown: it must land first
        if routine is not None and not routine.done():
            await asyncio.wait([routine], timeout=deadline - loop.time())
        while loop.time() < deadline:
            try:
                response = await self._heartbeat(
                    want_shutdown=True, timeout_s=deadline - loop.time()
                )
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("controlled shutdown: no controller answered: %s", error)
                return
            if response.status.error_code:
                return
            if response.should_shut_down:
                break
            await asyncio.sleep(0.1)
        if self._failed:
            return  # the fence will never reach this image
        while not self.fenced_in_image() and loop.time() < deadline:
            await self.log.wait_for_change(deadline - loop.time())
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
            internal_endpoint=self.internal_endpoint,
            # KIP-966: registering again (STALE_BROKER_EPOCH), this process lost nothing.
            previous_broker_epoch=(
                self.broker_epoch if self.broker_epoch >= 0 else self.previous_broker_epoch
            ),
        )
        while not stop.is_set():
            try:
                # Not finished once stopping: a write may wait its whole deadline for a
                # controller, and a broker stopped before it registered has nothing to hand over.
                response = await unless_stopped(
                    stop, self.controllers.write("RegisterBroker", request)
                )
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("registration failed, retrying: %s", error)
                await sleep_or_stop(stop, REGISTER_BACKOFF_S)
                continue
            if response is None:
                return  # stopped
            if response.status.error_code == ErrorCode.NONE:
                self.broker_epoch = response.broker_epoch
                log.info("registered", extra={"broker_epoch": self.broker_epoch})
                return
            log.warning(
                "registration refused, retrying: %s %s",
                ErrorCode(response.status.error_code).name,
                response.status.error_message,
            )
            await sleep_or_stop(stop, REGISTER_BACKOFF_S)

    async def _heartbeat(
        self, *, want_shutdown: bool = False, timeout_s: float | None = None
    ) -> controller_pb2.BrokerHeartbeatResponse:
        """One heartbeat, waiting for a controller up to an interval (at least 1 s), or up to
        `timeout_s` when given (a controlled shutdown's deadline)."""
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            metadata_offset=self.image.end_offset,
            want_shutdown=want_shutdown or self._shutting_down,
        )
        if timeout_s is None:
            timeout_s = max(1.0, self.heartbeat_interval_ms / 1000)
        return await self.controllers.write("BrokerHeartbeat", request, timeout_s)

    async def _heartbeat_loop(self, stop: asyncio.Event) -> None:
        interval_s = self.heartbeat_interval_ms / 1000
        while not stop.is_set():
            offset_sent = self.image.end_offset
            self._routine_heartbeat = asyncio.create_task(self._heartbeat())
            try:
                response = await self._routine_heartbeat
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
                if self.fenced and offset_sent <= self.broker_epoch:
                    # Fenced because this broker's image did not yet hold its own registration
                    # (the controller unfences a broker caught up past it): heartbeat again as
                    # soon as it does, rather than an interval later, on every start.
                    await self._until_caught_up(interval_s)
                    continue
            await sleep_or_stop(stop, interval_s)

    async def _until_caught_up(self, timeout_s: float) -> None:
        """Until the image holds this broker's registration, or `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.image.end_offset <= self.broker_epoch and loop.time() < deadline:
            await self.log.wait_for_change(deadline - loop.time())
