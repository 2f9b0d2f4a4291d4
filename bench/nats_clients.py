"""NATS JetStream from one Python process, measured with its own asyncio client, `nats-py`.

Each function takes the server's URL and the workload and returns a dict of figures, the same keys
as Samsa's side (bench/client_bench.py; see bench/figures.py): `records_per_s` and `mb_per_s`, or
`p50_us` and `p99_us`. The cluster bench finds them by name, `nats_<kind>` (bench/harness.py).

JetStream has no Kafka partitions. A partition is one ordered log with one writer path on the
server, so `partitions=6` means six streams (one subject each), written round-robin and read all
together — the nearest shape.

- produce: `publish_async` with at most `inflight` acks outstanding (the client's own
  bounded-window API; Go's PublishAsync), then wait for every ack.
- consume: one pull consumer per stream (AckNone, as a Kafka consumer does not ack each record),
  `fetch(batch)` until every record is in; the streams' fetch loops run together.
- sync latency: one publish-and-ack at a time.
- replicas (produce and sync latency, for the replication bench): the streams are created with
  `num_replicas`, and the client then connects to the server leading the first stream, as
  Samsa's producer talks to the partition leader directly.
- end-to-end latency at low load: a push subscription is already waiting on the same event loop
  as the producer; the producer sends one record every `interval_s` and the time from just before
  the send to the record's arrival in the consumer's hands is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from bench.figures import latency_summary, make_values, throughput
from samsa.common import event_loops

INFLIGHT = 256  # outstanding JetStream publish acks
FETCH_BATCH = 1000  # records per JetStream pull request
STREAM_CREATE_TIMEOUT_S = 30.0  # a new JetStream cluster elects its meta leader within seconds


def _stream_name(index: int) -> str:
    return f"BENCH{index}"


def _subject(index: int) -> str:
    return f"bench.{index}"


async def _nats_connect(url: str):
    import nats

    return await nats.connect(url, max_reconnect_attempts=0, pending_size=64 * 1024 * 1024)


async def _nats_reset_streams(js, partitions: int, replicas: int = 1) -> None:
    """Delete and re-create the bench's streams: file storage, one subject each, `replicas`
    copies. A cluster that has just started may not have elected its JetStream meta leader yet:
    the API then times out or answers 503, and the reset is retried for a bounded time."""
    import nats.errors
    import nats.js.errors
    from nats.js.api import StorageType

    deadline = time.monotonic() + STREAM_CREATE_TIMEOUT_S
    for index in range(partitions):
        while True:
            try:
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    await js.delete_stream(_stream_name(index))
                await js.add_stream(
                    name=_stream_name(index),
                    subjects=[_subject(index)],
                    storage=StorageType.FILE,
                    num_replicas=replicas,
                )
                break
            except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def _nats_open(url: str, partitions: int, replicas: int, inflight: int = INFLIGHT):
    """Connect, reset the streams, and return (connection, JetStream context). With replicas,
    the connection moves to the server that leads the first stream, so that a publish is not
    routed through another server first: JetStream's best case, as Samsa's producer also talks
    to the partition leader directly."""
    from bench.peers import HOST, nats_port_of

    nc = await _nats_connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=inflight)
        await _nats_reset_streams(js, partitions, replicas)
        if replicas == 1:
            return nc, js
        leader = (await js.stream_info(_stream_name(0))).cluster.leader
    except BaseException:
        await nc.close()
        raise
    leader_url = f"nats://{HOST}:{nats_port_of(leader)}"
    if leader_url == url:
        return nc, js
    await nc.close()
    nc = await _nats_connect(leader_url)
    return nc, nc.jetstream(publish_async_max_pending=inflight)


async def _nats_stream_counts(js, partitions: int) -> list[int]:
    """How many messages each of the bench's streams holds."""
    counts = []
    for index in range(partitions):
        counts.append((await js.stream_info(_stream_name(index))).state.messages)
    return counts


async def _nats_produce(
    url: str, n: int, size: int, partitions: int, inflight: int, replicas: int
) -> dict:
    nc, js = await _nats_open(url, partitions, replicas, inflight)
    try:
        values = make_values(size)
        subjects = [_subject(index) for index in range(partitions)]
        failures: list[BaseException] = []

        def on_done(future: asyncio.Future) -> None:
            if not future.cancelled() and future.exception() is not None:
                failures.append(future.exception())

        started = time.perf_counter()
        for index in range(n):
            future = await js.publish_async(
                subjects[index % partitions], values[index % len(values)]
            )
            future.add_done_callback(on_done)
        await js.publish_async_completed()
        seconds = time.perf_counter() - started
        if failures:
            raise RuntimeError(f"{len(failures)} JetStream publishes failed: {failures[0]!r}")
        stored = sum(await _nats_stream_counts(js, partitions))
        if stored != n:
            raise RuntimeError(f"JetStream holds {stored} messages, {n} were published")
        return throughput(n, n * size, seconds)
    finally:
        await nc.close()


