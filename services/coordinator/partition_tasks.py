"""Running a partition's tasks together (coordinator_partition.py: its write loop and timers)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


async def together(*coroutines: Coroutine[Any, Any, None]) -> None:
    """Run the coroutines until all return or one raises; then the others are cancelled (and
    awaited) and its exception raised. (asyncio.gather leaves the others running: a timer loop
    outlived its partition's failed write loop, ticking on a dead shard.)"""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
