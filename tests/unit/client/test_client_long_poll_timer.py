"""Goal: time spent waiting inside poll() counts as polling, as in Kafka (its consumer restarts the
poll timer on every turn of poll's wait): a poll(timeout) longer than max.poll.interval.ms on a
quiet topic must not let the member go stale. Before, the timer restarted once, when poll()
began, so `poll(timeout=600)` (or any timeout above max.poll.interval.ms, 5 min by default)
made the group driver leave the group in the middle of it; the partitions went to another member
while this one, still inside the same poll(), kept fetching and could return their records: a
partition read by two members at once.

Method: the sync Consumer and the AsyncConsumer facades over a fake driver (the real FetchState)
whose group records when poll() restarts the poll timer (GroupDriver.on_poll); poll() waits for
records that never come, with max.poll.interval.ms much shorter than its timeout, and the gaps
between timer restarts (and the poll's end) are measured. No cluster, no network.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

from samsa.client import AsyncConsumer, Consumer
from samsa.client.commit_callbacks import CommitCallbacks
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_member import MemberState
from samsa.client.rebalance import ConsumerRebalanceListener

MAX_POLL_INTERVAL_MS = 200
POLL_TIMEOUT_S = 0.7
CONFIG = {
    "bootstrap.servers": "127.0.0.1:1",
    "group.id": "g",
    "auto.offset.reset": "earliest",
    "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
}


class FakeMember:
    state = MemberState.STABLE  # in the group, no error

    def pending_callback(self) -> None:
        return None

    def begin_callback(self) -> None:
        return None


class FakeGroup:
    def __init__(self) -> None:
        self.member = FakeMember()
        self.timer_restarts: list[float] = []

    def on_poll(self) -> tuple[bool, None]:
        self.timer_restarts.append(time.monotonic())
        return False, None

    def wake(self) -> None:
        pass

    def wake_threadsafe(self) -> None:
        pass


class FakeDriver:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state = FetchState(ConsumerConfig.from_dict(CONFIG))
        self.group = FakeGroup()

    def wake(self) -> None:
        pass

    def wake_threadsafe(self) -> None:
        pass


def longest_gap_ms(restarts: list[float], ended: float) -> float:
    times = [*restarts, ended]
    return max(b - a for a, b in itertools.pairwise(times)) * 1000


def sync_consumer(driver: FakeDriver) -> Consumer:
    consumer = Consumer.__new__(Consumer)
    consumer.config = ConsumerConfig.from_dict(CONFIG)
    consumer._driver = driver  # type: ignore[assignment]
    consumer._state = driver.state
    consumer._progress = threading.Condition(driver.lock)
    consumer._closed = False
    consumer._owner = threading.RLock()  # thread_owner.py
    consumer._commit_callbacks = CommitCallbacks(lambda: None)  # commit_callbacks.py
    consumer._listener = ConsumerRebalanceListener()
    consumer._tracer = None
    return consumer


def test_a_long_sync_poll_keeps_restarting_the_poll_timer() -> None:
    driver = FakeDriver()
    consumer = sync_consumer(driver)
    assert consumer.poll(timeout=POLL_TIMEOUT_S) == []
    ended = time.monotonic()
    assert longest_gap_ms(driver.group.timer_restarts, ended) < MAX_POLL_INTERVAL_MS


def test_a_long_async_poll_keeps_restarting_the_poll_timer() -> None:
    driver = FakeDriver()
    consumer = AsyncConsumer(CONFIG)
    consumer._driver = driver  # type: ignore[assignment]

    async def main() -> None:
        assert await consumer.poll(timeout=POLL_TIMEOUT_S) == []

    asyncio.run(main())
    ended = time.monotonic()
    assert longest_gap_ms(driver.group.timer_restarts, ended) < MAX_POLL_INTERVAL_MS
