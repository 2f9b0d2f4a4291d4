"""A TransactionPartition (transaction_partition.py) over in-process fakes of its two I/O edges,
for the tests of its runtime: phase 2, failover, timeouts, shutdown.

- `FakeTransactionLog` is the record writer's edge: one in-memory partition of
  `__transaction_state`. A produce is durable at once (the high watermark is the log end), and
  a fetch returns every batch from an offset. It can fail the next produce (a newer owner fenced
  this one) or hold it until an event is set.
- `FakeMarkers` is the marker writer's edge (WriteTxnMarkers through each leader): it records
  every call and answers each partition from a script (`answers`), NONE once the script is
  spent; `gate` holds calls, `raise_next` makes the next call raise.

`FakeOffsetsLog` joins them behind the methods TransactionPartition uses (`produce`, `fetch`,
`write_txn_markers`, `image`), with a metadata image whose topics a test may delete. Time:
`Clock` stands in for the runtime's `now_ms` (the harness patches transaction_partition's), so
timeouts pass when a test says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import pytest

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import decode_batches
from samsa.common.record.header import read_header, stamp_offsets
from samsa.metadata.coordinators import TRANSACTION_STATE_TOPIC
from samsa.metadata.image import CoordinatorAssignment, MetadataImage, PartitionState, TopicImage
from samsa.services.coordinator import transaction_partition, transaction_records
from samsa.services.coordinator.coordinator_partition import CoordinatorPartition
from samsa.services.coordinator.offsets_log import FetchResult, ProduceResult
from samsa.services.coordinator.transaction_model import TransactionMetadata
from samsa.services.coordinator.transaction_partition import (
    TransactionConfig,
    TransactionPartition,
)
from samsa.v1 import transactions_pb2 as x

WAIT_S = 5.0
TIMEOUT_MS = 60_000
PRODUCER_ID_BASE = 4000
TopicPartition = tuple[str, int]


class Clock:
    """The runtime's wall clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class FakeTransactionLog:
    """One partition of `__transaction_state` in memory (see the module docstring)."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.end_offset = 0
        self.fail_next: ErrorCode | None = None
        self.hold_next: asyncio.Event | None = None

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        hold, self.hold_next = self.hold_next, None
        if hold is not None:
            await hold.wait()
        failure, self.fail_next = self.fail_next, None
        if failure is not None:
            return ProduceResult(failure, "fenced by the fake log")
        stamped = bytearray(batch)
        stamp_offsets(stamped, 0, self.end_offset, 0)
        self.batches.append(bytes(stamped))
        base_offset = self.end_offset
        self.end_offset = read_header(stamped).next_offset
        return ProduceResult(ErrorCode.NONE, "", base_offset)

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        records = b"".join(
            batch for batch in self.batches if read_header(batch).last_offset >= offset
        )
        return FetchResult(ErrorCode.NONE, "", records, self.end_offset, 0)

    def records(self) -> list[tuple[str, TransactionMetadata | None]]:
        """Every transaction record written, in log order (writer-epoch fences left out)."""
        decoded = []
        for batch in decode_batches(b"".join(self.batches)):
            for key, value in zip(batch.keys, batch.values, strict=True):
                if not transaction_records.is_writer_epoch(key or b""):
                    decoded.append(transaction_records.decode(key or b"", value))
        return decoded

    def states(self, transactional_id: str) -> list[str]:
        """The states the log holds for `transactional_id`, in order."""
        return [
            "DEAD" if metadata is None else metadata.state.name
            for name, metadata in self.records()
            if name == transactional_id
        ]


class MarkerCall(NamedTuple):
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass
class FakeMarkers:
    """WriteTxnMarkers at the leaders (see the module docstring)."""

    calls: list[MarkerCall] = field(default_factory=list)
    answers: dict[TopicPartition, list[ErrorCode]] = field(default_factory=dict)
    gate: asyncio.Event | None = None
    raise_next: Exception | None = None
    called: asyncio.Event = field(default_factory=asyncio.Event)

    async def write_txn_markers(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, tuple[int, str]]:
        wanted = tuple(partitions)
        self.calls.append(
            MarkerCall(producer_id, producer_epoch, committed, coordinator_epoch, wanted)
        )
        self.called.set()
        if self.gate is not None:
            await self.gate.wait()
        error, self.raise_next = self.raise_next, None
        if error is not None:
            raise error
        results = {}
        for where in wanted:
            script = self.answers.get(where)
            code = script.pop(0) if script else ErrorCode.NONE
            results[where] = (code, "" if code == ErrorCode.NONE else f"scripted {code.name}")
        return results


class FakeOffsetsLog:
    """What TransactionPartition asks of OffsetsLog: the two fakes and a metadata image."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.log = FakeTransactionLog()
        self.markers = FakeMarkers()
        self.topics = dict(topics)

    def image(self) -> MetadataImage:
        return replace(
            MetadataImage.empty(),
            topics={
                name: TopicImage(
                    name, name.encode(), {n: _partition_state(n) for n in range(count)}
                )
                for name, count in self.topics.items()
            },
        )

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        return await self.log.produce(topic, partition, batch)

    async def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        return await self.log.fetch(topic, partition, offset)

    async def write_txn_markers(self, **kwargs: object) -> dict[TopicPartition, tuple[int, str]]:
        return await self.markers.write_txn_markers(**kwargs)  # type: ignore[arg-type]


