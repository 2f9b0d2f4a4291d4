"""Goal: the sync `Producer` and the `AsyncProducer` both run the one producer driver: records are
acknowledged at the offsets the broker gave them, in order per partition; flush and close settle
everything; a full buffer.memory makes send() wait for completions (blocking, or awaiting); user
callbacks run off the driver's loop, so a slow one stalls no answer.

Method: the producers against in-memory brokers (fake_produce_cluster.py: the metadata and the
BrokerService stub are replaced, the rest of the SDK — accumulator, driver, ProduceStream — is
the real code). Waits are on futures and events with generous timeouts, never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, Producer, RecordMetadata
from samsa.client.produce_stream import stream_error_outcome
from samsa.client.record_future import RecordFuture
from samsa.common.errors import ErrorCode

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=2)
    fake.install(monkeypatch)
    return fake


@pytest.mark.parametrize("linger_ms", [0, 5])
def test_sync_producer_acks_every_record_at_its_offset(cluster: FakeCluster, linger_ms: int):
    futures: list[tuple[bytes, RecordFuture]] = []
    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": linger_ms}) as producer:
        for n in range(2_000):
            key = b"key-%d" % (n % 7)
            futures.append((b"value-%d" % n, producer.send(TOPIC, b"value-%d" % n, key=key)))
        producer.flush(timeout=WAIT_S)
    for value, future in futures:
        metadata = future.result(timeout=0)
        assert cluster.log(TOPIC, metadata.partition)[metadata.offset] == value


def test_a_slow_callback_stalls_no_answer(cluster: FakeCluster):
    release = threading.Event()
    called_on: list[str] = []

    def slow(_: RecordFuture) -> None:
        called_on.append(threading.current_thread().name)
        release.wait(WAIT_S)

    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000}) as producer:
        # Lingering (only a flush sends it): the callback is registered before the answer.
        producer.send(TOPIC, b"first", partition=0).add_done_callback(slow)
        producer.flush(timeout=WAIT_S)  # settled; its callback now blocks the callback thread
        later = [producer.send(TOPIC, b"later-%d" % n, partition=1) for n in range(50)]
        producer.flush(timeout=WAIT_S)  # answers still come back while it is blocked
        assert all(future.done() for future in later)
        release.set()
    assert called_on == ["samsa-callbacks"]


def test_a_settled_future_calls_back_at_once_on_the_callers_thread(cluster: FakeCluster):
    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 0}) as producer:
        future = producer.send(TOPIC, b"x", partition=2)
        assert future.result(timeout=WAIT_S) == RecordMetadata(
            TOPIC, 2, 0, future.result().timestamp
        )
        seen: list[str] = []
        future.add_done_callback(lambda _: seen.append(threading.current_thread().name))
        assert seen == [threading.current_thread().name]


@pytest.mark.parametrize("settled", [False, True])
def test_what_a_callback_raises_is_logged_whenever_it_was_added(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture, settled: bool
):
    """As concurrent.futures' add_done_callback: a callback that raises is logged and ignored.
    On a settled future it raised out of add_done_callback into the application, while the
    same callback added a moment earlier was logged on the callback thread."""

    def raising(_: RecordFuture) -> None:
        raise ValueError("from the callback")

    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000}) as producer:
        future = producer.send(TOPIC, b"x", partition=0)
        if settled:
            producer.flush(timeout=WAIT_S)
        future.add_done_callback(raising)
        producer.flush(timeout=WAIT_S)
    assert "a send() callback raised" in caplog.text
    assert "from the callback" in caplog.text


def test_async_producer_sends_awaits_and_calls_back_on_its_loop(cluster: FakeCluster):
    async def main() -> None:
        loop_thread = threading.current_thread().name
        called_on: list[str] = []
        async with AsyncProducer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 2}) as producer:
            first = await producer.send_and_wait(TOPIC, b"first", partition=0)
            assert (first.partition, first.offset) == (0, 0)
            futures = [await producer.send(TOPIC, b"v-%d" % n, partition=0) for n in range(500)]
            futures[-1].add_done_callback(
                lambda _: called_on.append(threading.current_thread().name)
            )
            await producer.flush(timeout=WAIT_S)
            offsets = [(await future).offset for future in futures]
        assert offsets == list(range(1, 501))
        assert called_on == [loop_thread]

    asyncio.run(main())
    assert cluster.log(TOPIC, 0) == [b"first"] + [b"v-%d" % n for n in range(500)]


SMALL_BUFFER = {"buffer.memory": 4_000, "batch.size": 1_000, "linger.ms": 50}


def test_a_full_buffer_makes_send_wait_for_completions(cluster: FakeCluster):
    values = [b"%04d" % n + b"x" * 200 for n in range(300)]  # ~17x buffer.memory in all
    with Producer({"bootstrap.servers": BOOTSTRAP, **SMALL_BUFFER}) as producer:
        futures = [producer.send(TOPIC, value, partition=0) for value in values]
        producer.flush(timeout=WAIT_S)
    assert [future.result(timeout=0).offset for future in futures] == list(range(300))
    assert cluster.log(TOPIC, 0) == values


def test_a_full_buffer_makes_async_send_wait_for_completions(cluster: FakeCluster):
    values = [b"%04d" % n + b"x" * 200 for n in range(300)]

    async def main() -> list[int]:
        async with AsyncProducer({"bootstrap.servers": BOOTSTRAP, **SMALL_BUFFER}) as producer:
            futures = [await producer.send(TOPIC, value, partition=0) for value in values]
            return [(await future).offset for future in futures]

    assert asyncio.run(main()) == list(range(300))
    assert cluster.log(TOPIC, 0) == values


@pytest.mark.parametrize(
    ("status", "retriable"),
    [
        (grpc.StatusCode.UNAVAILABLE, True),  # the leader was killed, or not up yet
        (grpc.StatusCode.INTERNAL, True),  # grpc.aio's "Internal error from Core" on a dead stream
        (grpc.StatusCode.DEADLINE_EXCEEDED, True),
        (grpc.StatusCode.PERMISSION_DENIED, False),
        (grpc.StatusCode.INVALID_ARGUMENT, False),
    ],
)
def test_a_broken_streams_requests_are_retried_when_their_outcome_is_unknown(
    status: grpc.StatusCode, retriable: bool
):
    error = grpc.aio.AioRpcError(status, grpc.aio.Metadata(), grpc.aio.Metadata(), "gone")
    code, is_retriable = stream_error_outcome(error)
    assert is_retriable is retriable
    assert code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)


@pytest.mark.parametrize("facade", ["sync", "async"])
def test_flush_returns_only_once_every_future_it_covers_is_settled(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch, facade: str
):
    """A batch leaves the accumulator under the lock and its futures are settled just after:
    settling made slow here, a flush that looked only at the accumulator returned in between
    (the Spark sink then saw 'not acknowledged within 0 s'). The async flush is the driver's own
    (ProducerDriver.flush, which the transaction ends of both facades run too)."""
    from samsa.client.record_future import BatchOutcomes

    settle = BatchOutcomes.settle

    def slow_settle(self, completed):  # type: ignore[no-untyped-def]
        threading.Event().wait(0.3)
        return settle(self, completed)

    monkeypatch.setattr(BatchOutcomes, "settle", slow_settle)
    config = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000}
    if facade == "sync":
        with Producer(config) as producer:
            futures = [producer.send(TOPIC, b"v%d" % n, partition=n % 3) for n in range(30)]
            producer.flush(timeout=WAIT_S)
            assert all(future.done() for future in futures)
            assert [f.result(timeout=0).offset for f in futures[:3]] == [0, 0, 0]
        return

    async def main() -> None:
        async with AsyncProducer(config) as producer:
            futures = [await producer.send(TOPIC, b"v%d" % n, partition=n % 3) for n in range(30)]
            await producer.flush(timeout=WAIT_S)
            assert all(future.done() for future in futures)
            assert [(await f).offset for f in futures[:3]] == [0, 0, 0]

    asyncio.run(main())


@pytest.mark.parametrize("facade", ["sync", "async"])
def test_a_flush_whose_answers_never_come_times_out(cluster: FakeCluster, facade: str):
    """The brokers hold every answer: flush(timeout) raises TimeoutError once `timeout` has passed
    (the driver's flush wakes on settlements and re-checks every 0.1 s; no answer comes), and the
    record stays unsettled rather than reported written."""
    for broker in cluster.brokers.values():
        broker.answer_in_groups_of = 1_000
    config = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0}
    if facade == "sync":
        producer = Producer(config)
        future = producer.send(TOPIC, b"held", partition=0)
        with pytest.raises(TimeoutError):
            producer.flush(timeout=0.3)
        assert not future.done()
        producer.close(timeout=0.1)
        return

    async def main() -> None:
        producer = AsyncProducer(config)
        await producer.start()
        future = await producer.send(TOPIC, b"held", partition=0)
        with pytest.raises(TimeoutError):
            await producer.flush(timeout=0.3)
        assert not future.done()
        await producer.stop(timeout=0.1)

    asyncio.run(main())


def test_keyless_records_never_go_to_a_partition_without_a_leader(cluster: FakeCluster):
    """The sticky partitioner draws among the partitions the metadata knows a leader for."""
    del cluster.leaders[(TOPIC, 1)]
    config = {"bootstrap.servers": BOOTSTRAP, "batch.size": 200, "linger.ms": 0}
    with Producer(config) as producer:
        futures = [producer.send(TOPIC, b"v-%d" % n) for n in range(500)]
        producer.flush(timeout=WAIT_S)
    partitions = {future.result(timeout=0).partition for future in futures}
    assert partitions == {0, 2}
