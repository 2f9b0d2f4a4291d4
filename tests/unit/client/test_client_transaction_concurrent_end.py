"""Goal: a commit_transaction() (or abort_transaction()) called while the same one is in
progress — from another thread, another task, or close() — awaits that one's outcome, as
Kafka's does (its TransactionManager hands the second call the pending call's cached result):
one EndTxn, and every call returns. Each call ran its own flush and EndTxn: the second EndTxn
went out for a transaction already ending, and whichever answer came second found the producer
READY and failed on an assertion.

Method: transactional producers against in-memory brokers (fake_produce_cluster.py), the
coordinator's EndTxn replaced by a stand-in that records each call and answers only once the
second call has reached the driver (the driver's coroutine wrapped to signal its start: after
that, it reaches its wait before the loop runs anything else). No fixed sleep.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, Producer
from samsa.client.producer_driver import ProducerDriver
from samsa.client.transaction_manager import TxnState

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
CONFIG = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0, "transactional.id": "t"}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=1)
    fake.install(monkeypatch)
    return fake


class HeldEnd:
    """The coordinator's EndTxn: each call recorded, answered once `second` is set (the second
    call of the driver's end coroutine has started)."""

    def __init__(self, driver: ProducerDriver, name: str) -> None:
        self.ends: list[bool] = []
        self.entered = threading.Event()
        self.second = threading.Event()
        self.starts = 0
        driver._txn_client.end = self.end  # type: ignore[union-attr, method-assign]
        with driver.lock:  # as init_transactions() leaves it (no coordinator here)
            driver.accumulator.set_producer_id(7, 0)
            driver.txn.on_initialized()  # type: ignore[union-attr]
        calls = driver.transaction_driver()
        real: Callable[[float], Awaitable[None]] = getattr(calls, name)

        async def counted(timeout_s: float) -> None:
            self.starts += 1
            if self.starts == 2:
                self.second.set()
            await real(timeout_s)

        setattr(calls, name, counted)

    async def end(
        self, identity: tuple[int, int], commit: bool, deadline: float
    ) -> tuple[int, int]:
        self.ends.append(commit)
        self.entered.set()
        assert await asyncio.to_thread(self.second.wait, WAIT_S)
        return identity[0], identity[1] + 1


@pytest.mark.parametrize("committed", [True, False])
def test_two_threads_ending_the_transaction_share_one_end_txn(
    cluster: FakeCluster, committed: bool
) -> None:
    producer = Producer(CONFIG)
    held = HeldEnd(producer._driver, "commit" if committed else "abort")
    errors: list[BaseException] = []

    def end() -> None:
        try:
            if committed:
                producer.commit_transaction(WAIT_S)
            else:
                producer.abort_transaction(WAIT_S)
        except BaseException as error:
            errors.append(error)

    try:
        producer.begin_transaction()
        producer.send(TOPIC, b"a", partition=0).result(WAIT_S)
        first = threading.Thread(target=end)
        first.start()
        assert held.entered.wait(WAIT_S)  # the first call's EndTxn is out
        second = threading.Thread(target=end)
        second.start()
        first.join(WAIT_S)
        second.join(WAIT_S)
        assert not first.is_alive() and not second.is_alive()
        assert errors == []
        assert held.ends == [committed]
        assert producer._txn.state is TxnState.READY  # type: ignore[union-attr]
    finally:
        producer.close(WAIT_S)


def test_close_during_another_threads_commit_awaits_it(cluster: FakeCluster) -> None:
    """close() finishes a commit in progress (commits_on_close): it joins the one running."""
    producer = Producer(CONFIG)
    held = HeldEnd(producer._driver, "commit")
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            producer.commit_transaction(WAIT_S)
        except BaseException as error:
            errors.append(error)

    producer.begin_transaction()
    producer.send(TOPIC, b"a", partition=0).result(WAIT_S)
    thread = threading.Thread(target=commit)
    thread.start()
    assert held.entered.wait(WAIT_S)
    producer.close(WAIT_S)
    thread.join(WAIT_S)
    assert errors == []
    assert held.ends == [True]
    assert cluster.log(TOPIC, 0) == [b"a"]


def test_two_tasks_committing_share_one_end_txn(cluster: FakeCluster) -> None:
    async def scenario() -> tuple[list[object], list[bool], TxnState]:
        producer = AsyncProducer(CONFIG)
        await producer.start()
        try:
            assert producer._driver is not None and producer._driver.txn is not None
            held = HeldEnd(producer._driver, "commit")
            producer.begin_transaction()
            await (await producer.send(TOPIC, b"a", partition=0))
            results = await asyncio.gather(
                producer.commit_transaction(WAIT_S),
                producer.commit_transaction(WAIT_S),
                return_exceptions=True,
            )
            return results, held.ends, producer._driver.txn.state
        finally:
            await producer.stop(WAIT_S)

    results, ends, state = asyncio.run(scenario())
    assert results == [None, None]
    assert ends == [True]
    assert state is TxnState.READY
