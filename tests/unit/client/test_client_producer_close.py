"""Goal: Producer.close() ends the producer from wherever an application calls it, a send()
callback included (Kafka's producer allows close() in a callback: it cannot wait there for the
callback thread, which is the caller). A flush() after close() returns, as Kafka's does: close()
settled every record. Two close() calls at once both return, and the producer stops once.
close(timeout) with records still unanswered after it returns without an error and fails them, as
Kafka's close(Duration) does (before, it raised TimeoutError).

Method: the sync Producer against in-memory brokers (fake_produce_cluster.py); waits on events
with generous timeouts, never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from close_helpers import SignalledCondition
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, KafkaError, ProduceError, Producer
from samsa.client import producer as producer_module
from samsa.client.record_future import RecordFuture
from samsa.common.errors import ErrorCode

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
# A record of 1,500 bytes fills buffer.memory until its batch is answered; a second waits.
ONE_BATCH_FILLS_MEMORY = {
    "bootstrap.servers": BOOTSTRAP,
    "linger.ms": 0,
    "buffer.memory": 2_000,
    "batch.size": 1_000,
    "max.block.ms": WAIT_S * 1_000,
}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=1)
    fake.install(monkeypatch)
    return fake


def test_close_inside_a_callback_closes_the_producer(cluster: FakeCluster) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000})
    finished = threading.Event()
    outcome: list[BaseException | None] = []

    def close_here(_: RecordFuture) -> None:
        try:
            producer.close(WAIT_S)
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)
        finished.set()

    future = producer.send(TOPIC, b"first", partition=0)
    future.add_done_callback(close_here)  # lingering: registered before the answer
    producer.flush(WAIT_S)
    assert finished.wait(WAIT_S)
    assert outcome == [None]
    assert future.result(timeout=0).offset == 0
    assert cluster.log(TOPIC, 0) == [b"first"]


def test_a_send_waiting_for_memory_when_close_ends_raises(cluster: FakeCluster) -> None:
    """Kafka's producer fails an append still waiting for buffer.memory when it closes. The
    close frees the memory it waited for: appending then would queue the record in a producer
    that never sends again, its future never settled."""
    cluster.brokers[1].answer_in_groups_of = 1_000  # no answer: memory is never freed
    producer = Producer(ONE_BATCH_FILLS_MEMORY)
    first = producer.send(TOPIC, b"x" * 1_500, partition=0)  # fills buffer.memory
    outcome: list[object] = []
    waiting = threading.Thread(target=lambda: outcome.append(_send(producer)))
    waiting.start()
    deadline = threading.Event()
    while not producer._driver.accumulator._batcher.memory_waiting:  # the send is waiting
        assert not deadline.wait(0.01) and waiting.is_alive()
    producer.close(0.2)  # nothing is ever answered
    waiting.join(WAIT_S)
    assert not waiting.is_alive()
    assert isinstance(first.exception(timeout=0), ProduceError)
    [second] = outcome
    assert isinstance(second, ProduceError) and "closed" in str(second), second


def test_close_past_its_timeout_returns_and_fails_the_unsettled_records(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.brokers[1].answer_in_groups_of = 1_000  # never answered
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 0})
    future = producer.send(TOPIC, b"unanswered", partition=0)
    producer.close(0.2)  # before: TimeoutError
    error = future.exception(timeout=0)
    assert isinstance(error, ProduceError) and error.code == ErrorCode.REQUEST_TIMED_OUT
    assert "not delivered within 0.2 s" in caplog.text
    assert not producer._loop_thread.is_alive()

    async def scenario() -> None:
        async_producer = AsyncProducer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 0})
        await async_producer.start()
        pending = await async_producer.send(TOPIC, b"unanswered", partition=0)
        await async_producer.stop(0.2)  # before: TimeoutError
        assert isinstance(pending.exception(), ProduceError)

    asyncio.run(scenario())


def _send(producer: Producer) -> object:
    try:
        return producer.send(TOPIC, b"y" * 1_500, partition=0)
    except ProduceError as error:
        return error


def test_an_async_send_waiting_for_memory_when_stop_ends_raises(cluster: FakeCluster) -> None:
    cluster.brokers[1].answer_in_groups_of = 1_000  # no answer: memory is never freed

    async def scenario() -> None:
        producer = AsyncProducer(ONE_BATCH_FILLS_MEMORY)
        await producer.start()
        await producer.send(TOPIC, b"x" * 1_500, partition=0)  # fills buffer.memory
        waiting = asyncio.create_task(producer.send(TOPIC, b"y" * 1_500, partition=0))
        async with asyncio.timeout(WAIT_S):
            while not producer._driver.accumulator._batcher.memory_waiting:  # type: ignore[union-attr]
                await asyncio.sleep(0.01)
        await producer.stop(0.2)  # nothing is ever answered
        with pytest.raises(ProduceError, match="closed"):
            async with asyncio.timeout(WAIT_S):
                await waiting

    asyncio.run(scenario())


@pytest.mark.parametrize("facade", ["sync", "async"])
def test_close_finishes_a_commit_whose_call_failed(cluster: FakeCluster, facade: str) -> None:
    """commit_transaction() that raised a retriable error (EndTxn unanswered: the coordinator
    moved) leaves the commit in progress, and its outcome may never have been asked for.
    close() finishes it, as Kafka's producer completes a commit in progress when it closes,
    rather than leave the transaction open (read_committed readers of its partitions stalled)
    until the coordinator aborts it at transaction.timeout.ms."""
    ends: list[bool] = []

    async def end(identity: tuple[int, int], committed: bool, deadline: float) -> tuple[int, int]:
        ends.append(committed)
        if len(ends) == 1:
            raise KafkaError("EndTxn: no coordinator", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return identity[0], identity[1] + 1

    config = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0, "transactional.id": "t"}
    if facade == "sync":
        producer = Producer(config)
        driver = producer._driver
        driver._txn_client.end = end  # type: ignore[union-attr, method-assign]
        with driver.lock:  # as init_transactions() leaves it (no coordinator here)
            driver.accumulator.set_producer_id(7, 0)
            driver.txn.on_initialized()  # type: ignore[union-attr]
        producer.begin_transaction()
        producer.send(TOPIC, b"committed", partition=0)
        with pytest.raises(KafkaError) as failed:
            producer.commit_transaction(WAIT_S)
        assert failed.value.retriable
        producer.close(WAIT_S)
    else:

        async def scenario() -> None:
            producer = AsyncProducer(config)
            await producer.start()
            driver = producer._driver
            assert driver is not None and driver.txn is not None
            driver._txn_client.end = end  # type: ignore[union-attr, method-assign]
            with driver.lock:
                driver.accumulator.set_producer_id(7, 0)
                driver.txn.on_initialized()
            producer.begin_transaction()
            await producer.send(TOPIC, b"committed", partition=0)
            with pytest.raises(KafkaError) as failed:
                await producer.commit_transaction(WAIT_S)
            assert failed.value.retriable
            await producer.stop(WAIT_S)

        asyncio.run(scenario())
    assert ends == [True, True], "close() asked for the commit's outcome again"


def test_a_driver_stop_past_its_bound_is_a_warning_not_an_error(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Kafka's close(Duration) gives up on what did not finish and returns: it does not throw.
    monkeypatch.setattr(producer_module, "STOP_TIMEOUT_S", 0.2)
    producer = Producer({"bootstrap.servers": BOOTSTRAP})

    async def stuck_stop() -> None:
        await asyncio.Event().wait()

    producer._driver.stop = stuck_stop  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="samsa.client.producer"):
        producer.close(WAIT_S)
    assert "did not stop" in caplog.text
    assert not producer._loop_thread.is_alive()
    with pytest.raises(KafkaError):
        producer.send(TOPIC, b"after")


def test_flush_after_close_returns(cluster: FakeCluster) -> None:
    """It raised RuntimeError('Event loop is closed'): flush() woke the closed loop's driver."""
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 0})
    future = producer.send(TOPIC, b"first", partition=0)
    producer.close(WAIT_S)
    producer.flush(WAIT_S)
    producer.flush()
    assert future.result(timeout=0).offset == 0


