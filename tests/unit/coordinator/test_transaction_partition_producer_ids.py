"""Goal: the coordinator takes a new producer id (a broker round trip, which may fail) only for a
decision that uses it. A request answered without a decision — a refused timeout, a retried
EndTxn whose answer was lost, a fenced producer, an id with a write in flight — is answered the
same whether or not a producer id can be taken now: the retry of a committed transaction at the
exhausted epoch is success, an out-of-range transaction.timeout.ms is INVALID_TRANSACTION_TIMEOUT
(a configuration error the client must not retry), never COORDINATOR_NOT_AVAILABLE.

Method: a real TransactionPartition over transaction_harness.py's fakes whose producer id
allocator is down (it raises what Coordinator.allocate_producer_id raises then) and counts its
calls; the epoch is set near exhaustion by hand, as the other exhaustion tests do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from typing import Protocol

import pytest
from transaction_harness import TransactionHarness, producer, until

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.transaction_partition import TransactionPartition
from samsa.services.coordinator.transaction_state import TRANSACTION_TIMEOUT_MS_MAX

A0 = ("t", 0)


class DownAllocator:
    """An allocator that cannot take a producer id, counting the attempts."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> int:
        self.calls += 1
        raise PartitionUnavailableError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "no producer id could be taken (test)"
        )


class Answer(Protocol):
    error_code: int
    producer_id: int
    producer_epoch: int


async def answered(call: Awaitable[Answer]) -> tuple[int, int, int]:
    """(error code, producer id, epoch) as the servicer answers: PartitionUnavailableError
    becomes its code."""
    try:
        answer = await call
    except PartitionUnavailableError as error:
        return error.code, -1, -1
    return answer.error_code, answer.producer_id, answer.producer_epoch


def allocator_down(partition: TransactionPartition) -> DownAllocator:
    down = DownAllocator()
    partition.allocate_producer_id = down
    return down


async def at_epoch(harness: TransactionHarness, name: str, producer_epoch: int) -> None:
    """As if the id's producer had ended many transactions: its state, set by hand."""
    shard = harness.partition.shard
    shard.transactions[name] = replace(shard.transactions[name], producer_epoch=producer_epoch)


def test_a_timeout_above_the_maximum_is_refused_before_a_producer_id_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running() as partition:
            down = allocator_down(partition)
            too_long = harness.init("new-app", timeout_ms=TRANSACTION_TIMEOUT_MS_MAX + 1)
            assert (await answered(too_long))[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
            assert (await answered(harness.init("")))[0] == ErrorCode.INVALID_REQUEST
            assert down.calls == 0

    asyncio.run(run())


def test_a_retried_commit_at_the_exhausted_epoch_is_success_without_a_new_producer_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running() as partition:
            who = await harness.open_transaction("app", A0)
            await at_epoch(harness, "app", 32765)
            before = producer("app", who.producer_id, 32765)
            first = await harness.end(before, commit=True)
            assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 32766)
            await until(lambda: harness.state("app") == "COMPLETE_COMMIT", "completed")
            down = allocator_down(partition)
            retry = await answered(harness.end(before, commit=True))  # the first was lost
            assert retry == (ErrorCode.NONE, first.producer_id, first.producer_epoch)
            other = await answered(harness.end(before, commit=False))
            assert other[0] == ErrorCode.INVALID_TXN_STATE
            assert down.calls == 0

    asyncio.run(run())


def test_a_fenced_producer_at_the_exhausted_epoch_is_told_so_without_a_new_producer_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running() as partition:
            who = await harness.open_transaction("app", A0)
            await at_epoch(harness, "app", 32766)
            zombie = producer("app", who.producer_id, 32766)
            fencing = await harness.init("app")  # a new instance aborts the open transaction
            assert fencing.error_code == ErrorCode.CONCURRENT_TRANSACTIONS, fencing
            await until(lambda: harness.state("app") == "COMPLETE_ABORT", "aborted")
            down = allocator_down(partition)
            for commit in (True, False):
                answer = await answered(harness.end(zombie, commit=commit))
                assert answer[0] == ErrorCode.PRODUCER_FENCED
            assert down.calls == 0
            # The new instance does need one (epoch 32767 is exhausted): the allocator's refusal.
            again = await answered(harness.init("app"))
            assert again[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert down.calls == 1

    asyncio.run(run())


def test_an_id_with_a_write_in_flight_answers_concurrent_transactions_without_a_producer_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running() as partition:
            harness.log.hold_next = hold = asyncio.Event()
            first = asyncio.ensure_future(harness.init("app"))  # a new id: its first record
            await until(lambda: "app" in partition.shard.pending, "the init in flight")
            down = allocator_down(partition)
            busy = await answered(harness.init("app"))
            assert busy[0] == ErrorCode.CONCURRENT_TRANSACTIONS
            assert down.calls == 0
            hold.set()
            assert (await first).error_code == ErrorCode.NONE

    asyncio.run(run())
