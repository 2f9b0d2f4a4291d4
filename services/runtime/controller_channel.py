"""A cluster member's gRPC link to the controller quorum: which controller to ask, and retrying.

Brokers and coordinators both use it (each signs as itself).

Theory of operation. Any controller answers reads (FetchMetadata); only the active one takes
writes (RegisterBroker, BrokerHeartbeat, AlterPartition, AllocateProducerIds, …) and the others
answer NOT_CONTROLLER naming it when they know it. So reads go to the controller that answered
last, and move to the next one when it is unreachable or did not answer in time (the read that
found it so fails when its deadline is spent, the next one starts elsewhere); writes go to the
active controller as last reported, follow a NOT_CONTROLLER redirect (at once the first time,
after a backoff from then on: two controllers may name each other while an election runs), and
otherwise walk the list with a short backoff, from after the controller that last failed one
(so a hung one costs one write its deadline, not every write). Every call has a deadline; the
retry loop is bounded by the caller's own deadline, redirects included. A redirect goes to the
active controller's internal listener when the member dials the controllers at theirs (its
bootstrap servers are their internal listeners: runtime/listeners.py), else to its public one.

A read controller that answers a member's metadata fetch with nothing new while the active
controller has said (in a write's status) that the log is committed further is behind the
quorum, cut off from it maybe: the member moves its reads (`move_reads`, metadata_log.py), as
KIP-595's observers fetch from the leader.

Every call (each retry too) carries a fresh membership proof signed as this member
(`MemberSigner`, services/runtime/member_auth.py): the controllers refuse registration,
heartbeats and AlterPartition without one, and a member-only RPC added later needs nothing more
here.

The channels follow TLS rotations (service_channels.ChannelCache): after the process took
rotated files, the next call dials the controllers again with them, so that a controller
restarted later is reconnected to with the new certificate. A call cut by the old channel's
close is retried like an unreachable controller's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Container, Sequence
from typing import Any

import grpc

from samsa.common.errors import ErrorCode
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.membership import method_path
from samsa.services.runtime.service_channels import ChannelCache, cancelled_by_close
from samsa.v1 import controller_pb2, controller_pb2_grpc

RETRY_BACKOFF_S = 0.1
# A lost write is retried within this: a broker starting beside its controllers registers
# within a quarter second of one becoming active, not after a backoff grown to a second.
RETRY_BACKOFF_MAX_S = 0.25
CALL_TIMEOUT_S = 5.0

SERVICE_NAME = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name


class ControllerUnavailableError(Exception):
    """No controller answered the call before its deadline."""


class ControllerChannel:
    """Stubs to every controller, and the retry policy around them."""

    def __init__(self, endpoints: Sequence[str], signer: MemberSigner) -> None:
        assert endpoints, "at least one controller endpoint is needed"
        self.endpoints = list(endpoints)
        self.signer = signer
        self._channels = ChannelCache(on_redial=self._dial)
        self._stubs: dict[str, controller_pb2_grpc.ControllerServiceStub] = {}
        self._dial()
        self._read_index = 0
        self._write_index = 0  # where a write starts when no active controller is known
        self._active: str | None = None
        # The committed end of the metadata log as the active controller last stated it (the
        # status of a write it answered): a controller answering reads from behind it lags.
        self.committed_offset_seen = 0

    def _dial(self) -> None:
        """A stub per controller, over channels dialled with the newest TLS files."""
        self._stubs = {
            e: controller_pb2_grpc.ControllerServiceStub(self._channels.get(e))
            for e in self.endpoints
        }

    def _stub(self, endpoint: str) -> controller_pb2_grpc.ControllerServiceStub:
        self._channels.follow()  # after a rotation: the stubs over new channels (_dial)
        return self._stubs[endpoint]

    async def close(self) -> None:
        await self._channels.close()

    def _proof(self, method: str) -> tuple[tuple[str, str], ...]:
        return self.signer.metadata(method_path(SERVICE_NAME, method))

    async def read(self, method: str, request: Any, timeout_s: float) -> Any:
        """Call a read RPC on some controller, moving on when one is unreachable."""
        deadline = time.monotonic() + timeout_s
        backoff = RETRY_BACKOFF_S
        while True:
            endpoint = self.endpoints[self._read_index % len(self.endpoints)]
            call = getattr(self._stub(endpoint), method)
            try:
                return await _call(call, request, deadline, self._proof(method))
            except grpc.aio.AioRpcError as error:
                if error.code() not in _RETRIABLE_STATUS:
                    raise
                # Even when the deadline is spent: a hung controller eats whole deadlines, and
                # the next read must not go back to it.
                self._read_index += 1
                if time.monotonic() >= deadline:
                    raise
            backoff = await _sleep_backoff(backoff, deadline)

    def move_reads(self) -> None:
        """Send the next reads to the next controller: the one answering them lags."""
        self._read_index += 1

    async def write(self, method: str, request: Any, timeout_s: float = CALL_TIMEOUT_S) -> Any:
        """Call a write RPC on the active controller, following NOT_CONTROLLER redirects."""
        deadline = time.monotonic() + timeout_s
        backoff = RETRY_BACKOFF_S
        endpoint = self._active or self.endpoints[self._write_index % len(self.endpoints)]
        redirected = False
        while True:
            call: Callable[..., Awaitable[Any]] = getattr(self._stub(endpoint), method)
            try:
                response = await _call(call, request, deadline, self._proof(method))
            except grpc.aio.AioRpcError as error:
                if error.code() not in _RETRIABLE_STATUS:
                    raise
                response = None
            if response is not None and response.status.error_code != ErrorCode.NOT_CONTROLLER:
                self._active = endpoint
                self.committed_offset_seen = max(
                    self.committed_offset_seen, response.status.metadata_offset
                )
                return response
            redirect = _redirect(response.status.active_controller, self._stubs) if response else ""
            if redirect in self._stubs and redirect != endpoint and time.monotonic() < deadline:
                # The controller told us where to go: at once the first time; after that with
                # the backoff, since two controllers may name each other while an election runs.
                if redirected:
                    backoff = await _sleep_backoff(backoff, deadline)
                redirected = True
                endpoint = redirect
                continue
            self._active = None
            # The next try, and the next write, start after this controller: one that hangs
            # costs one deadline, not every write's (it is first in the list after a failover).
            self._write_index = self.endpoints.index(endpoint) + 1
            if time.monotonic() >= deadline:
                raise ControllerUnavailableError(
                    f"{method}: no active controller among {', '.join(self.endpoints)} "
                    f"answered within {timeout_s:.1f} s"
                )
            endpoint = self.endpoints[self._write_index % len(self.endpoints)]
            backoff = await _sleep_backoff(backoff, deadline)

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int, timeout_s: float = CALL_TIMEOUT_S
    ) -> controller_pb2.AllocateProducerIdsResponse:
        """Take the next block of producer ids for this broker (its current epoch) from the
        active controller. The answer's status says whether it was given (STALE_BROKER_EPOCH
        for an epoch that is not the broker's current one)."""
        request = controller_pb2.AllocateProducerIdsRequest(
            broker_id=broker_id, broker_epoch=broker_epoch
        )
        response: controller_pb2.AllocateProducerIdsResponse = await self.write(
            "AllocateProducerIds", request, timeout_s
        )
        return response