def test_a_close_while_another_close_flushes_returns(cluster: FakeCluster) -> None:
    """Both closes went on to stop the producer: the second, its flush ended by the first's
    stop, handed its stop to a loop the first had stopped (5 s lost waiting for it) and then
    raised RuntimeError('Event loop is closed')."""
    cluster.brokers[1].answer_in_groups_of = 1_000  # nothing is ever answered
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 0})
    producer._space = waiting = SignalledCondition(producer._driver.lock)
    future = producer.send(TOPIC, b"first", partition=0)
    outcome: list[BaseException | None] = []

    def close_without_timeout() -> None:
        try:
            producer.close()  # waits for the record, which the other close fails
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)

    second = threading.Thread(target=close_without_timeout)
    second.start()
    assert waiting.waiting.wait(WAIT_S)  # in its flush
    producer.close(0.2)
    second.join(WAIT_S)
    assert outcome == [None]
    assert isinstance(future.exception(timeout=0), ProduceError)
    assert not producer._loop_thread.is_alive()


def test_a_send_once_close_began_raises_and_what_came_before_is_delivered(
    cluster: FakeCluster,
) -> None:
    """Kafka's producer refuses a send() once close() began (IllegalStateException) and
    delivers, within close()'s timeout, what was sent before. A send() on another thread while
    close() flushed was accepted: the flush did not wait for it, so the stop that followed
    could fail it ("the producer was closed before delivery") though the timeout allowed it."""
    release = threading.Event()

    def hold_first_answer(*_: object) -> None:  # on the loop: close() is in its flush meanwhile
        release.wait(WAIT_S)

    cluster.brokers[1].answer_hook = hold_first_answer  # type: ignore[assignment]
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000})
    producer._space = waiting = SignalledCondition(producer._driver.lock)
    before = [producer.send(TOPIC, b"%d" % n, partition=0) for n in range(3)]
    closer = threading.Thread(target=producer.close, args=(WAIT_S,))
    closer.start()
    try:
        assert waiting.waiting.wait(WAIT_S)  # close() waits in its flush
        with pytest.raises(ProduceError, match="closed"):
            producer.send(TOPIC, b"during close", partition=0)
        with pytest.raises(ProduceError, match="closed"):
            producer.send_many(TOPIC, [b"during close"])
    finally:
        release.set()
        closer.join(WAIT_S)
    assert [future.result(timeout=0).offset for future in before] == [0, 1, 2]
    assert cluster.log(TOPIC, 0) == [b"0", b"1", b"2"]


def test_an_async_send_once_stop_began_raises(cluster: FakeCluster) -> None:
    cluster.brokers[1].answer_in_groups_of = 2  # the first answer waits for a second request

    async def scenario() -> None:
        producer = AsyncProducer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000})
        await producer.start()
        first = await producer.send(TOPIC, b"first", partition=0)
        stopping = asyncio.create_task(producer.stop(0.5))
        await asyncio.sleep(0)  # stop() begins, then waits in its flush
        assert not stopping.done()
        with pytest.raises(ProduceError, match="closed"):
            await producer.send(TOPIC, b"during stop", partition=0)
        await stopping  # nothing answers the first: it fails at the stop, which returns
        assert isinstance(first.exception(), ProduceError)

    asyncio.run(scenario())
