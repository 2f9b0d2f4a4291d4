"""Goal: a send() that began inside a transaction but reaches its append only after another
thread or task began to commit or abort it is refused with INVALID_TXN_STATE, as Kafka's append
is (TransactionManager.maybeAddPartition), and never written. send() checked the transaction's
state once, before waiting for the topic's metadata (or for buffer.memory), and appended without
looking again: a record appended once the commit had ended was sent as a transactional batch
while the producer had no transaction (the coordinator then held a transaction the producer did
not know of, and read_committed readers stalled until transaction.timeout.ms), and one appended
while EndTxn was awaited was in flight when the commit's answer came, so commit_transaction()
failed on an assertion although the coordinator had committed.

Method: transactional producers against in-memory brokers (fake_produce_cluster.py), the
coordinator's EndTxn replaced by a stand-in that bumps the epoch. The racing send() is held in
its wait for an uncached topic's metadata (a stand-in that waits on an event) until the commit
or abort has ended, or until its EndTxn is being awaited; every wait is on an event, none is a
fixed sleep.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, KafkaError, Producer
from samsa.client.producer_driver import ProducerDriver
from samsa.client.transaction_manager import TxnState
from samsa.common.errors import ErrorCode

TOPIC = "events"
LATE = "late"  # its partition count is not cached: send() waits for its metadata
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
CONFIG = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0, "transactional.id": "t"}
EndTxn = Callable[[tuple[int, int], bool, float], object]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=1)
    fake.leaders[(LATE, 0)] = 1
    fake.install(monkeypatch)
    return fake


class HeldMetadata:
    """Holds send()'s wait for LATE's metadata: `entered` once it waits, until `release`."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._cluster = cluster

    def partition_count(self, topic: str, timeout_s: float) -> int:
        self.entered.set()
        assert self.release.wait(WAIT_S)
        self._cluster.partition_counts[topic] = 1
        return 1


def initialized(driver: ProducerDriver, end: EndTxn) -> None:
    driver._txn_client.end = end  # type: ignore[union-attr, method-assign]
    with driver.lock:  # as init_transactions() leaves it (no coordinator here)
        driver.accumulator.set_producer_id(7, 0)
        driver.txn.on_initialized()  # type: ignore[union-attr]


def hold_metadata(cluster: FakeCluster) -> HeldMetadata:
    held = HeldMetadata(cluster)
    cluster.metadata.partition_count = held.partition_count  # type: ignore[union-attr, method-assign]
    return held


