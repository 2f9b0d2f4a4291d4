"""Goal: the poll() that runs on_partitions_lost for a fatal group error (say FENCED_INSTANCE_ID:
another consumer took this one's group.instance.id over) raises that error itself. The error is
only raised once the partitions are released (test_client_group_fatal_releases.py), and the
facades checked for it before running the listener calls: the poll() that released them then
waited out its whole timeout with nothing to return, and only the next poll() raised.

Method: a real Consumer and AsyncConsumer with a group.id whose bootstrap server refuses
connections (no coordinator is found, so the member moves only as the test moves it); the member
is given partition 0, then fed the coordinator's fatal answer under the consumer's lock, as the
group driver would feed it. poll() with a long timeout must raise after the listener's
on_partitions_lost, without waiting for records first (the sync Consumer's condition says
whether it waited; the async poll() is given less than its timeout).
"""

from __future__ import annotations

import asyncio

import pytest
from close_helpers import TP, SignalledCondition, own_partition, started_member_given_one
from rebalance_helpers import LostRecorder

from samsa.client import AsyncConsumer, Consumer
from samsa.client.errors import KafkaError
from samsa.client.group_driver import now_ms
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as cp

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "enable.auto.commit": False}
REPLACED = cp.ConsumerGroupHeartbeatResponse(
    error_code=ErrorCode.FENCED_INSTANCE_ID, error_message="replaced by another instance"
)
POLL_S = 30.0  # a poll() that waits this long instead of raising times the test out


def test_the_sync_poll_that_releases_the_partitions_raises_the_fatal_error() -> None:
    consumer = Consumer(CONFIG)
    try:
        listener = LostRecorder()
        own_partition(consumer, listener)
        group = consumer._driver.group
        assert group is not None
        with consumer._progress:
            group.member.on_heartbeat_answer(REPLACED, now_ms())
        consumer._progress = waits = SignalledCondition(consumer._driver.lock)
        with pytest.raises(KafkaError, match="replaced") as raised:
            consumer.poll(POLL_S)
        assert raised.value.code is ErrorCode.FENCED_INSTANCE_ID
        assert not waits.waiting.is_set(), "poll() waited before raising the error"
        assert ("lost", [TP]) in listener.calls, listener.calls
        assert consumer.assignment() == []
    finally:
        consumer.close(timeout=0)


def test_the_async_poll_that_releases_the_partitions_raises_the_fatal_error() -> None:
    async def scenario() -> None:
        consumer = AsyncConsumer(CONFIG)
        try:
            driver = await started_member_given_one(consumer)
            listener = LostRecorder()
            consumer._listener = listener
            assert await consumer.poll(0) == []  # runs on_partitions_assigned
            assert driver.group is not None
            with driver.lock:
                driver.group.member.on_heartbeat_answer(REPLACED, now_ms())
            with pytest.raises(KafkaError, match="replaced") as raised:
                await asyncio.wait_for(consumer.poll(POLL_S), POLL_S / 2)
            assert raised.value.code is ErrorCode.FENCED_INSTANCE_ID
            assert listener.calls == [("assigned", [TP]), ("lost", [TP])], listener.calls
        finally:
            await consumer.stop(timeout=0)

    asyncio.run(scenario())
