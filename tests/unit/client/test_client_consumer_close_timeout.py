"""Goal: close(timeout) bounds how long a consumer waits for a cluster that does not answer, as
Kafka's close(Duration): the commit at close, the commit before on_partitions_revoked and the
group leave share the one budget (30 s by default). Before, close() took no timeout and each commit
retried for default.api.timeout.ms (60 s by default) on its own, so closing a consumer of a
group whose coordinator was gone held the application for a minute or more.

Method: real Consumer and AsyncConsumer whose bootstrap server refuses connections (127.0.0.1:1:
nothing listens), so no coordinator is ever found and every commit retries until it gives up.
Each consumer is given what makes close() commit: assigned partitions with a position (assign()
with a group.id), or a member of a group that owns some (its heartbeat answer is fed to the pure
member directly). A silent cluster is two loopback ports that accept connections and never
answer (the test's own listening sockets): a FindCoordinator there waits out its 5 s deadline.
close() is timed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from async_waits import until
from close_helpers import own_partition
from rebalance_helpers import T, answer

from samsa.client import AsyncConsumer, Consumer, consumer_calls
from samsa.client.group_driver import now_ms

UNREACHABLE = {
    "bootstrap.servers": "127.0.0.1:1",
    "group.id": "g",
    "default.api.timeout.ms": 60_000,
}
TP = (T, 0)
SLACK_S = 2.0  # the driver's own stop (fetch sessions, tasks), well under a second here


def assigned(consumer: Consumer) -> None:
    """As assign() would leave it (without its metadata check): a position to auto-commit."""
    with consumer._progress:
        consumer._state.assign([TP])
        consumer._state.seek(TP, 5)


def owning(consumer: Consumer) -> None:
    """A member of group "g" owning TP at epoch 1, its on_partitions_assigned run, at offset 5."""
    own_partition(consumer)
    with consumer._progress:
        consumer._state.seek(TP, 5)


def timed_close(consumer: Consumer, **timeout: float) -> float:
    began = time.monotonic()
    consumer.close(**timeout)
    return time.monotonic() - began


async def timed_close_after(consumer: AsyncConsumer, started: threading.Event, what: str) -> float:
    """Once `started` is set (the call close() must not wait for is under way), how long
    close(timeout=1.0) takes."""
    await until(started.is_set, what, timeout_s=5)
    began = time.monotonic()
    await consumer.close(timeout=1.0)
    return time.monotonic() - began


@pytest.mark.parametrize("setup", [assigned, owning], ids=["assigned", "subscribed"])
def test_close_with_a_timeout_gives_up_on_an_unreachable_coordinator_in_time(setup) -> None:  # type: ignore[no-untyped-def]
    consumer = Consumer(UNREACHABLE)
    setup(consumer)
    assert timed_close(consumer, timeout=1.0) < 1.0 + SLACK_S


def test_close_without_a_timeout_has_a_budget_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_calls, "CLOSE_TIMEOUT_S", 1.0)  # 30 s, shortened
    consumer = Consumer(UNREACHABLE)
    owning(consumer)
    assert timed_close(consumer) < 1.0 + SLACK_S


def test_the_revocation_commit_and_the_leave_share_one_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The subscribed member commits before revocation, then waits for its leave (5 s at most
    on its own): together, within the one timeout."""
    consumer = Consumer(UNREACHABLE)
    owning(consumer)
    with caplog.at_level(logging.WARNING):
        assert timed_close(consumer, timeout=0.5) < 0.5 + SLACK_S
    assert "the commit before revocation not done within close()'s timeout" in caplog.text
    assert "the leave heartbeat was not answered" in caplog.text


def test_a_negative_timeout_is_refused_and_the_consumer_stays_open() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ValueError, match="timeout"):
        consumer.close(timeout=-1)
    consumer.close(timeout=0)


