"""Closing a stream's request iterator, and why a wrapper closes the one it wraps.

gRPC's request iterator (grpc.aio's `_MessageReceiver`) and the async generator it hands out
refer to each other, and through its servicer context to the call: left unclosed when a handler
ends early, the call is freed only by a later garbage collection, not as its last reference goes.
The broker's write deadline (broker/requests/answer_write_deadline.py) ends calls by dropping
those references, so every wrapper of a request iterator closes what it wraps when it is closed
itself, and the handler closes the outermost one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


async def close_requests(requests: AsyncIterator[Any]) -> None:
    """Close `requests` (an async generator, or gRPC's iterator, which hands one out); a no-op
    for an iterator that cannot be closed or has ended."""
    source = aiter(requests)
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        await aclose()
