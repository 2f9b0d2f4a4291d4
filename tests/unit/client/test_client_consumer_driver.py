"""Goal: the consumer driver keeps one fetch in flight per broker, sends the next one at once after
an answer without records but only after poll() took the records of one that had some (a long
poll sent earlier would hold the broker's one fetch slot), names the leader epochs the metadata
gives (KIP-320) and the topic ids (KIP-516: a refusal for another id refreshes the metadata, and
a new id there resets the partition), resolves resets with ListOffsets when poll asks (naming the
topic ids too), and backs off after a failed fetch.

Method: run ConsumerDriver on an event loop against an in-memory broker (no ports): the driver's
fetch link (common/fetch_link.py, tested against real servers in tests/integration/
test_fetch_stream.py) is replaced by one whose fetches wait in a queue until the test answers
them; metadata is a fixed fake. Loop turns are counted with
`asyncio.sleep(0)`, never wall time: the driver sends synchronously from the answer's callback, so
a fetch it would send is in the queue once the answering task has run.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
from list_offsets_answers import list_offsets_answer

from samsa.client import consumer_driver
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_calls import take_records
from samsa.client.consumer_driver import ConsumerDriver
from samsa.common.errors import ErrorCode
from samsa.common.fetch_link import FetchFailed
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

T0 = ("t", 0)
T1 = ("t", 1)


class FakeMetadata:
    def __init__(self) -> None:
        self.leaders = {T0: 1, T1: 1}
        self.leader_epochs = {T0: 3, T1: 3}
        self.topic_ids: dict[str, bytes] = {}
        self.endpoints = {1: "broker-1"}
        self.partition_counts = {"t": 2}
        self.stale = False

    def needs_refresh(self) -> bool:
        return False

    def mark_stale(self) -> None:
        self.stale = True

    def refresh(self, topics: object = ()) -> None:
        pass

    def keep(self, topics: object) -> None:
        pass

    def transient(self, topics: object) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


class FakeBroker:
    """Fetches wait until the test answers them; ListOffsets answers `log_end_offset`."""

    def __init__(self) -> None:
        self.fetches: list[tuple[broker_pb2.FetchRequest, asyncio.Future]] = []
        self.log_end_offset = 40
        self.not_available = 0  # how many ListOffsets to answer OFFSET_NOT_AVAILABLE first
        self.listed: list[broker_pb2.ListOffsetsRequest] = []
        self.other_id_answers = 0  # how many ListOffsets naming an id to answer UNKNOWN_TOPIC_ID

    async def Fetch(
        self, request: broker_pb2.FetchRequest, timeout: float, metadata: object = None
    ) -> object:
        answer = asyncio.get_running_loop().create_future()
        self.fetches.append((request, answer))
        return await answer

    async def ListOffsets(self, request: broker_pb2.ListOffsetsRequest, timeout: float) -> object:
        self.listed.append(request)
        code = ErrorCode.OFFSET_NOT_AVAILABLE if self.not_available else ErrorCode.NONE
        self.not_available = max(0, self.not_available - 1)
        if self.other_id_answers and all(t.topic_id for t in request.topics):
            self.other_id_answers -= 1
            code = ErrorCode.UNKNOWN_TOPIC_ID
        return list_offsets_answer(request, -1 if code else self.log_end_offset, code)


class FakeLink:
    """A broker's fetch link that hands each fetch to `broker`, failing as the real one does."""

    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker

    async def fetch(
        self, channel: object, request: broker_pb2.FetchRequest, timeout_s: float
    ) -> object:
        try:
            return await self.broker.Fetch(request, timeout_s)
        except grpc.aio.AioRpcError as error:
            raise FetchFailed(error.code(), error.details() or "") from None

    def close(self) -> None:
        pass


def answer(**records: bytes) -> broker_pb2.FetchResponse:
    return broker_pb2.FetchResponse(
        topics=[
            broker_pb2.FetchResponse.TopicResponse(
                name="t",
                partitions=[
                    broker_pb2.FetchResponse.PartitionResponse(partition=int(k[1:]), records=v)
                    for k, v in records.items()
                ],
            )
        ]
    )


