"""Goal: flush(), close() and the transactional calls of Producer and AsyncProducer refuse a
timeout that is not a number of seconds >= 0 with ValueError (timeouts.checked_timeout, which
poll() uses too), before anything is done: flush(float('nan')) never returned (its deadline
never passed and every wait given NaN returns at once: it spun a core for ever), flush(-1)
raised TimeoutError, close(nan) spun in its flush, and abort_transaction(nan) began the abort
before the timeout failed. Infinity is a wait without limit, as None is.

Method: the producers against in-memory brokers (fake_produce_cluster.py) that never answer,
so a flush has something to wait for; each bad call must raise at once.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, Producer

TOPIC = "events"
CONFIG = {"bootstrap.servers": "fake:9092", "linger.ms": 0}
REFUSED = [math.nan, -1, -0.5, "1", True]
WAIT_S = 10  # bounds a wait that fails the test (it spun for ever)
MESSAGE = "timeout must be a number of seconds >= 0"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=1, brokers=1)
    fake.install(monkeypatch)
    return fake


@pytest.mark.parametrize("timeout", REFUSED)
def test_the_producer_refuses_a_bad_timeout(cluster: FakeCluster, timeout: object) -> None:
    cluster.brokers[1].answer_in_groups_of = 1_000  # never answered: a flush would wait
    producer = Producer(CONFIG)
    try:
        future = producer.send(TOPIC, b"x", partition=0)
        with pytest.raises(ValueError, match=MESSAGE):
            producer.flush(timeout)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=MESSAGE):
            producer.close(timeout)  # type: ignore[arg-type]
        assert not producer._closed, "close() refused its timeout after it began"
        assert not future.done()
    finally:
        producer.close(0.1)


@pytest.mark.parametrize("timeout", REFUSED)
def test_the_async_producer_refuses_a_bad_timeout(cluster: FakeCluster, timeout: object) -> None:
    cluster.brokers[1].answer_in_groups_of = 1_000

    async def main() -> None:
        producer = AsyncProducer(CONFIG)
        await producer.start()
        await producer.send(TOPIC, b"x", partition=0)
        async with asyncio.timeout(WAIT_S):
            with pytest.raises(ValueError, match=MESSAGE):
                await producer.flush(timeout)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match=MESSAGE):
                await producer.stop(timeout)  # type: ignore[arg-type]
        assert not producer._closed
        await producer.stop(0.1)

    asyncio.run(main())


def test_an_infinite_timeout_waits_without_limit(cluster: FakeCluster) -> None:
    producer = Producer(CONFIG)
    future = producer.send(TOPIC, b"x", partition=0)
    producer.flush(math.inf)
    assert future.result(timeout=0).offset == 0
    producer.close(math.inf)

    async def main() -> None:
        async_producer = AsyncProducer(CONFIG)
        await async_producer.start()
        sent = await async_producer.send(TOPIC, b"y", partition=0)
        await async_producer.flush(math.inf)
        assert (await sent).offset == 1
        await async_producer.stop(math.inf)

    asyncio.run(main())


@pytest.mark.parametrize("facade", ["sync", "async"])
def test_a_transactional_call_refuses_a_bad_timeout_before_the_state_moves(
    cluster: FakeCluster, facade: str
) -> None:
    config = {**CONFIG, "transactional.id": "t"}

    async def end(identity: tuple[int, int], committed: bool, deadline: float) -> tuple[int, int]:
        return identity[0], identity[1] + 1  # the coordinator's EndTxn, answered

    def opened(driver: object) -> None:  # as init_transactions() leaves it (no coordinator)
        driver._txn_client.end = end  # type: ignore[attr-defined]
        with driver.lock:  # type: ignore[attr-defined]
            driver.accumulator.set_producer_id(7, 0)  # type: ignore[attr-defined]
            driver.txn.on_initialized()  # type: ignore[attr-defined]

    if facade == "sync":
        producer = Producer(config)
        opened(producer._driver)
        producer.begin_transaction()
        for call in (producer.abort_transaction, producer.commit_transaction):
            with pytest.raises(ValueError, match=MESSAGE):
                call(math.nan)
        producer.send(TOPIC, b"still in the transaction", partition=0)
        producer.close(WAIT_S)
        return

    async def main() -> None:
        async_producer = AsyncProducer(config)
        await async_producer.start()
        opened(async_producer._driver)
        async_producer.begin_transaction()
        for call in (async_producer.abort_transaction, async_producer.commit_transaction):
            with pytest.raises(ValueError, match=MESSAGE):
                async with asyncio.timeout(WAIT_S):
                    await call(math.nan)
        await async_producer.send(TOPIC, b"still in the transaction", partition=0)
        await async_producer.stop(WAIT_S)

    asyncio.run(main())
