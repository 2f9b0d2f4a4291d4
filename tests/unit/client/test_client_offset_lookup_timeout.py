"""Goal: the consumer's offset lookups (offsets_for_times, beginning_offsets, end_offsets) are
bounded by default.api.timeout.ms, as Kafka's are, not by the group's session.timeout.ms (which
made a lookup of a partition without a leader wait 45 s whatever default.api.timeout.ms said).

Method: a real Consumer and AsyncConsumer pointed at a closed port, whose driver's
`list_offsets` is replaced by one recording the timeout it is given (no network).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samsa.client import AsyncConsumer, Consumer

TP = ("t", 0)
CONFIG = {
    "bootstrap.servers": "127.0.0.1:1",
    "default.api.timeout.ms": 1_500,
    "session.timeout.ms": 45_000,
}
LOOKUPS = {
    "offsets_for_times": lambda c: c.offsets_for_times({TP: 0}),
    "beginning_offsets": lambda c: c.beginning_offsets([TP]),
    "end_offsets": lambda c: c.end_offsets([TP]),
}


def recording(timeouts: list[float]) -> Any:
    async def list_offsets(wanted: object, timeout_s: float) -> dict[Any, Any]:
        timeouts.append(timeout_s)
        return {TP: (7, 0)}

    return list_offsets


@pytest.mark.parametrize("lookup", sorted(LOOKUPS))
def test_a_sync_lookup_waits_default_api_timeout(lookup: str) -> None:
    consumer = Consumer(CONFIG)
    try:
        timeouts: list[float] = []
        consumer._driver.list_offsets = recording(timeouts)  # type: ignore[method-assign]
        LOOKUPS[lookup](consumer)
        assert timeouts == [1.5]
    finally:
        consumer.close()


@pytest.mark.parametrize("lookup", sorted(LOOKUPS))
def test_an_async_lookup_waits_default_api_timeout(lookup: str) -> None:
    async def test() -> list[float]:
        consumer = AsyncConsumer(CONFIG)
        await consumer.start()
        try:
            timeouts: list[float] = []
            consumer._started().list_offsets = recording(timeouts)  # type: ignore[method-assign]
            await LOOKUPS[lookup](consumer)
            return timeouts
        finally:
            await consumer.stop()

    assert asyncio.run(test()) == [1.5]
