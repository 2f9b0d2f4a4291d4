"""Producer ids on a broker: the block this broker owns, and InitProducerId answered from it.

Theory of operation (KIP-730; Kafka's RPCProducerIdManager). The active controller gives each
broker blocks of `limits.producer_id_block_size` ids (AllocateProducerIds), committed to the
metadata log before they are answered, so blocks of different brokers never overlap and a broker
hands out each id of its blocks once. Two parts:

- `ProducerIdBlocks` is pure: the block in use, at most one block fetched ahead, the next id.
  `take` hands out the next id, or None when no block holds one; `needs_block` says when to ask
  for another — with no block, or once 90 % of the current one is handed out and none is fetched
  ahead, so that a busy broker rarely makes a producer wait for a round trip to the controller;
  `add` takes a block the controller gave. Invariants: an id is handed out only from inside a
  block; ids handed out strictly increase; a block that overlaps or precedes one already taken is
  refused (`InvalidProducerIdBlockError`), so a confused answer can never hand out an id twice.
- `ProducerIdManager` is the asyncio side. At most one AllocateProducerIds is in flight (one task,
  shared); InitProducerId calls that find no id wait for it, each bounded by its own deadline,
  and a failed request is retried (after `RETRY_BACKOFF_S`) only while someone still waits. A
  call that gets no id in time is answered COORDINATOR_NOT_AVAILABLE (retriable) naming what
  went wrong. Ids of a block are lost when the broker stops: there are 2^63 of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import grpc

from samsa.common.errors import ErrorCode
from samsa.services.broker.controller_channel import ControllerUnavailableError
from samsa.v1 import broker_pb2, controller_pb2

log = logging.getLogger(__name__)

# Ask for the next block once this share of the current one is handed out (Kafka's
# RPCProducerIdManager prefetches at 90 %): the last tenth covers the controller round trip.
PREFETCH_PERCENT = 90
# The largest id a batch header carries (int64).
PRODUCER_ID_MAX = 2**63 - 1
# After a failed AllocateProducerIds, the next one (for a caller still waiting) waits this long.
RETRY_BACKOFF_S = 0.25
# One AllocateProducerIds, retries and redirects included (the channel's bound).
ALLOCATE_TIMEOUT_S = 5.0
# The longest an InitProducerId waits for a block: its own deadline less a margin to answer in,
# and never more than this (or this when the caller set no deadline).
BLOCK_WAIT_S_MAX = 5.0
DEADLINE_MARGIN_S = 0.25

TRANSACTIONAL_REFUSAL = (
    "transactional ids are answered by the transaction coordinator, which this version does not "
    "have yet; leave transactional_id empty for an idempotent producer"
)


class InvalidProducerIdBlockError(ValueError):
    """A block that is empty, out of range, or not above every block taken before."""


class ProducerIdsUnavailableError(Exception):
    """No producer id could be had before the caller's deadline."""


@dataclass(frozen=True)
class ProducerIdBlock:
    """Ids [start, start + length) owned by this broker."""

    start: int
    length: int

    @property
    def end(self) -> int:
        return self.start + self.length

    @property
    def prefetch_at(self) -> int:
        """The next id at which the following block is asked for."""
        return self.start + self.length * PREFETCH_PERCENT // 100


class ProducerIdBlocks:
    """The block in use, the one fetched ahead, and the next id to hand out (pure)."""

    def __init__(self) -> None:
        self.current: ProducerIdBlock | None = None
        self.prefetched: ProducerIdBlock | None = None
        self.next_id = -1
        self._taken_end = 0  # every block added lies below this

    def take(self) -> int | None:
        """The next producer id, or None when no block holds one (ask for a block)."""
        self._advance()
        if self.current is None or self.next_id >= self.current.end:
            return None
        producer_id = self.next_id
        assert self.current.start <= producer_id < self.current.end
        self.next_id += 1
        return producer_id

    def needs_block(self) -> bool:
        """True when another block should be asked for: none is fetched ahead, and the current
        one is missing, used up, or handed out to its prefetch point."""
        self._advance()
        if self.prefetched is not None:
            return False
        return self.current is None or self.next_id >= self.current.prefetch_at

    def add(self, block: ProducerIdBlock) -> None:
        """Take a block the controller gave: in use at once if the current one is used up,
        otherwise fetched ahead."""
        if block.length <= 0 or block.start < 0 or block.end - 1 > PRODUCER_ID_MAX:
            raise InvalidProducerIdBlockError(
                f"producer id block [{block.start}, {block.end}) is empty or out of range"
            )
        if block.start < self._taken_end:
            raise InvalidProducerIdBlockError(
                f"producer id block [{block.start}, {block.end}) is not above the blocks taken "
                f"before (which end at {self._taken_end})"
            )
        assert self.prefetched is None, "a block is asked for only when none is fetched ahead"
        self._taken_end = block.end
        if self.current is None or self.next_id >= self.current.end:
            self.current, self.next_id = block, block.start
        else:
            self.prefetched = block

    def _advance(self) -> None:
        if (
            self.current is not None
            and self.next_id >= self.current.end
            and self.prefetched is not None
        ):
            self.current, self.next_id = self.prefetched, self.prefetched.start
            self.prefetched = None


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
