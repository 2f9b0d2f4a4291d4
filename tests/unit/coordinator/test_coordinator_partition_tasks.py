"""Goal: a coordinator partition's two loops (the write loop and the timer loop) end together:
when one raises, the other is cancelled and awaited, and the error reaches the partition's run
(which then gives the partition up); one that returns leaves the other running. Before, gather()
left an OffsetsPartition's timer loop ticking once a second for ever on the shard of a partition
whose write loop had failed.

Method: `partition_tasks.together` with small coroutines on a real event loop; no sleeps
beyond a few ms.
"""

from __future__ import annotations

import asyncio

import pytest

from samsa.services.coordinator.partition_tasks import together


def test_one_loop_failing_cancels_the_other_and_raises() -> None:
    ticks: list[int] = []
    cancelled = asyncio.Event()

    async def timer_loop() -> None:
        try:
            while True:
                ticks.append(1)
                await asyncio.sleep(0.001)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def write_loop() -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("fenced by a newer owner")

    async def run() -> None:
        with pytest.raises(RuntimeError, match="newer owner"):
            await together(write_loop(), timer_loop())
        assert cancelled.is_set(), "the timer loop ended with the partition"
        before = len(ticks)
        await asyncio.sleep(0.02)
        assert len(ticks) == before, "and ticks no more"
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

    asyncio.run(run())


def test_a_loop_that_returns_leaves_the_other_running_to_its_end() -> None:
    finished: list[str] = []

    async def quick() -> None:
        finished.append("quick")

    async def slow() -> None:
        await asyncio.sleep(0.02)
        finished.append("slow")

    asyncio.run(together(quick(), slow()))
    assert finished == ["quick", "slow"]


def test_cancelling_the_run_cancels_both_loops() -> None:
    cancelled: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    async def run() -> None:
        task = asyncio.create_task(together(forever("write"), forever("timer")))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(cancelled) == ["timer", "write"]

    asyncio.run(run())
