"""Goal: a commit (or abort) waits for a send_offsets_to_transaction() already in progress, and
its EndTxn goes out only once those offsets are answered, as Kafka's TransactionManager sends
its transactional requests one at a time, AddOffsetsToTxn and TxnOffsetCommit ahead of EndTxn;
a send_offsets_to_transaction() that gets its turn only once the commit has begun is refused
(INVALID_TXN_STATE). Before, the commit's EndTxn went out, and commit_transaction() returned,
while TxnOffsetCommit was still pending: the committed transaction could lack offsets whose call
then reported success.

Method: an AsyncProducer against in-memory brokers (fake_produce_cluster.py), its coordinator
calls replaced by stand-ins that log what goes out: AddOffsetsToTxn/TxnOffsetCommit is answered
only once the commit has flushed (the driver's flush wrapped to signal it; the commit then runs
on to its EndTxn, or to its wait for its turn, before the loop runs anything else). Waits are on
events, none is a fixed sleep.
"""

from __future__ import annotations

import asyncio

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, KafkaError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.producer_driver import ProducerDriver
from samsa.client.transaction_manager import TxnState
from samsa.common.errors import ErrorCode

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
CONFIG = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0, "transactional.id": "t"}
OFFSETS = {("in", 0): 5}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=1)
    fake.install(monkeypatch)
    return fake


class Coordinator:
    """Stand-ins for the coordinator calls; `log` is what went out and came back, in order."""

    def __init__(self, driver: ProducerDriver) -> None:
        self.log: list[str] = []
        self.offsets_out = asyncio.Event()  # an AddOffsetsToTxn is waiting for its answer
        self.flushed = asyncio.Event()  # the commit's (or abort's) flush returned
        self.second_offsets = asyncio.Event()  # a second send_offsets reached the driver
        client = driver._txn_client
        assert client is not None and driver.transactions is not None
        client.end = self.end  # type: ignore[method-assign]
        client.add_offsets = self.add_offsets  # type: ignore[method-assign]
        transactions = driver.transactions
        flush = transactions._flush

        async def flush_then_signal(timeout_s: float) -> None:
            await flush(timeout_s)
            self.flushed.set()

        transactions._flush = flush_then_signal
        send_offsets = transactions.send_offsets
        starts: list[None] = []

        async def counted_send_offsets(*args: object) -> None:
            starts.append(None)
            if len(starts) == 2:
                self.second_offsets.set()
            await send_offsets(*args)  # type: ignore[arg-type]

        transactions.send_offsets = counted_send_offsets  # type: ignore[method-assign]
        with driver.lock:  # as init_transactions() leaves it (no coordinator here)
            driver.accumulator.set_producer_id(7, 0)
            driver.txn.on_initialized()  # type: ignore[union-attr]

    async def end(
        self, identity: tuple[int, int], commit: bool, deadline: float
    ) -> tuple[int, int]:
        self.log.append("EndTxn commit" if commit else "EndTxn abort")
        return identity[0], identity[1] + 1

    async def add_offsets(
        self,
        identity: tuple[int, int],
        offsets: dict[tuple[str, int], int | OffsetAndMetadata],
        group_id: str,
        member_id: str,
        member_epoch: int,
        deadline: float,
    ) -> None:
        self.log.append("offsets out")
        self.offsets_out.set()
        await self.flushed.wait()  # answered only once the transaction's end has flushed
        self.log.append("offsets answered")


async def offsets_in_flight(producer: AsyncProducer) -> tuple[Coordinator, asyncio.Task[None]]:
    """A transaction with a record written and its send_offsets_to_transaction() sent, not yet
    answered (the stand-in coordinator holds it)."""
    assert producer._driver is not None
    coordinator = Coordinator(producer._driver)
    producer.begin_transaction()
    await (await producer.send(TOPIC, b"a", partition=0))
    offsets = asyncio.create_task(producer.send_offsets_to_transaction(OFFSETS, "group", WAIT_S))
    await coordinator.offsets_out.wait()
    return coordinator, offsets


@pytest.mark.parametrize("committed", [True, False])
def test_the_end_txn_waits_for_offsets_in_progress(cluster: FakeCluster, committed: bool) -> None:
    async def scenario() -> list[str]:
        producer = AsyncProducer(CONFIG)
        await producer.start()
        try:
            coordinator, offsets = await offsets_in_flight(producer)
            if committed:
                await producer.commit_transaction(WAIT_S)
            else:
                await producer.abort_transaction(WAIT_S)
            coordinator.log.append("ended")
            await offsets
            assert producer._driver.txn is not None
            assert producer._driver.txn.state is TxnState.READY
            return coordinator.log
        finally:
            await producer.stop(WAIT_S)

    end = "EndTxn commit" if committed else "EndTxn abort"
    assert asyncio.run(scenario()) == ["offsets out", "offsets answered", end, "ended"]


def test_offsets_whose_turn_comes_after_the_commit_began_are_refused(
    cluster: FakeCluster,
) -> None:
    async def scenario() -> tuple[list[object], list[str]]:
        producer = AsyncProducer(CONFIG)
        await producer.start()
        try:
            coordinator, first = await offsets_in_flight(producer)
            second = asyncio.create_task(
                producer.send_offsets_to_transaction({("in", 1): 9}, "group", WAIT_S)
            )
            await coordinator.second_offsets.wait()  # its turn comes after the first's
            commit = asyncio.create_task(producer.commit_transaction(WAIT_S))
            results = await asyncio.gather(first, second, commit, return_exceptions=True)
            return results, coordinator.log
        finally:
            await producer.stop(WAIT_S)

    results, log = asyncio.run(scenario())
    assert results[0] is None and results[2] is None, results
    assert isinstance(results[1], KafkaError), results
    assert results[1].code is ErrorCode.INVALID_TXN_STATE
    assert log == ["offsets out", "offsets answered", "EndTxn commit"]