def asked(request: broker_pb2.FetchRequest) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}


async def turns(count: int = 20) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def run(test, **settings: object) -> None:
    async def main() -> None:
        broker = FakeBroker()
        given = {"bootstrap.servers": "localhost:1", "auto.offset.reset": "latest", **settings}
        driver = ConsumerDriver(ConsumerConfig.from_dict(given), FakeMetadata(), lambda: None)  # type: ignore[arg-type]
        driver._stub = lambda endpoint: broker  # type: ignore[method-assign]
        driver._new_link = lambda: FakeLink(broker)  # type: ignore[assignment,return-value]
        await driver.start()
        try:
            await test(driver, broker)
        finally:
            for _, pending in broker.fetches:
                pending.cancel()
            await driver.stop()

    asyncio.run(main())


def test_records_are_fetched_again_only_after_poll_took_them() -> None:
    async def test(driver: ConsumerDriver, broker: FakeBroker) -> None:
        with driver.lock:
            driver.state.assign([T0, T1])
            driver.state.seek(T0, 0)
            driver.state.seek(T1, 0)
        driver.wake()
        await turns()
        assert [asked(r) for r, _ in broker.fetches] == [{T0: 0, T1: 0}], "one fetch per broker"
        epochs = [p.current_leader_epoch for t in broker.fetches[0][0].topics for p in t.partitions]
        assert epochs == [3, 3], "the metadata's leader epochs (KIP-320)"
        broker.fetches.pop()[1].set_result(answer(p0=build_batch([b"a", b"b"])))
        await turns()
        assert broker.fetches == [], "T1 waits for T0's records to be taken, as it always did"
        with driver.lock:
            assert [r.value for r in take_records(driver.state, 500)] == [b"a", b"b"]
        driver.wake()
        await turns()
        assert [asked(r) for r, _ in broker.fetches] == [{T0: 2, T1: 0}]
        broker.fetches.pop()[1].set_result(answer())
        await turns()
        assert [asked(r) for r, _ in broker.fetches] == [{T0: 2, T1: 0}], (
            "an answer without records is followed by the next fetch at once"
        )

    run(test)


def test_a_reset_is_looked_up_when_poll_asks_and_then_fetched() -> None:
    async def test(driver: ConsumerDriver, broker: FakeBroker) -> None:
        with driver.lock:
            driver.state.assign([T0])
        driver.wake()
        await turns()
        assert broker.fetches == [] and driver.state.position(T0) is None
        with driver.lock:
            assert driver.state.request_resets()
        driver.wake()
        await turns()
        assert driver.state.position(T0) == broker.log_end_offset
        assert [asked(r) for r, _ in broker.fetches] == [{T0: broker.log_end_offset}]

    run(test)


def test_a_failed_fetch_marks_metadata_stale_and_backs_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1_000]
    monkeypatch.setattr(consumer_driver, "now_ms", lambda: clock[0])

    async def test(driver: ConsumerDriver, broker: FakeBroker) -> None:
        with driver.lock:
            driver.state.assign([T0])
            driver.state.seek(T0, 5)
        driver.wake()
        await turns()
        failed = grpc.aio.AioRpcError(
            grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata()
        )
        broker.fetches.pop()[1].set_exception(failed)
        await turns()
        assert driver.metadata.stale  # type: ignore[attr-defined]
        assert broker.fetches == [], "backing off"
        clock[0] += 1_000
        driver.wake()
        await turns()
        assert [asked(r) for r, _ in broker.fetches] == [{T0: 5}]

    run(test)


def test_pausing_a_partition_with_records_waiting_lets_its_broker_be_fetched_again() -> None:
    """T0's records wait for poll(), so broker 1 gets no fetch. Once T0 is paused, poll() takes
    nothing and so wakes nothing: the facades' pause() wakes the driver, and the broker's
    other partition is fetched at once (not at the driver's idle turn, 0.5 s later)."""

    async def test(driver: ConsumerDriver, broker: FakeBroker) -> None:
        with driver.lock:
            driver.state.assign([T0, T1])
            driver.state.seek(T0, 0)
            driver.state.seek(T1, 0)
        driver.wake()
        await turns()
        broker.fetches.pop()[1].set_result(answer(p0=build_batch([b"a", b"b"])))
        await turns()
        assert broker.fetches == []
        with driver.lock:
            driver.state.pause([T0])
            assert take_records(driver.state, 500) == []
        driver.wake()
        await turns()
        assert len(broker.fetches) == 1, "T1 is fetched again while T0 keeps its records"

    run(test)


