"""Samsa's side of the cluster benchmark: the Python SDK from one process, as a user runs it.

Each function measures one thing against a running cluster and returns a dict the cluster
bench (bench/cluster_bench.py, through bench/harness.py) prints beside the peers: records_per_s /
mb_per_s, or p50_us / p99_us.
Records are `size` random bytes (incompressible-ish: zstd gains little, as with real payloads
that are already compact); keyless, so the sticky partitioner fills big batches, which is what
the SDK does by default. `idempotence` (produce and sync latency) sets enable.idempotence; left
None, the SDK's default applies: on with acks=all, off with acks=1.
Every figure counts only what was verified, as the peers' do: a produce run with a failed
record, a consume run short of `n` records, or a produce->consume run that did not read every
record it timed fails instead of printing a figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time

from bench.figures import arrival_latencies, percentile
from samsa.client import Consumer, Producer
from samsa.client.async_consumer import AsyncConsumer
from samsa.client.async_producer import AsyncProducer
from samsa.common import event_loops

# One 16 KiB batch is Kafka's default; at 100-byte records the per-request cost dominates,
# so the benchmark uses the batch size a throughput-minded user sets.
BATCH_SIZE = 256 * 1024


def _percentiles(samples_s: list[float]) -> dict[str, float]:
    """p50 and p99 in µs, nearest rank: the same percentile as the peers' figures."""
    return {
        "p50_us": percentile(samples_s, 0.50) * 1e6,
        "p99_us": percentile(samples_s, 0.99) * 1e6,
    }


def _payloads(size: int, distinct: int = 1024) -> list[bytes]:
    return [os.urandom(size) for _ in range(distinct)]


def _idempotence(idempotence: bool | None) -> dict[str, bool]:
    """enable.idempotence when the caller sets it; unset, the SDK's default applies (on, unless
    acks is not all: Kafka >= 3.0's rule, samsa_client/config.py)."""
    return {} if idempotence is None else {"enable.idempotence": idempotence}


def samsa_produce(
    bootstrap: str,
    topic: str,
    n: int,
    size: int,
    compression: str,
    acks: int | str = 1,
    idempotence: bool | None = None,
) -> dict[str, float]:
    payloads = _payloads(size)
    mask = len(payloads) - 1
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": BATCH_SIZE,
            "compression.type": compression,
            **_idempotence(idempotence),
        }
    )
    try:
        producer.send(topic, payloads[0]).result(timeout=30)  # metadata and connections warm
        send = producer.send
        started = time.perf_counter()
        for i in range(n):
            send(topic, payloads[i & mask])
        producer.flush()
        elapsed = time.perf_counter() - started
        failed_for_good(producer, n)
    finally:
        producer.close()
    return {"records_per_s": n / elapsed, "mb_per_s": n * size / elapsed / 1e6}


def failed_for_good(producer: Producer, count: int) -> None:
    """Raise when any record the producer sent failed (Producer.failed_records, Kafka's
    record-error-total): a rate must count only records the cluster acknowledged, as the peers'
    produce checks what their servers hold."""
    if failed := producer.failed_records:
        raise RuntimeError(f"{failed:,} of {count:,} records failed, the rate would count them")


def samsa_consume(
    bootstrap: str, topic: str, n: int, size: int, partitions: int
) -> dict[str, float]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "max.poll.records": 100_000,
        }
    )
    try:
        consumer.assign([(topic, p) for p in range(partitions)])
        got = 0
        started = time.perf_counter()
        while got < n:
            records = consumer.poll(timeout=10)
            if not records:
                raise RuntimeError(f"consumed {got} of {n} records, then nothing for 10 s")
            got += len(records)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    return {"records_per_s": got / elapsed, "mb_per_s": got * size / elapsed / 1e6}


def samsa_sync_latency(
    bootstrap: str,
    topic: str,
    n: int,
    size: int,
    acks: int | str = 1,
    idempotence: bool | None = None,
) -> dict[str, float]:
    """One record at a time, each waited for: send + flush-free ack round trip (linger 0)."""
    payload = os.urandom(size)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, **_idempotence(idempotence)}
    )
    try:
        producer.send(topic, payload).result(timeout=30)
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            producer.send(topic, payload).result(timeout=30)
            samples.append(time.perf_counter() - started)
    finally:
        producer.close()
    return _percentiles(samples)


def record_id(index: int) -> bytes:
    """The first 8 bytes of the `index`th timed record, 1 on: never the warm-up record's
    (zeros), which the consumer also reads."""
    return (index + 1).to_bytes(8, "big")


