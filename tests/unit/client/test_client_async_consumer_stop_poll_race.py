"""Goal: a stop() that runs while an AsyncConsumer's poll() is suspended between its open check and
its wait still ends that poll() at once. With a group, poll() checks that the consumer is open,
then awaits the rebalance steps, and only then cleared the progress event: the clear() erased the
set() of a stop() that ran during that await, so poll() then waited min(timeout,
max.poll.interval.ms / 2) (150 s by default) on a stopped consumer.

Method: a real AsyncConsumer with a group.id (so poll() awaits its rebalance steps), bootstrap
refusing connections, assigned a partition with a position. Its rebalance steps are wrapped so
that on poll()'s first turn stop() runs to its end in another task right there, inside the window
(the wrapper awaits that task: nothing depends on how the loop schedules). poll(timeout=POLL_S)
must then raise the stopped consumer's error well before POLL_S.
"""

from __future__ import annotations

import asyncio

import pytest
from rebalance_helpers import T

from samsa.client import AsyncConsumer
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.errors import KafkaError
from samsa.client.group_driver import GroupDriver

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
POLL_S = 10.0
ENDED_WITHIN_S = 5.0  # far under POLL_S: poll() only has to see the stop


def test_a_stop_during_polls_rebalance_steps_ends_the_poll() -> None:
    async def scenario() -> None:
        consumer = AsyncConsumer(CONFIG)
        await consumer.start()
        consumer._driver.state.assign([(T, 0)])
        consumer._driver.state.seek((T, 0), 5)
        run_rebalance_steps = consumer._run_rebalance_steps
        stopped_in_the_window: list[bool] = []

        async def steps_then_stop(driver: ConsumerDriver, group: GroupDriver) -> None:
            await run_rebalance_steps(driver, group)
            if not stopped_in_the_window:  # poll()'s first turn: stop() lands inside its await
                stopped_in_the_window.append(True)
                await asyncio.create_task(consumer.stop(timeout=0))

        consumer._run_rebalance_steps = steps_then_stop  # type: ignore[method-assign]
        with pytest.raises(KafkaError, match="stopped"):
            await asyncio.wait_for(consumer.poll(POLL_S), ENDED_WITHIN_S)
        assert stopped_in_the_window

    asyncio.run(scenario())
