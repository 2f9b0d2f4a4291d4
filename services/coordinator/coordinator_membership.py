"""The coordinator's registration with the controller quorum, its heartbeats, and its leaving.

Theory of operation (DESIGN §6). At start the process registers under a fresh incarnation id and
gets its coordinator epoch (the offset of its registration record). It then heartbeats every
interval; the controller fences it when heartbeats stop for coordinator.session.timeout.ms and
moves its partitions of `__consumer_offsets` to the other live coordinators. A heartbeat that
answers STALE_BROKER_EPOCH (fenced, or the registration was replaced) means this process owns
nothing any more: the epoch goes to -1 at once (so the owner drops its partitions without
waiting for its image), and it registers again under a new epoch, which the controller answers
with a fresh assignment (assignment epoch + 1, fencing the old writers).

The lease. The controller fences a coordinator `coordinator.session.timeout.ms` after the last
heartbeat it *received*; a heartbeat answered as live was received after it was sent. So until
(send time of the last heartbeat answered live) + session timeout, the controller has not fenced
this coordinator and moved its partitions on that account: `lease_valid()`. Past it, the
coordinator must stop answering from memory (a partitioned zombie would otherwise keep members
that the new owner has already expired, and a partition would have two owners); it serves again
once a heartbeat is answered live, or registers again if it was fenced.

`leave()` is the controlled shutdown: heartbeat with want_shutdown until the controller has
fenced this coordinator, so its partitions move at once instead of after the session timeout.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

import grpc

from samsa.common.errors import ErrorCode
from samsa.services.runtime.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.services.runtime.metadata_log import sleep_or_stop, unless_stopped
from samsa.v1 import controller_pb2

log = logging.getLogger(__name__)

LEAVE_TIMEOUT_S = 5.0
REGISTER_BACKOFF_S = 0.5


class CoordinatorMembership:
    """Registration and heartbeats of one coordinator process."""

    def __init__(
        self,
        *,
        coordinator_id: int,
        endpoint: str,
        controllers: ControllerChannel,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        metadata_offset: Callable[[], int],
        on_epoch_change: Callable[[], None],
    ) -> None:
        self.coordinator_id = coordinator_id
        self.endpoint = endpoint
        # The internal listener's advertised address ("" without one), set once it is bound.
        self.internal_endpoint = ""
        self.controllers = controllers
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_s = session_timeout_ms / 1000
        self._lease_expires = float("-inf")  # loop.time() until which the controller holds us
        self.metadata_offset = metadata_offset
        self.on_epoch_change = on_epoch_change
        self.coordinator_epoch = -1

    def lease_valid(self) -> bool:
        """Whether the controller cannot have fenced this coordinator yet (see the docstring)."""
        return (
            self.coordinator_epoch >= 0 and asyncio.get_running_loop().time() < self._lease_expires
        )

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.coordinator_epoch:
            self.coordinator_epoch = epoch
            self.on_epoch_change()

    async def run(self, stop: asyncio.Event) -> None:
        """Register, then heartbeat until `stop` is set (registering again when told to)."""
        while not stop.is_set():
            if self.coordinator_epoch < 0:
                await self._register(stop)
                continue
            sent = asyncio.get_running_loop().time()
            try:
                # Not finished once stopping: it may wait an interval for a controller.
                response = await unless_stopped(stop, self._heartbeat(want_shutdown=False))
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("heartbeat failed: %s", error)
            else:
                if response is None:
                    return
                if response.status.error_code == ErrorCode.STALE_BROKER_EPOCH:
                    log.warning("fenced by the controller: registering again")
                    self._lease_expires = float("-inf")
                    self._set_epoch(-1)
                    continue
                if response.status.error_code == ErrorCode.NONE and not response.is_fenced:
                    self._lease_expires = sent + self.session_timeout_s
            await sleep_or_stop(stop, self.heartbeat_interval_ms / 1000)

    async def leave(self) -> None:
        """Controlled shutdown: be fenced now, so the partitions move without waiting."""
        if self.coordinator_epoch < 0:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LEAVE_TIMEOUT_S
        while loop.time() < deadline:
            try:
                response = await self._heartbeat(
                    want_shutdown=True, timeout_s=deadline - loop.time()
                )
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("controlled shutdown: no controller answered: %s", error)
                return
            if response.status.error_code or response.should_shut_down:
                return
            await asyncio.sleep(0.1)
        log.warning("controlled shutdown: the controller did not fence this coordinator in time")

    async def _register(self, stop: asyncio.Event) -> None:
        request = controller_pb2.RegisterCoordinatorRequest(
            coordinator_id=self.coordinator_id,
            incarnation_id=str(uuid.uuid4()),
            endpoint=self.endpoint,
            internal_endpoint=self.internal_endpoint,
        )
        while not stop.is_set():
            sent = asyncio.get_running_loop().time()
            try:
                response = await unless_stopped(
                    stop, self.controllers.write("RegisterCoordinator", request)
                )
            except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
                log.warning("registration failed, retrying: %s", error)
            else:
                if response is None:
                    return
                if response.status.error_code == ErrorCode.NONE:
                    log.info("registered", extra={"coordinator_epoch": response.coordinator_epoch})
                    self._lease_expires = sent + self.session_timeout_s
                    self._set_epoch(response.coordinator_epoch)
                    return
                log.warning(
                    "registration refused, retrying: %s %s",
                    ErrorCode(response.status.error_code).name,
                    response.status.error_message,
                )
            await sleep_or_stop(stop, REGISTER_BACKOFF_S)

    async def _heartbeat(
        self, *, want_shutdown: bool, timeout_s: float | None = None
    ) -> controller_pb2.CoordinatorHeartbeatResponse:
        """One heartbeat, waiting for a controller up to an interval (at least 1 s), or up to
        `timeout_s` when given (a controlled shutdown's deadline)."""
        request = controller_pb2.CoordinatorHeartbeatRequest(
            coordinator_id=self.coordinator_id,
            coordinator_epoch=self.coordinator_epoch,
            metadata_offset=self.metadata_offset(),
            want_shutdown=want_shutdown,
        )
        if timeout_s is None:
            timeout_s = max(1.0, self.heartbeat_interval_ms / 1000)
        return await self.controllers.write("CoordinatorHeartbeat", request, timeout_s)