def samsa_end_to_end_latency(
    bootstrap: str, topic: str, n: int, size: int, interval_s: float
) -> dict[str, float]:
    """Produce one record every `interval_s`; a consumer thread stamps when each arrives (the
    first time); a run that does not read all `n` fails (figures.arrival_latencies)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "auto.offset.reset": "latest", "fetch.max.wait.ms": 100}
    )
    consumer.assign([(topic, 0)])
    consumer.position((topic, 0))
    sent_at: dict[bytes, float] = {}
    arrived_at: dict[bytes, float] = {}
    done = threading.Event()

    def consume() -> None:
        while len(arrived_at) < n and not done.is_set():
            for record in consumer.poll(timeout=0.5):
                arrive(sent_at, arrived_at, record.value[:8])

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    try:
        producer.send(topic, b"\0" * size, partition=0).result(timeout=30)
        for i in range(n):
            value = record_id(i) + os.urandom(max(0, size - 8))
            sent_at[value[:8]] = time.perf_counter()
            producer.send(topic, value, partition=0)
            time.sleep(interval_s)
        producer.flush()
        reader.join(timeout=30)
    finally:
        done.set()
        producer.close()
        consumer.close()
    return _percentiles(arrival_latencies(sent_at, arrived_at, n))


def arrive(sent_at: dict[bytes, float], arrived_at: dict[bytes, float], key: bytes) -> None:
    """Stamp the first arrival of a timed record (others, e.g. the warm-up, are not timed)."""
    if key in sent_at and key not in arrived_at:
        arrived_at[key] = time.perf_counter()


def samsa_end_to_end_latency_asyncio(
    bootstrap: str, topic: str, n: int, size: int, interval_s: float
) -> dict[str, float]:
    """samsa_end_to_end_latency from asyncio code: an AsyncProducer and an AsyncConsumer on one
    event loop, the shape of the peers' clients (nats-py and redis.asyncio), so no record crosses
    a thread on its way. Same records, rate and clock as the sync measurement."""
    return event_loops.run(_end_to_end_asyncio(bootstrap, topic, n, size, interval_s))


async def _end_to_end_asyncio(
    bootstrap: str, topic: str, n: int, size: int, interval_s: float
) -> dict[str, float]:
    producer = AsyncProducer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    consumer = AsyncConsumer(
        {"bootstrap.servers": bootstrap, "auto.offset.reset": "latest", "fetch.max.wait.ms": 100}
    )
    await producer.start()
    await consumer.start()
    sent_at: dict[bytes, float] = {}
    arrived_at: dict[bytes, float] = {}

    async def consume() -> None:
        while len(arrived_at) < n:
            for record in await consumer.poll(timeout=0.5):
                arrive(sent_at, arrived_at, record.value[:8])

    try:
        await consumer.assign([(topic, 0)])
        await consumer.position((topic, 0))
        reader = asyncio.create_task(consume())
        await asyncio.wait_for(producer.send_and_wait(topic, b"\0" * size, partition=0), 30)
        for i in range(n):
            value = record_id(i) + os.urandom(max(0, size - 8))
            sent_at[value[:8]] = time.perf_counter()
            await producer.send(topic, value, partition=0)
            await asyncio.sleep(interval_s)
        await producer.flush(30)
        with contextlib.suppress(TimeoutError):  # a record missing then fails the run below
            await asyncio.wait_for(reader, timeout=30)
    finally:
        await producer.stop()
        await consumer.stop()
    return _percentiles(arrival_latencies(sent_at, arrived_at, n))


IDLE_S = 10.0  # a consumer that reads nothing this long has failed


def read_from_start(
    bootstrap: str, topic: str, count: int, size: int, isolation: str = "read_uncommitted"
) -> dict[str, float]:
    """Partition 0 of `topic` from the start until `count` records came; the clock runs from the
    first poll() to the last record."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "max.poll.records": 100_000,
        }
    )
    try:
        consumer.assign([(topic, 0)])
        got = 0
        started = last = time.perf_counter()
        while got < count:
            records = consumer.poll(timeout=1.0)
            now = time.perf_counter()
            if records:
                got, last = got + len(records), now
            elif now - last > IDLE_S:
                raise RuntimeError(f"read {got:,} of {count:,} records, then none for {IDLE_S:g} s")
    finally:
        consumer.close()
    elapsed = last - started
    return {"records_per_s": got / elapsed, "mb_per_s": got * size / elapsed / 1e6}
