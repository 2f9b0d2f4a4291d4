"""Waiting in an async test for what it checks, with a deadline, instead of a fixed sleep that
a loaded machine can outlast. Shared by the tests through pytest's `pythonpath`
(pyproject.toml)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

WAIT_S = 10.0


async def until(condition: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> None:
    """Return once `condition()` holds; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout_s:g} s"
        await asyncio.sleep(0.01)