def _redirect(active: controller_pb2.ControllerEndpoint, known: Container[str]) -> str:
    """Where a NOT_CONTROLLER answer sends a write: the active controller's internal listener
    when this member dials the controllers there (it is one of its bootstrap servers), else its
    public one."""
    if active.internal_endpoint and active.internal_endpoint in known:
        return active.internal_endpoint
    return active.endpoint


async def _call(
    call: Callable[..., Awaitable[Any]],
    request: Any,
    deadline: float,
    proof: tuple[tuple[str, str], ...],
) -> Any:
    """One try of a call; a cut by its channel's close (dropped at a TLS rotation) fails it as
    CANCELLED, to be retried on the new channel, not as this task's cancellation."""
    try:
        return await call(request, timeout=max(0.1, deadline - time.monotonic()), metadata=proof)
    except asyncio.CancelledError:
        if not cancelled_by_close():
            raise
        raise _ChannelClosedError() from None


class _ChannelClosedError(grpc.aio.AioRpcError):
    """A call whose channel was closed under it (dropped at a TLS rotation)."""

    def __init__(self) -> None:
        super().__init__(
            grpc.StatusCode.CANCELLED,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(),
            "the channel was closed: dialled again with rotated TLS files",
        )


_RETRIABLE_STATUS = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
}


async def _sleep_backoff(backoff: float, deadline: float) -> float:
    await asyncio.sleep(max(0.0, min(backoff, deadline - time.monotonic())))
    return min(backoff * 2, RETRY_BACKOFF_MAX_S)
