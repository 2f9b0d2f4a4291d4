"""Producer ids on a broker: the block this broker owns, and InitProducerId answered from it.

Theory of operation (KIP-730; Kafka's RPCProducerIdManager). The active controller gives each
broker blocks of `limits.producer_id_block_size` ids (AllocateProducerIds), committed to the
metadata log before they are answered, so blocks of different brokers never overlap and a broker
hands out each id of its blocks once. The blocks are kept by the pure `ProducerIdBlocks`
(producer_id_blocks.py); `ProducerIdManager` is the asyncio side. At most one AllocateProducerIds
is in flight (one task, shared); InitProducerId calls that find no id wait for it, each bounded
by its own deadline, and a failed request is retried (after `RETRY_BACKOFF_S`) only while someone
still waits. A call that gets no id in time is answered COORDINATOR_NOT_AVAILABLE (retriable)
naming what went wrong. Ids of a block are lost when the broker stops: there are 2^63 of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

import grpc

from samsa.common.errors import ErrorCode
from samsa.services.broker.requests.producer_id_blocks import (
    InvalidProducerIdBlockError,
    ProducerIdBlock,
    ProducerIdBlocks,
)
from samsa.services.runtime.controller_channel import ControllerUnavailableError
from samsa.v1 import broker_pb2, controller_pb2

log = logging.getLogger(__name__)

# After a failed AllocateProducerIds, the next one (for a caller still waiting) waits this long.
RETRY_BACKOFF_S = 0.25
# One AllocateProducerIds, retries and redirects included (the channel's bound).
ALLOCATE_TIMEOUT_S = 5.0
# The longest an InitProducerId waits for a block: its own deadline less a margin to answer in,
# and never more than this (or this when the caller set no deadline).
BLOCK_WAIT_S_MAX = 5.0
DEADLINE_MARGIN_S = 0.25

TRANSACTIONAL_REFUSAL = (
    "transactional ids are answered by the transaction coordinator (InitTransactions of "
    "TransactionCoordinatorService); leave transactional_id empty for an idempotent producer"
)


class ProducerIdsUnavailableError(Exception):
    """No producer id could be had before the caller's deadline."""


class AllocatesProducerIds(Protocol):
    """What the manager needs of the controller channel."""

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int, timeout_s: float
    ) -> controller_pb2.AllocateProducerIdsResponse: ...


class ProducerIdManager:
    """Hands out producer ids, asking the controller for blocks (see the module docstring)."""

    def __init__(
        self, broker_id: int, channel: AllocatesProducerIds, broker_epoch: Callable[[], int]
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch  # -1 until registered
        self.blocks = ProducerIdBlocks()
        self.requests_sent = 0
        self._request: asyncio.Task[None] | None = None
        self._problem = "no block was asked for yet"

    async def next_producer_id(self, timeout_s: float) -> int:
        """A producer id never handed out before; ProducerIdsUnavailableError after `timeout_s`
        without a block to take it from."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            producer_id = self.blocks.take()
            if self.blocks.needs_block() and (self._request is None or self._request.done()):
                self._request = loop.create_task(self._allocate(), name="allocate-producer-ids")
            if producer_id is not None:
                return producer_id
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ProducerIdsUnavailableError(
                    f"broker {self.broker_id} got no block of producer ids from the controller "
                    f"within {timeout_s:.1f} s ({self._problem}); retry"
                )
            request = self._request
            assert request is not None
            await asyncio.wait({request}, timeout=remaining)  # never cancels the shared request
            if request.done() and not request.cancelled() and request.exception() is not None:
                raise request.exception()  # type: ignore[misc]  # a bug: INTERNAL, logged

    async def close(self) -> None:
        if self._request is not None and not self._request.done():
            self._request.cancel()
            await asyncio.gather(self._request, return_exceptions=True)

    async def _allocate(self) -> None:
        """One AllocateProducerIds; on failure, note why and back off before the next."""
        broker_epoch = self.broker_epoch()
        problem: str
        try:
            if broker_epoch < 0:
                problem = "this broker has not registered with the controller yet"
            else:
                self.requests_sent += 1
                response = await self.channel.allocate_producer_ids(
                    self.broker_id, broker_epoch, ALLOCATE_TIMEOUT_S
                )
                status = response.status
                if status.error_code == ErrorCode.NONE:
                    self.blocks.add(
                        ProducerIdBlock(response.producer_id_start, response.producer_id_len)
                    )
                    return
                problem = (
                    f"AllocateProducerIds answered {_code_name(status.error_code)}: "
                    f"{status.error_message}"
                )
        except ControllerUnavailableError as error:
            problem = str(error)
        except grpc.aio.AioRpcError as error:
            problem = f"AllocateProducerIds failed: {error.code().name}: {error.details()}"
        except InvalidProducerIdBlockError as error:
            problem = f"the controller's answer is refused: {error}"
        self._problem = problem
        log.warning("no producer id block", extra={"reason": problem})
        await asyncio.sleep(RETRY_BACKOFF_S)


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def block_wait_s(time_remaining_s: float | None) -> float:
    """How long an InitProducerId with this much time left may wait for a block."""
    if time_remaining_s is None:
        return BLOCK_WAIT_S_MAX
    return max(0.0, min(time_remaining_s - DEADLINE_MARGIN_S, BLOCK_WAIT_S_MAX))


async def init_producer_id(
    manager: ProducerIdManager,
    request: broker_pb2.InitProducerIdRequest,
    time_remaining_s: float | None,
) -> broker_pb2.InitProducerIdResponse:
    """InitProducerId for an idempotent producer: a fresh producer id and epoch 0."""
    if request.transactional_id:
        return _refused(ErrorCode.INVALID_REQUEST, TRANSACTIONAL_REFUSAL)
    try:
        producer_id = await manager.next_producer_id(block_wait_s(time_remaining_s))
    except ProducerIdsUnavailableError as error:
        return _refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error))
    return broker_pb2.InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)


def _refused(code: ErrorCode, message: str) -> broker_pb2.InitProducerIdResponse:
    return broker_pb2.InitProducerIdResponse(
        error_code=code,  # type: ignore[arg-type]
        error_message=message,
        producer_id=-1,
        producer_epoch=-1,
    )
