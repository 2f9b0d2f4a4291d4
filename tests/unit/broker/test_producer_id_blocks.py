"""Goal: a broker hands out each producer id once, only from inside a block the controller gave
it, asks for the next block once 90 % of the current one is used (with at most one request in
flight, which concurrent InitProducerId calls share), and answers COORDINATOR_NOT_AVAILABLE in
time when no block can be had; transactional ids are refused.

Method: the pure `ProducerIdBlocks` driven directly (step by step, then by a seeded random
schedule checked against the blocks it was given); the asyncio `ProducerIdManager` over a fake
controller channel that hands out consecutive blocks, counts the requests in flight and can be
told to refuse, with the retry backoff monkeypatched short.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from samsa.common.errors import ErrorCode
from samsa.services.broker.requests import producer_ids as module
from samsa.services.broker.requests.producer_id_blocks import (
    InvalidProducerIdBlockError,
    ProducerIdBlock,
    ProducerIdBlocks,
)
from samsa.services.broker.requests.producer_ids import (
    ProducerIdManager,
    ProducerIdsUnavailableError,
    init_producer_id,
)
from samsa.v1 import broker_pb2, controller_pb2


def test_ids_come_once_each_from_the_block_and_the_next_block_is_asked_for_at_90_percent() -> None:
    blocks = ProducerIdBlocks()
    assert blocks.take() is None and blocks.needs_block()
    blocks.add(ProducerIdBlock(100, 10))
    handed = []
    for _ in range(8):
        handed.append(blocks.take())
        assert not blocks.needs_block(), f"asked after only {len(handed)} of 10"
    handed.append(blocks.take())  # the 9th of 10: 90 % used
    assert blocks.needs_block()
    blocks.add(ProducerIdBlock(500, 10))  # fetched ahead: the current block is not used up
    assert not blocks.needs_block()
    handed.append(blocks.take())
    handed.append(blocks.take())  # from the block fetched ahead
    assert handed == [*range(100, 110), 500]


def test_without_a_block_ahead_no_id_is_made_up() -> None:
    blocks = ProducerIdBlocks()
    blocks.add(ProducerIdBlock(0, 2))
    assert [blocks.take(), blocks.take(), blocks.take()] == [0, 1, None]
    assert blocks.needs_block()
    blocks.add(ProducerIdBlock(2, 2))  # used up: the new block is in use at once
    assert blocks.take() == 2


@pytest.mark.parametrize(
    "bad",
    [
        ProducerIdBlock(50, 0),
        ProducerIdBlock(-1, 5),
        ProducerIdBlock(5, 10),
        ProducerIdBlock(2**63 - 2, 5),
    ],
)
def test_an_empty_overlapping_or_out_of_range_block_is_refused(bad: ProducerIdBlock) -> None:
    blocks = ProducerIdBlocks()
    blocks.add(ProducerIdBlock(0, 10))
    blocks.take()
    with pytest.raises(InvalidProducerIdBlockError):
        blocks.add(bad)
    assert blocks.take() == 1 and blocks.prefetched is None


@pytest.mark.parametrize("seed", range(20))
def test_a_random_schedule_hands_out_each_id_once_and_only_from_given_blocks(seed: int) -> None:
    rng = random.Random(seed)
    blocks = ProducerIdBlocks()
    given: list[range] = []
    next_start = 0
    handed: list[int] = []
    for _ in range(2000):
        if blocks.needs_block() and rng.random() < 0.3:  # the controller answers, sometime
            size = rng.randint(1, 20)
            start = next_start + rng.randint(0, 5)  # other brokers' blocks in between
            blocks.add(ProducerIdBlock(start, size))
            given.append(range(start, start + size))
            next_start = start + size
        producer_id = blocks.take()
        if producer_id is not None:
            handed.append(producer_id)
    assert handed == sorted(set(handed)), "ids strictly increase, so none repeats"
    assert all(any(i in block for block in given) for i in handed)
    assert len(handed) >= sum(len(b) for b in given) - 40  # at most the last two blocks unused


class FakeController:
    """Gives consecutive blocks of `size`; refuses with `refuse` when set, and a broker epoch
    other than `broker_epoch` (when set) with STALE_BROKER_EPOCH; counts calls."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self.next = 0
        self.calls = 0
        self.in_flight = 0
        self.in_flight_max = 0
        self.refuse: ErrorCode | None = None
        self.broker_epoch: int | None = None
        self.epochs: list[int] = []

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int, timeout_s: float
    ) -> controller_pb2.AllocateProducerIdsResponse:
        self.calls += 1
        self.epochs.append(broker_epoch)
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            await asyncio.sleep(0.005)  # a round trip: callers pile up meanwhile
        finally:
            self.in_flight -= 1
        response = controller_pb2.AllocateProducerIdsResponse()
        refuse = self.refuse
        if self.broker_epoch is not None and broker_epoch != self.broker_epoch:
            refuse = ErrorCode.STALE_BROKER_EPOCH
        if refuse is not None:
            response.status.error_code = refuse  # type: ignore[assignment]
            response.status.error_message = "refused by the test"
            return response
        response.producer_id_start, response.producer_id_len = self.next, self.size
        self.next += self.size
        return response


