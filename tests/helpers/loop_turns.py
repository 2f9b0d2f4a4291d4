"""Let an event loop's other tasks run until they wait on something, counted in loop turns
rather than wall time: a negative checked after them ("the fetch is still waiting") then means
the task ran and chose to wait, on a fast machine or a slow one, where a fixed sleep may pass
before the task ran at all."""

from __future__ import annotations

import asyncio


async def turns(count: int = 50) -> None:
    for _ in range(count):
        await asyncio.sleep(0)
