"""What the consumer close() race tests share: a condition that says when a call waits on it, and
a sync Consumer (or a started AsyncConsumer) made a group member given one partition without a
cluster."""

from __future__ import annotations

import threading

from rebalance_helpers import T, answer

from samsa.client import AsyncConsumer, Consumer
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.group_driver import now_ms
from samsa.client.group_member import Subscription
from samsa.client.rebalance import ConsumerRebalanceListener

TP = (T, 0)


class SignalledCondition(threading.Condition):
    """The sync Consumer's condition (on the driver's lock), which says when a call waits on it:
    install it as `consumer._progress = SignalledCondition(consumer._driver.lock)`."""

    def __init__(self, lock: threading.Lock, waiting: threading.Event | None = None) -> None:
        super().__init__(lock)
        self.waiting = waiting if waiting is not None else threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        # Set under the lock, which close() takes to notify: its notify comes after this wait.
        self.waiting.set()
        return super().wait(timeout)


def own_partition(consumer: Consumer, listener: ConsumerRebalanceListener | None = None) -> None:
    """Make `consumer` a member of its group owning TP at epoch 1, its on_partitions_assigned
    run (through `listener`, if given)."""
    if listener is None:
        consumer.subscribe([T])
    else:
        consumer.subscribe([T], listener=listener)
    group = consumer._driver.group
    assert group is not None
    with consumer._progress:
        group.member.on_heartbeat_answer(answer(1, 0), now_ms())
    consumer._run_rebalance_steps(group)
    with consumer._progress:
        assert group.member.owned == frozenset({TP}), group.member.state


async def started_member_given_one(consumer: AsyncConsumer) -> ConsumerDriver:
    """Start `consumer` (whose cluster never answers) and feed its member a heartbeat answer
    giving it TP at epoch 1; its listener has not run yet. Returns the consumer's driver."""
    await consumer.start()
    driver = consumer._driver
    assert driver is not None and driver.group is not None
    member, now = driver.group.member, now_ms()
    with driver.lock:
        member.subscribe(Subscription(topics=frozenset({T})), now)
        assert member.heartbeat_request(now) is not None
        member.on_heartbeat_answer(answer(1, 0), now)
    return driver