def test_concurrent_calls_share_one_request_and_get_distinct_ids() -> None:
    controller = FakeController(size=10)

    async def scenario() -> list[int]:
        manager = ProducerIdManager(1, controller, lambda: 7)
        ids = await asyncio.gather(*(manager.next_producer_id(2.0) for _ in range(95)))
        await manager.close()
        return list(ids)

    ids = asyncio.run(scenario())
    assert sorted(ids) == list(range(95))
    assert controller.in_flight_max == 1
    assert controller.calls == 10  # 95 ids from blocks of 10; the 10th block fetched ahead
    assert set(controller.epochs) == {7}


def test_no_block_in_time_answers_coordinator_not_available(monkeypatch) -> None:
    monkeypatch.setattr(module, "RETRY_BACKOFF_S", 0.01)
    controller = FakeController()
    controller.broker_epoch = 4  # the broker re-registered; it still asks with epoch 3
    epoch = {"value": 3}

    async def scenario() -> tuple[broker_pb2.InitProducerIdResponse, float, int]:
        manager = ProducerIdManager(1, controller, lambda: epoch["value"])
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = await init_producer_id(manager, broker_pb2.InitProducerIdRequest(), 0.55)
        elapsed = loop.time() - started
        epoch["value"] = 4  # the broker learns its new epoch
        recovered = await manager.next_producer_id(1.0)
        await manager.close()
        return answer, elapsed, recovered

    answer, elapsed, recovered = asyncio.run(scenario())
    assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "STALE_BROKER_EPOCH" in answer.error_message and "retry" in answer.error_message
    assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
    assert 0.2 <= elapsed < 0.55, "answers before the call's deadline, after the margin"
    assert controller.calls > 2, "retried while the caller waited"
    assert recovered == 0 and controller.epochs[-1] == 4


def test_an_unregistered_broker_asks_nobody() -> None:
    controller = FakeController()

    async def scenario() -> None:
        manager = ProducerIdManager(1, controller, lambda: -1)
        with pytest.raises(ProducerIdsUnavailableError, match="not registered"):
            await manager.next_producer_id(0.05)
        await manager.close()

    asyncio.run(scenario())
    assert controller.calls == 0


def test_a_transactional_id_is_refused_and_an_idempotent_producer_gets_epoch_0() -> None:
    async def scenario():
        manager = ProducerIdManager(1, FakeController(), lambda: 0)
        refused = await init_producer_id(
            manager, broker_pb2.InitProducerIdRequest(transactional_id="t"), None
        )
        given = await init_producer_id(manager, broker_pb2.InitProducerIdRequest(), None)
        await manager.close()
        return refused, given

    refused, given = asyncio.run(scenario())
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert "transaction coordinator" in refused.error_message
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    assert (given.error_code, given.producer_id, given.producer_epoch) == (0, 0, 0)


def test_the_wait_leaves_a_margin_before_the_callers_deadline() -> None:
    assert module.block_wait_s(None) == module.BLOCK_WAIT_S_MAX
    assert module.block_wait_s(1.0) == pytest.approx(1.0 - module.DEADLINE_MARGIN_S)
    assert module.block_wait_s(0.1) == 0.0
    assert module.block_wait_s(600.0) == module.BLOCK_WAIT_S_MAX
