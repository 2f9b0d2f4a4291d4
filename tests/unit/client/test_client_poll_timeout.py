"""Goal: poll()'s timeout is a number of seconds >= 0, as Kafka's poll(Duration) refuses a
negative one; NaN is refused too. poll(float('nan')) never returned: its deadline never passed
and every wait given NaN returns at once, so it spun a core for ever (both consumers). A
negative timeout returned [] at once. 0 and a positive timeout still mean what they say.

Method: consumers whose cluster is never reached (nothing assigned: no call leaves them).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator

import pytest

from samsa.client import AsyncConsumer, Consumer

CONFIG = {"bootstrap.servers": "127.0.0.1:1"}
REFUSED = [math.nan, -1, -0.5, "1", None, True]


@pytest.fixture(scope="module")
def consumer() -> Iterator[Consumer]:
    with Consumer(CONFIG) as made:
        yield made


@pytest.mark.parametrize("timeout", REFUSED)
def test_a_bad_timeout_is_refused(consumer: Consumer, timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        consumer.poll(timeout)  # type: ignore[arg-type]


def test_zero_and_a_positive_timeout_still_work(consumer: Consumer) -> None:
    started = time.monotonic()
    assert consumer.poll(0) == []
    assert consumer.poll(0.2) == []
    assert 0.15 < time.monotonic() - started < 5


@pytest.mark.parametrize("timeout", REFUSED)
def test_the_async_consumer_refuses_a_bad_timeout_too(timeout: object) -> None:
    async def main() -> None:
        async with AsyncConsumer(CONFIG) as made:
            with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
                async with asyncio.timeout(5):  # it spun here for ever
                    await made.poll(timeout)  # type: ignore[arg-type]

    asyncio.run(main())
