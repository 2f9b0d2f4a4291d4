"""Goal: an AsyncConsumer's stop() that another stop() overlaps returns at once, as the sync
Consumer's close() does (test_client_consumer_close_twice.py): a listener that awaits stop() from
the stop()'s own on_partitions_revoked, or two tasks stopping at once. Before, the listener's
stop() waited out the leave (its own call had not returned) and stopped the consumer under the
outer stop(), whose leave then failed with the stopped consumer's error (logged as "leaving at
stop failed", with its traceback), and both committed at close and stopped the driver.

Method: a real AsyncConsumer with a group.id whose bootstrap server refuses connections; the
member is given partition 0 by a heartbeat answer fed to it, its on_partitions_assigned run.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from close_helpers import TP, started_member_given_one
from rebalance_helpers import Recorder

from samsa.client import AsyncConsumer

CONFIG = {
    "bootstrap.servers": "127.0.0.1:1",
    "group.id": "g",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": "false",
}
STOP_TIMEOUT_S = 0.5  # stop()'s budget for the cluster, which never answers here


async def member_owning_one(consumer: AsyncConsumer, listener: Recorder) -> None:
    """Start `consumer` and make it a member owning TP, `listener` told of it."""
    driver = await started_member_given_one(consumer)
    assert driver.group is not None
    consumer._listener = listener
    await consumer._run_rebalance_steps(driver, driver.group)
    assert driver.group.member.owned == frozenset({TP})


def test_a_listener_stopping_during_stop_leaves_the_stop_to_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        consumer = AsyncConsumer(CONFIG)

        class Stopping(Recorder):
            async def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
                super().on_partitions_revoked(partitions)
                await consumer.stop(STOP_TIMEOUT_S)

        listener = Stopping()
        await member_owning_one(consumer, listener)
        with caplog.at_level(logging.ERROR, logger="samsa.client.async_consumer"):
            await consumer.stop(STOP_TIMEOUT_S)
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        assert consumer._closed

    asyncio.run(scenario())


def test_two_stops_at_once_stop_once(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        consumer = AsyncConsumer(CONFIG)
        await member_owning_one(consumer, Recorder())
        driver = consumer._driver
        assert driver is not None
        stops = 0
        driver_stop = driver.stop

        async def counted_stop() -> None:
            nonlocal stops
            stops += 1
            await driver_stop()

        driver.stop = counted_stop  # type: ignore[method-assign]
        with caplog.at_level(logging.ERROR, logger="samsa.client.async_consumer"):
            await asyncio.gather(consumer.stop(STOP_TIMEOUT_S), consumer.stop(STOP_TIMEOUT_S))
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        assert consumer._closed and stops == 1

    asyncio.run(scenario())
