"""Goal: an AsyncConsumer stopped (in another task) while its poll() awaits a coroutine listener
ends that poll() with the stopped consumer's error. stop() leaves the group, and
leaving runs the rebalance steps too: its begin_step() took the running listener call for ended
(GroupMember.begin_callback() replaced it with None), so poll()'s end_step() then failed with
AssertionError('no callback is running'). The sync Consumer's close() on another thread did the
same (test_client_consumer_close_group_poll_race.py).

Method: a real AsyncConsumer with a group.id whose bootstrap server refuses connections (no
coordinator is found, so the member moves only as the test moves it). The member is given
partition 0 by a heartbeat answer fed to it; the listener's on_partitions_assigned awaits an
event, stop() runs to its end meanwhile, then the listener returns.
"""

from __future__ import annotations

import asyncio

import pytest
from close_helpers import started_member_given_one
from rebalance_helpers import Recorder

from samsa.client import AsyncConsumer
from samsa.client.errors import KafkaError

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "auto.offset.reset": "earliest"}
POLL_S = 5.0


def test_a_stop_while_the_listener_runs_ends_the_poll() -> None:
    async def scenario() -> None:
        consumer = AsyncConsumer(CONFIG)
        await started_member_given_one(consumer)
        in_listener, release = asyncio.Event(), asyncio.Event()

        class Waiting(Recorder):
            async def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
                super().on_partitions_assigned(partitions)
                in_listener.set()
                await release.wait()

        consumer._listener = Waiting()
        polling = asyncio.create_task(consumer.poll(POLL_S))
        await in_listener.wait()
        await consumer.stop(timeout=0)  # to its end while the listener awaits
        release.set()
        with pytest.raises(KafkaError, match="stopped"):  # stop() set the event poll() waits on
            await asyncio.wait_for(polling, POLL_S)

    asyncio.run(scenario())