class RacingSend:
    """One send() to LATE on its own thread (`thread`, started by the test): what it returned
    or raised goes to `outcome`, and `sent` is set once it did."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.outcome: list[object] = []
        self.sent = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            self.outcome.append(self.producer.send(LATE, b"late", partition=0))
        except KafkaError as error:
            self.outcome.append(error)
        self.sent.set()


def assert_refused(error: object) -> None:
    assert isinstance(error, KafkaError), error
    assert error.code is ErrorCode.INVALID_TXN_STATE, error


@pytest.mark.parametrize("call", ["send", "send_many"])
@pytest.mark.parametrize("committed", [True, False])
def test_a_send_appending_after_the_transaction_ended_is_refused(
    cluster: FakeCluster, call: str, committed: bool
) -> None:
    ends: list[bool] = []

    async def end(identity: tuple[int, int], commit: bool, deadline: float) -> tuple[int, int]:
        ends.append(commit)
        return identity[0], identity[1] + 1

    producer = Producer(CONFIG)
    try:
        initialized(producer._driver, end)
        held = hold_metadata(cluster)
        producer.begin_transaction()
        producer.send(TOPIC, b"in", partition=0).result(WAIT_S)
        outcome: list[object] = []

        def racing_send() -> None:
            try:
                if call == "send":
                    outcome.append(producer.send(LATE, b"late", partition=0))
                else:
                    outcome.append(producer.send_many(LATE, [b"late", b"later"]))
            except KafkaError as error:
                outcome.append(error)

        thread = threading.Thread(target=racing_send)
        thread.start()
        assert held.entered.wait(WAIT_S)  # past send()'s first check, waiting for metadata
        if committed:
            producer.commit_transaction(WAIT_S)
        else:
            producer.abort_transaction(WAIT_S)
        held.release.set()
        thread.join(WAIT_S)
        [error] = outcome
        assert_refused(error)
        assert ends == [committed]
        assert producer._txn.state is TxnState.READY  # type: ignore[union-attr]
        producer.flush(WAIT_S)
        assert cluster.log(LATE, 0) == [], "nothing was written outside a transaction"
    finally:
        producer.close(WAIT_S)


def test_a_send_appending_while_end_txn_is_awaited_is_refused(cluster: FakeCluster) -> None:
    """Released while the commit's EndTxn is awaited: refused, so nothing is in flight when the
    answer comes and the commit returns as the coordinator decided."""
    ends: list[bool] = []
    producer = Producer(CONFIG)
    held = hold_metadata(cluster)
    racing = RacingSend(producer)

    async def end(identity: tuple[int, int], commit: bool, deadline: float) -> tuple[int, int]:
        ends.append(commit)
        held.release.set()
        assert await asyncio.to_thread(racing.sent.wait, WAIT_S)  # it has returned or raised
        return identity[0], identity[1] + 1

    try:
        initialized(producer._driver, end)
        producer.begin_transaction()
        producer.send(TOPIC, b"in", partition=0).result(WAIT_S)
        racing.thread.start()
        assert held.entered.wait(WAIT_S)
        producer.commit_transaction(WAIT_S)
        racing.thread.join(WAIT_S)
        [error] = racing.outcome
        assert_refused(error)
        assert ends == [True]
        assert producer._txn.state is TxnState.READY  # type: ignore[union-attr]
        assert cluster.log(TOPIC, 0) == [b"in"]
        assert cluster.log(LATE, 0) == []
    finally:
        producer.close(WAIT_S)


def test_an_async_send_appending_after_the_commit_is_refused(cluster: FakeCluster) -> None:
    async def end(identity: tuple[int, int], commit: bool, deadline: float) -> tuple[int, int]:
        return identity[0], identity[1] + 1

    async def scenario() -> None:
        producer = AsyncProducer(CONFIG)
        await producer.start()
        try:
            assert producer._driver is not None
            initialized(producer._driver, end)
            held = hold_metadata(cluster)
            producer.begin_transaction()
            await (await producer.send(TOPIC, b"in", partition=0))
            late = asyncio.create_task(producer.send(LATE, b"late", partition=0))
            assert await asyncio.to_thread(held.entered.wait, WAIT_S)
            await producer.commit_transaction(WAIT_S)
            held.release.set()
            with pytest.raises(KafkaError) as refused:
                await late
            assert_refused(refused.value)
            await producer.flush(WAIT_S)
        finally:
            await producer.stop(WAIT_S)

    asyncio.run(scenario())
    assert cluster.log(LATE, 0) == []


def test_a_send_appending_while_the_transaction_is_prepared_is_refused(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare_transaction() flushes, then hands the transaction over. A send() released after
    the flush but before the hand-off appended to the transaction about to be prepared: its
    record sat unsent in a transaction another process completes, and was sent into it (or
    into nothing) later. Refused instead, as a send racing commit_transaction() is."""
    producer = Producer(CONFIG)
    held = hold_metadata(cluster)
    racing = RacingSend(producer)
    flush = producer.flush

    def flush_then_release(timeout: float | None = None) -> None:
        flush(timeout)
        held.release.set()  # the racing send appends now, between the flush and the hand-off
        assert racing.sent.wait(WAIT_S)

    try:
        initialized(producer._driver, None)  # type: ignore[arg-type]
        producer.begin_transaction()
        producer.send(TOPIC, b"in", partition=0).result(WAIT_S)
        racing.thread.start()
        assert held.entered.wait(WAIT_S)
        monkeypatch.setattr(producer, "flush", flush_then_release)
        prepared = producer.prepare_transaction(WAIT_S)
        racing.thread.join(WAIT_S)
        [error] = racing.outcome
        assert_refused(error)
        assert prepared.producer_id == 7
        assert producer._txn.state is TxnState.PREPARED  # type: ignore[union-attr]
        assert cluster.log(TOPIC, 0) == [b"in"]
        assert cluster.log(LATE, 0) == [], "nothing joined the transaction after its flush"
    finally:
        producer.close(WAIT_S)