@pytest.mark.parametrize("subscribed", [False, True], ids=["assigned", "subscribed"])
def test_async_close_with_a_timeout_gives_up_on_an_unreachable_coordinator_in_time(
    subscribed: bool,
) -> None:
    async def main() -> float:
        consumer = AsyncConsumer(UNREACHABLE)
        await consumer.start()
        driver = consumer._driver
        assert driver is not None and driver.group is not None
        if subscribed:
            consumer.subscribe([T])
            with driver.lock:
                driver.group.member.on_heartbeat_answer(answer(1, 0), now_ms())
            await consumer._run_rebalance_steps(driver, driver.group)
            assert driver.group.member.owned == frozenset({TP})
        else:
            with driver.lock:
                driver.state.assign([TP])
        with driver.lock:
            driver.state.seek(TP, 5)
        began = time.monotonic()
        await consumer.close(timeout=1.0)
        return time.monotonic() - began

    assert asyncio.run(main()) < 1.0 + SLACK_S


@pytest.fixture
def silent_cluster() -> Iterator[str]:
    """Bootstrap servers that accept connections and never answer."""
    listeners = [socket.create_server(("127.0.0.1", 0), backlog=64) for _ in range(2)]
    try:
        yield ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in listeners)
    finally:
        for listener in listeners:
            listener.close()


def tracked_lookups(group: object) -> threading.Event:
    """Set once the group driver's first FindCoordinator is under way."""
    coordinator = group._coordinator  # type: ignore[attr-defined]
    find = coordinator.find
    started = threading.Event()

    async def tracked() -> str | None:
        started.set()
        return await find()

    coordinator.find = tracked
    return started


def test_close_is_not_held_by_a_coordinator_lookup_to_a_silent_cluster(silent_cluster: str) -> None:
    """The group driver's FindCoordinator (5 s per bootstrap server) was awaited at stop: close()
    took its 5 s past the timeout, and raised TimeoutError once the lookups outlasted them."""
    consumer = Consumer({**UNREACHABLE, "bootstrap.servers": silent_cluster})
    started = tracked_lookups(consumer._driver.group)
    consumer.subscribe([T])
    assert started.wait(5), "no lookup started"
    assert timed_close(consumer, timeout=1.0) < 1.0 + SLACK_S


def test_async_close_is_not_held_by_a_coordinator_lookup_to_a_silent_cluster(
    silent_cluster: str,
) -> None:
    async def main() -> float:
        consumer = AsyncConsumer({**UNREACHABLE, "bootstrap.servers": silent_cluster})
        await consumer.start()
        assert consumer._driver is not None
        started = tracked_lookups(consumer._driver.group)
        consumer.subscribe([T])
        return await timed_close_after(consumer, started, "a lookup started")

    assert asyncio.run(main()) < 1.0 + SLACK_S


def tracked_refreshes(consumer: Consumer | AsyncConsumer) -> threading.Event:
    """Set once a metadata refresh is under way."""
    metadata = consumer._metadata
    refresh = metadata.refresh
    started = threading.Event()

    def tracked(*args: object, **kwargs: object) -> None:
        started.set()
        refresh(*args, **kwargs)  # type: ignore[arg-type]

    metadata.refresh = tracked  # type: ignore[method-assign]
    return started


def test_close_is_not_held_by_a_metadata_refresh_to_a_silent_cluster(silent_cluster: str) -> None:
    """A refresh's DescribeTopics in flight (5 s deadline) to a cluster that does not answer held
    close() past its timeout: stop_waiting() ends a refresh's retries, not the call under way."""
    consumer = Consumer({"bootstrap.servers": silent_cluster})
    started = tracked_refreshes(consumer)
    assigned(consumer)  # its leader is unknown: the driver refreshes
    consumer._driver.wake_threadsafe()
    assert started.wait(5), "no refresh started"
    assert timed_close(consumer, timeout=1.0) < 1.0 + SLACK_S


def test_async_close_is_not_held_by_a_metadata_refresh_to_a_silent_cluster(
    silent_cluster: str,
) -> None:
    async def main() -> float:
        consumer = AsyncConsumer({"bootstrap.servers": silent_cluster})
        started = tracked_refreshes(consumer)
        await consumer.start()
        driver = consumer._driver
        assert driver is not None
        with driver.lock:
            driver.state.assign([TP])
            driver.state.seek(TP, 5)
        driver.wake()
        return await timed_close_after(consumer, started, "a refresh started")

    assert asyncio.run(main()) < 1.0 + SLACK_S