def test_a_leader_just_elected_is_asked_again_for_its_offsets() -> None:
    """OFFSET_NOT_AVAILABLE (its high watermark has not caught up yet) is retried, not raised."""

    async def test(driver: ConsumerDriver, broker: FakeBroker) -> None:
        broker.not_available = 2
        found = await driver.list_offsets({T0: (broker_pb2.OFFSET_SPEC_LATEST, -1)}, 5)
        assert found == {T0: (broker.log_end_offset, 0)} and broker.not_available == 0

    run(test)


def test_list_offsets_names_the_topic_id_and_asks_again_after_unknown_topic_id() -> None:
    """KIP-516: a reset's ListOffsets names the id the metadata shows, so a broker still hosting
    the deleted topic of that name refuses (UNKNOWN_TOPIC_ID) rather than answer the old log's
    offsets; the driver marks its metadata stale and asks again, and is answered once the
    broker hosts the topic under that id."""
    new_id = b"\x0b" * 16

    async def test(driver: ConsumerDriver, broker: FakeBroker) -> None:
        driver.metadata.topic_ids = {"t": new_id}  # type: ignore[misc]
        broker.other_id_answers = 2
        found = await driver.list_offsets({T0: (broker_pb2.OFFSET_SPEC_LATEST, -1)}, 5)
        assert found == {T0: (broker.log_end_offset, 0)} and broker.other_id_answers == 0
        assert driver.metadata.stale  # type: ignore[attr-defined]
        assert [t.topic_id for r in broker.listed for t in r.topics] == [new_id] * 3

    run(test)


def test_a_topic_created_again_is_refetched_under_its_new_id_from_a_reset_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The broker hosts "t" under another id than the consumer's metadata shows: it answers
    UNKNOWN_TOPIC_ID, the consumer marks its metadata stale, and once the metadata shows the
    new id the partition's old position (meaningless in the new topic) is reset per
    auto.offset.reset (latest here: ListOffsets) and fetched under the new id."""
    old_id, new_id = b"\x0a" * 16, b"\x0b" * 16
    clock = [1_000]
    monkeypatch.setattr(consumer_driver, "now_ms", lambda: clock[0])

    async def test(driver: ConsumerDriver, broker: FakeBroker) -> None:
        metadata = driver.metadata
        metadata.topic_ids = {"t": old_id}  # type: ignore[misc]
        with driver.lock:
            driver.state.assign([T0])
            driver.state.seek(T0, 5)
        driver.wake()
        await turns()
        request, pending = broker.fetches.pop()
        assert [(t.name, t.topic_id) for t in request.topics] == [("t", old_id)]
        refusal = broker_pb2.FetchResponse.PartitionResponse(
            partition=0, error_code=ErrorCode.UNKNOWN_TOPIC_ID
        )
        pending.set_result(
            broker_pb2.FetchResponse(
                topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[refusal])]
            )
        )
        await turns()
        assert metadata.stale  # type: ignore[attr-defined]
        with driver.lock:
            assert driver.state.pop_error() is None, "retried after a refresh, never raised"
        metadata.topic_ids = {"t": new_id}  # type: ignore[misc]  # what the refresh learnt
        for _, waiting in broker.fetches:
            waiting.cancel()
        broker.fetches.clear()
        clock[0] += 1_000  # past retry.backoff.ms: the broker that refused it leads still
        driver.wake()
        await turns(60)
        assert driver.state.position(T0) == broker.log_end_offset, "reset, not kept at 5"
        request = broker.fetches[-1][0]
        assert [(t.name, t.topic_id) for t in request.topics] == [("t", new_id)]
        assert asked(request) == {T0: broker.log_end_offset}

    run(test)