def _partition_state(number: int) -> PartitionState:
    return PartitionState(
        number, replicas=(1,), isr=(1,), leader=1, leader_epoch=0, partition_epoch=0
    )


class TransactionHarness:
    """A TransactionPartition over a FakeOffsetsLog; `reload` starts a new owner on the same
    log, as a failover does."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        topics: dict[str, int] | None = None,
        abort_interval_ms: int = 3_600_000,
    ) -> None:
        self.clock = Clock()
        monkeypatch.setattr(transaction_partition, "now_ms", self.clock)
        monkeypatch.setattr(transaction_partition, "RETRY_BACKOFF_S", 0.001)
        monkeypatch.setattr(transaction_partition, "RETRY_BACKOFF_MAX_S", 0.005)
        self.offsets_log = FakeOffsetsLog(topics or {"t": 3})
        self.config = TransactionConfig(abort_interval_ms=abort_interval_ms)
        self.assignment_epoch = 0
        self.ended: list[CoordinatorPartition] = []
        self._next_producer_id = PRODUCER_ID_BASE
        self.partition = self._new_partition()

    @property
    def markers(self) -> FakeMarkers:
        return self.offsets_log.markers

    @property
    def log(self) -> FakeTransactionLog:
        return self.offsets_log.log

    def _new_partition(self) -> TransactionPartition:
        assignment = CoordinatorAssignment(
            TRANSACTION_STATE_TOPIC, 0, 1, 1, self.assignment_epoch, 100
        )
        return TransactionPartition(
            assignment,
            coordinator_id=1,
            offsets_log=self.offsets_log,  # type: ignore[arg-type]
            config=self.config,
            allocate_producer_id=self._allocate,
            on_ended=self.ended.append,
        )

    async def _allocate(self) -> int:
        self._next_producer_id += 1
        return self._next_producer_id

    async def start(self) -> TransactionPartition:
        self.partition.start()
        await until(lambda: self.partition.loaded, "the partition loaded")
        return self.partition

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[TransactionPartition]:
        """Start the partition and, however the block ends, stop the one then current: after
        a `reload`, the new owner."""
        await self.start()
        try:
            yield self.partition
        finally:
            await self.partition.stop()

    async def reload(self) -> TransactionPartition:
        """Give the partition up and load it as a new owner (the next assignment epoch)."""
        await self.partition.stop()
        self.assignment_epoch += 1
        self.partition = self._new_partition()
        return await self.start()

    # --- requests, as the servicer makes them -----------------------------------------------

    async def init(self, name: str, timeout_ms: int = TIMEOUT_MS) -> x.InitTransactionsResponse:
        request = x.InitTransactionsRequest(
            transactional_id=name, transaction_timeout_ms=timeout_ms
        )
        return await self.partition.run(await self.partition.init_transactions(request))

    async def add(
        self, who: x.TransactionalProducer, *partitions: TopicPartition, settle_s: float = 0.0
    ) -> x.AddPartitionsToTxnResponse:
        request = x.AddPartitionsToTxnRequest(producer=who)
        for topic, number in partitions:
            request.partitions.add(topic=topic, partitions=[number])
        return await self.partition.run_when_settled(
            lambda: self.partition.shard.add_partitions(request, self.clock()), settle_s
        )

    async def end(self, who: x.TransactionalProducer, commit: bool) -> x.EndTxnResponse:
        request = x.EndTxnRequest(producer=who, committed=commit)
        return await self.partition.run(await self.partition.end_transaction(request))

    async def open_transaction(
        self, name: str, *partitions: TopicPartition
    ) -> x.TransactionalProducer:
        """InitTransactions, then AddPartitionsToTxn: an ONGOING transaction of `name`."""
        answer = await self.init(name)
        assert answer.error_code == ErrorCode.NONE, answer
        who = producer(name, answer.producer_id, answer.producer_epoch)
        added = await self.add(who, *partitions)
        assert added.error_code == ErrorCode.NONE, added
        return who

    def state(self, name: str) -> str:
        return self.partition.shard.transactions[name].state.name


def producer(name: str, producer_id: int, producer_epoch: int) -> x.TransactionalProducer:
    return x.TransactionalProducer(
        transactional_id=name, producer_id=producer_id, producer_epoch=producer_epoch
    )


def next_identity(
    who: x.TransactionalProducer, answer: x.EndTxnResponse
) -> x.TransactionalProducer:
    return producer(who.transactional_id, answer.producer_id, answer.producer_epoch)


async def until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {WAIT_S:g} s"
        await asyncio.sleep(0.001)


def other_tasks() -> set[asyncio.Task[object]]:
    """The tasks still alive besides the test's own."""
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}
