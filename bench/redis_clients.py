"""Redis Streams from one Python process, measured with its own client, `redis` with `hiredis`.

Each function takes the server's URL and the workload and returns a dict of figures, the same keys
as Samsa's side (bench/client_bench.py; see bench/figures.py): `records_per_s` and `mb_per_s`, or
`p50_us` and `p99_us`. The cluster bench finds them by name, `redis_<kind>` (bench/harness.py).

Redis has no Kafka partitions. A partition is one ordered log with one writer path on the server,
so `partitions=6` means six stream keys, written round-robin and read all together — the nearest
shape.

- produce: XADD in non-transactional pipelines of `pipeline` commands.
- consume: XREAD COUNT `count` over every key at once, from each key's last id seen.
- sync latency: one XADD at a time.
- end-to-end latency at low load: a blocking XREAD is already waiting on the same event loop as
  the producer; the producer sends one record every `interval_s` and the time from just before
  the send to the record's arrival in the consumer's hands is recorded.
"""

from __future__ import annotations

import asyncio
import time

from bench.figures import latency_summary, make_values, throughput
from samsa.common import event_loops

PIPELINE = 1000  # XADDs per Redis pipeline
XREAD_COUNT = 10_000  # records per XREAD
VALUE_FIELD = b"v"


def _redis_key(index: int) -> str:
    return f"bench:{index}"


def _redis_client(url: str):
    import redis

    return redis.Redis.from_url(url, protocol=2)


def redis_produce(
    url: str, n: int, size: int, partitions: int = 1, pipeline: int = PIPELINE
) -> dict:
    """XADD `n` records of `size` bytes to fresh stream keys in pipelines: records/s and MB/s."""
    client = _redis_client(url)
    try:
        keys = [_redis_key(index) for index in range(partitions)]
        client.delete(*keys)
        values = make_values(size)
        started = time.perf_counter()
        for first in range(0, n, pipeline):
            pipe = client.pipeline(transaction=False)
            for index in range(first, min(n, first + pipeline)):
                pipe.xadd(keys[index % partitions], {VALUE_FIELD: values[index % len(values)]})
            pipe.execute()
        seconds = time.perf_counter() - started
        stored = sum(client.xlen(key) for key in keys)
        if stored != n:
            raise RuntimeError(f"Redis holds {stored} entries, {n} were added")
        return throughput(n, n * size, seconds)
    finally:
        client.close()


def redis_consume(
    url: str, n: int, size: int, partitions: int = 1, count: int = XREAD_COUNT
) -> dict:
    """Read back what `redis_produce` wrote with XREAD COUNT over every key: records/s, MB/s."""
    client = _redis_client(url)
    try:
        last_ids: dict[str, bytes | str] = {_redis_key(index): "0-0" for index in range(partitions)}
        received = payload_bytes = 0
        started = time.perf_counter()
        while received < n:
            answer = client.xread(last_ids, count=count)
            if not answer:
                raise RuntimeError(f"XREAD ran dry after {received} of {n} records")
            for key, entries in answer:
                for _entry_id, fields in entries:
                    payload_bytes += len(fields[VALUE_FIELD])
                received += len(entries)
                last_ids[key.decode() if isinstance(key, bytes) else key] = entries[-1][0]
        seconds = time.perf_counter() - started
        return throughput(received, payload_bytes, seconds)
    finally:
        client.close()


def redis_sync_latency(url: str, count: int, size: int) -> dict:
    """One XADD at a time, each waiting for its reply, `count` times: p50/p99 µs."""
    client = _redis_client(url)
    try:
        key = _redis_key(0)
        client.delete(key)
        value = make_values(size, 1)[0]
        samples_ns = []
        for _ in range(count):
            started = time.perf_counter_ns()
            client.xadd(key, {VALUE_FIELD: value})
            samples_ns.append(time.perf_counter_ns() - started)
        return latency_summary(samples_ns)
    finally:
        client.close()


async def _redis_end_to_end(url: str, count: int, size: int, interval_s: float) -> dict:
    import redis.asyncio

    producer = redis.asyncio.Redis.from_url(url, protocol=2)
    consumer = redis.asyncio.Redis.from_url(url, protocol=2)
    key = _redis_key(0)
    try:
        await producer.delete(key)
        sent_ns: dict[int, int] = {}
        samples_ns: list[int] = []

        async def consume() -> None:
            last_id: bytes | str = "0-0"
            while len(samples_ns) < count:
                answer = await consumer.xread({key: last_id}, count=1000, block=10_000)
                arrived = time.perf_counter_ns()
                if not answer:
                    raise RuntimeError(f"no record for 10 s after {len(samples_ns)} of {count}")
                for _key, entries in answer:
                    for entry_id, fields in entries:
                        samples_ns.append(arrived - sent_ns[int(fields[VALUE_FIELD][:12])])
                        last_id = entry_id

        reader = asyncio.create_task(consume())
        await asyncio.sleep(0.05)  # the consumer's first XREAD is blocking before records go out
        padding = b"x" * max(0, size - 12)
        for index in range(count):
            sent_ns[index] = time.perf_counter_ns()
            await producer.xadd(key, {VALUE_FIELD: b"%012d" % index + padding})
            await asyncio.sleep(interval_s)
        await asyncio.wait_for(reader, timeout=30)
        return latency_summary(samples_ns)
    finally:
        await consumer.aclose()
        await producer.aclose()


def redis_end_to_end_latency(url: str, count: int, size: int, interval_s: float = 0.001) -> dict:
    """XADD → blocking XREAD arrival at low load: p50/p99 µs."""
    return event_loops.run(_redis_end_to_end(url, count, size, interval_s))