async def _nats_consume(url: str, n: int, size: int, partitions: int, batch: int) -> dict:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await _nats_connect(url)
    try:
        js = nc.jetstream()
        expected = await _nats_stream_counts(js, partitions)
        if sum(expected) < n:
            raise RuntimeError(f"the streams hold {sum(expected)} messages, {n} to read")
        subscriptions = [
            await js.pull_subscribe(
                _subject(index),
                stream=_stream_name(index),
                config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
            )
            for index in range(partitions)
        ]
        received = [0] * partitions
        payload_bytes = [0] * partitions

        async def drain(index: int) -> None:
            subscription = subscriptions[index]
            while received[index] < expected[index]:
                want = min(batch, expected[index] - received[index])
                for message in await subscription.fetch(want, timeout=10):
                    received[index] += 1
                    payload_bytes[index] += len(message.data)

        started = time.perf_counter()
        await asyncio.gather(*(drain(index) for index in range(partitions)))
        seconds = time.perf_counter() - started
        return throughput(sum(received), sum(payload_bytes), seconds)
    finally:
        await nc.close()


async def _nats_sync_latency(url: str, count: int, size: int, replicas: int) -> dict:
    nc, js = await _nats_open(url, 1, replicas)
    try:
        value = make_values(size, 1)[0]
        subject = _subject(0)
        samples_ns = []
        for _ in range(count):
            started = time.perf_counter_ns()
            await js.publish(subject, value)
            samples_ns.append(time.perf_counter_ns() - started)
        return latency_summary(samples_ns)
    finally:
        await nc.close()


async def _nats_end_to_end(url: str, count: int, size: int, interval_s: float) -> dict:
    from nats.js.api import DeliverPolicy

    producer = await _nats_connect(url)
    consumer = await _nats_connect(url)
    try:
        js = producer.jetstream()
        await _nats_reset_streams(js, 1)
        sent_ns: dict[int, int] = {}
        samples_ns: list[int] = []
        all_in = asyncio.Event()

        async def on_message(message) -> None:
            arrived = time.perf_counter_ns()
            samples_ns.append(arrived - sent_ns[int(message.data[:12])])
            if len(samples_ns) == count:
                all_in.set()

        subscription = await consumer.jetstream().subscribe(
            _subject(0), cb=on_message, deliver_policy=DeliverPolicy.NEW, ordered_consumer=True
        )
        padding = b"x" * max(0, size - 12)
        for index in range(count):
            sent_ns[index] = time.perf_counter_ns()
            await js.publish_async(_subject(0), b"%012d" % index + padding)
            await asyncio.sleep(interval_s)
        await asyncio.wait_for(all_in.wait(), timeout=30)
        await subscription.unsubscribe()
        return latency_summary(samples_ns)
    finally:
        await consumer.close()
        await producer.close()


def nats_produce(
    url: str, n: int, size: int, partitions: int = 1, inflight: int = INFLIGHT, replicas: int = 1
) -> dict:
    """Publish `n` records of `size` bytes to fresh streams of `replicas` copies: records/s
    and MB/s."""
    return event_loops.run(_nats_produce(url, n, size, partitions, inflight, replicas))


def nats_consume(
    url: str, n: int, size: int, partitions: int = 1, batch: int = FETCH_BATCH
) -> dict:
    """Read back what `nats_produce` wrote, with pull consumers: records/s and MB/s."""
    return event_loops.run(_nats_consume(url, n, size, partitions, batch))


def nats_sync_latency(url: str, count: int, size: int, replicas: int = 1) -> dict:
    """One synchronous publish-and-ack at a time, `count` times: p50/p99 µs."""
    return event_loops.run(_nats_sync_latency(url, count, size, replicas))


def nats_end_to_end_latency(url: str, count: int, size: int, interval_s: float = 0.001) -> dict:
    """Publish → push-consumer arrival at low load: p50/p99 µs."""
    return event_loops.run(_nats_end_to_end(url, count, size, interval_s))
