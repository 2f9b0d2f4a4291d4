"""Goal: `Producer.send_many` puts every record where `send` would, in the order given per
partition, under the same batching, memory and sticky rules, and its pure parts agree with the
one-record code they stand for.

Method: the pure parts with numbers — `partitions_for_keys` (numpy and key by key) against
`partition_for_key` on random keys of every tail length; `partition_groups` on mixed calls;
`RecordBatcher.append_many` against the same records appended one by one to a second batcher
(same batches, same sizes, same refusals). Then the sync Producer against in-memory brokers
(fake_produce_cluster.py): keyed, keyless (sticky), explicit partitions, headers, a full
buffer.memory, bad records, and the future's failure count.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, Producer, partitioner
from samsa.client.config import ProducerConfig
from samsa.client.errors import KafkaError
from samsa.client.partitioner import (
    partition_for_key,
    partition_groups,
    partitions_for_keys,
)
from samsa.client.producer_batch import RECORD_OVERHEAD_BYTES
from samsa.client.record_batcher import AppendRefusal, RecordBatcher
from samsa.common.errors import ErrorCode, InvalidRecordError, RecordTooLargeError
from samsa.common.record import codec
from samsa.v1 import broker_pb2

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"


# --- the pure parts ---------------------------------------------------------------------------


@pytest.mark.parametrize("vectorised", [True, False])
def test_partitions_for_keys_match_the_one_key_partitioner(
    vectorised: bool, monkeypatch: pytest.MonkeyPatch
):
    if not vectorised:
        monkeypatch.setattr(partitioner, "numpy", None)
    draw = random.Random(7)
    fixed = [draw.randbytes(8) for _ in range(500)]
    mixed = [draw.randbytes(draw.randrange(0, 40)) for _ in range(2_000)]
    for keys in (fixed, mixed, [b""] * 20, [b"abc"] * 3):
        for count in (1, 4, 7, 1_000):
            assert partitions_for_keys(keys, count) == [partition_for_key(k, count) for k in keys]
    with pytest.raises(ValueError):
        partitions_for_keys(fixed, 0)


def test_partition_groups_keep_each_partitions_records_in_call_order():
    keys = [b"k%d" % n for n in range(40)]
    groups = partition_groups(keys, None, 4, ignore_keys=False)
    placed = {}
    for partition, indexes in groups:
        assert indexes == sorted(indexes)
        for index in indexes:
            placed[index] = partition
    assert placed == {n: partition_for_key(keys[n], 4) for n in range(40)}
    # Keyless, or keys ignored: the sticky partitioner places them all, while appending.
    assert partition_groups([None] * 5, None, 4, ignore_keys=False) == [(None, None)]
    assert partition_groups(keys, None, 4, ignore_keys=True) == [(None, None)]
    # One partition for all: no index list.
    assert partition_groups([b"same"] * 30, None, 4, ignore_keys=False) == [
        (partition_for_key(b"same", 4), None)
    ]
    # Mixed: explicit partitions win, then keys, and keyless runs split the call in order.
    mixed_keys = [b"a", None, None, b"b", b"c", None]
    partitions = [3, None, 2, None, None, None]
    groups = partition_groups(mixed_keys, partitions, 4, ignore_keys=False)
    flat = [(p, i) for p, indexes in groups for i in indexes]
    assert sorted(i for _, i in flat) == list(range(6))
    assert dict((i, p) for p, i in flat) == {
        0: 3,
        1: None,
        2: 2,
        3: partition_for_key(b"b", 4),
        4: partition_for_key(b"c", 4),
        5: None,
    }
    # Appended group after group, each partition's records (and the sticky ones) in call order.
    for partition in {p for p, _ in flat}:
        order = [i for p, i in flat if p == partition]
        assert order == sorted(order)
    assert [i for p, i in flat if p is None] == [1, 5]
    assert flat[0] == (3, 0)


def batcher(**settings: object) -> RecordBatcher:
    return RecordBatcher(
        ProducerConfig.from_dict(
            {
                "bootstrap.servers": "localhost:9092",
                **{key.replace("_", "."): value for key, value in settings.items()},
            }
        )
    )


def snapshot(records: RecordBatcher) -> list[tuple]:
    return [
        (b.batch_id, b.partition, b.values, b.keys, b.timestamps, b.headers, b.size_bytes, b.state)
        for b in records.unfinished.values()
    ]


@pytest.mark.parametrize("with_headers", [False, True])
def test_append_many_builds_the_batches_one_by_one_appends_build(with_headers: bool):
    draw = random.Random(3)
    values = [draw.randbytes(draw.randrange(0, 300)) for _ in range(400)]
    keys = [None if n % 5 == 0 else b"k%d" % n for n in range(400)]
    headers = [[("h", b"x" * (n % 4))] if n % 3 == 0 else None for n in range(400)]
    headers = headers if with_headers else None
    many, one = batcher(batch_size=2_000), batcher(batch_size=2_000)
    records = many.check_records(keys, values, headers, 5)
    appended = many.append_many("t", 0, records, 0, 5, 1)
    assert appended.next_index == 400 and appended.refusal is None and appended.wake
    for n in range(400):
        one.append("t", 0, keys[n], values[n], headers[n] if headers else None, 5, 1)
    assert snapshot(many) == snapshot(one)
    assert many.buffered_bytes == one.buffered_bytes
    # Segments cover every record once, in order, batch by batch.
    covered = [
        (batch_id, first + i) for batch_id, first, count in appended.segments for i in range(count)
    ]
    expected = [(b.batch_id, i) for b in one.unfinished.values() for i in range(len(b.values))]
    assert covered == expected
    many.check_invariants()


def test_append_many_stops_where_memory_runs_out_and_resumes_there():
    values = [b"v" * 100] * 50
    record_bytes = RECORD_OVERHEAD_BYTES + 100
    many = batcher(batch_size=1_000, buffer_memory=3_000)
    records = many.check_records(None, values, None, 0)
    appended = many.append_many("t", 0, records, 0, 0, 0)
    assert appended.refusal is AppendRefusal.BUFFER_FULL and many.memory_waiting
    assert 0 < appended.next_index < 50
    assert many.buffered_bytes <= 3_000 < many.buffered_bytes + record_bytes + 61
    for batch in list(many.unfinished.values()):  # completions free the memory
        many.queued.pop(("t", 0), None)
        many.partitions[("t", 0)].queue.clear()
        many.partitions[("t", 0)].open_batch = None
        many.release(batch)
    again = many.append_many("t", 0, records, appended.next_index, 0, 0)
    assert again.next_index > appended.next_index


def test_append_many_with_abort_on_new_batch_stops_at_the_batch_boundary():
    many = batcher(batch_size=1_000)
    records = many.check_records(None, [b"v" * 100] * 30, None, 0)
    first = many.append_many("t", 0, records, 0, 0, 0, abort_on_new_batch=True)
    assert first.next_index == 0 and first.refusal is AppendRefusal.NEW_BATCH_NEEDED
    many.append("t", 0, None, b"v" * 100, None, 0, 0)  # the driver opens it for one record
    second = many.append_many("t", 0, records, 1, 0, 0, abort_on_new_batch=True)
    assert second.refusal is AppendRefusal.NEW_BATCH_NEEDED
    assert len(many.unfinished) == 1 and second.next_index == len(
        next(iter(many.unfinished.values())).values
    )


def test_append_many_after_a_record_larger_than_batch_size_opens_a_new_batch():
    """An open batch holding one record larger than batch.size has no room (its room came out
    negative: the run ended before it began, its bytes were counted without its records, and
    the next bisect raised "lo must be non-negative")."""
    many = batcher(batch_size=1_000, buffer_memory=10_000)
    many.append("t", 0, None, b"x" * 1_500, None, 0, 0)  # a batch of its own, over batch.size
    records = many.check_records(None, [b"v" * 100] * 3, None, 0)
    appended = many.append_many("t", 0, records, 0, 0, 0)
    assert appended.next_index == 3 and appended.refusal is None
    assert [len(b.values) for b in many.unfinished.values()] == [1, 3]
    many.check_invariants()


def test_check_records_refuses_bad_records_before_any_is_appended():
    records = batcher(max_request_size=1_000, batch_size=1_000)
    with pytest.raises(InvalidRecordError):
        records.check_records(None, [b"ok", "text"], None, 0)  # type: ignore[list-item]
    with pytest.raises(InvalidRecordError):
        records.check_records([b"k"], [b"a", b"b"], None, 0)
    with pytest.raises(InvalidRecordError):
        records.check_records(None, [b"a"], [[("h", 3)]], 0)  # type: ignore[list-item]
    with pytest.raises(InvalidRecordError):
        records.check_records(None, [b"a"], None, -1)
    with pytest.raises(RecordTooLargeError):
        records.check_records(None, [b"a", b"b" * 2_000], None, 0)
    converted = records.check_records([bytearray(b"k")], [memoryview(b"v")], None, 0)
    assert converted.keys == [b"k"] and converted.values == [b"v"]
    assert not records.unfinished


# --- the Producer -----------------------------------------------------------------------------


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=4, brokers=2)
    fake.install(monkeypatch)
    return fake


def batches_of(cluster: FakeCluster, partition: int) -> list[codec.RecordBatch]:
    return [
        batch
        for broker in cluster.brokers.values()
        for topic, p, batch in broker.received
        if (topic, p) == (TOPIC, partition)
    ]


@pytest.mark.parametrize("linger_ms", [0, 5])
def test_keyed_records_land_where_send_puts_them_in_order(cluster: FakeCluster, linger_ms: int):
    values = [b"value-%05d" % n for n in range(20_000)]  # more than one chunk
    keys = [b"key-%d" % (n % 97) for n in range(20_000)]
    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": linger_ms}) as producer:
        future = producer.send_many(TOPIC, values, keys)
        assert future.result(timeout=WAIT_S) == 20_000
        assert future.exception(0) is None and future.failed_count(0) == 0 and future.done()
    for partition in range(4):
        expected = [
            v for v, k in zip(values, keys, strict=True) if partition_for_key(k, 4) == partition
        ]
        assert cluster.log(TOPIC, partition) == expected
        keys_seen = [k for b in batches_of(cluster, partition) for k in b.keys]
        assert all(partition_for_key(k, 4) == partition for k in keys_seen)


def test_keyless_records_fill_sticky_batches(cluster: FakeCluster):
    values = [b"v%05d" % n for n in range(3_000)]
    config = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000, "batch.size": 2_000}
    with Producer(config) as producer:
        future = producer.send_many(TOPIC, values)
        producer.flush(WAIT_S)
        assert future.result(0) == 3_000
    logs = [cluster.log(TOPIC, p) for p in range(4)]
    assert sorted(v for log in logs for v in log) == values
    for log in logs:
        assert log == sorted(log)  # in call order within each partition
    assert sum(1 for log in logs if log) > 1  # batches filled, partitions switched
    for partition in range(4):
        for batch in batches_of(cluster, partition)[:-1]:
            assert len(batch.values) > 50  # whole batches, not a record per partition


def test_explicit_partitions_headers_and_timestamp(cluster: FakeCluster):
    values = [b"v%d" % n for n in range(100)]
    partitions = [n % 4 if n % 2 else None for n in range(100)]
    keys = [b"k%d" % n for n in range(100)]
    headers = [[("n", b"%d" % n)] if n % 3 == 0 else None for n in range(100)]
    with Producer({"bootstrap.servers": BOOTSTRAP}) as producer:
        future = producer.send_many(TOPIC, values, keys, headers, partitions, timestamp=1234)
        future.result(WAIT_S)
    for n in range(100):
        partition = partitions[n] if partitions[n] is not None else partition_for_key(keys[n], 4)
        assert values[n] in cluster.log(TOPIC, partition)
    for partition in range(4):
        for batch in batches_of(cluster, partition):
            assert set(batch.timestamps()) == {1234}
            for value, pairs in zip(batch.values, batch.headers, strict=True):
                n = int(value[1:])
                assert list(pairs) == ([("n", b"%d" % n)] if n % 3 == 0 else [])


def test_a_full_buffer_makes_send_many_wait_for_completions(cluster: FakeCluster):
    values = [b"%04d" % n + b"x" * 200 for n in range(600)]  # ~35x buffer.memory in all
    config = {"bootstrap.servers": BOOTSTRAP, "buffer.memory": 4_000, "batch.size": 1_000}
    with Producer({**config, "linger.ms": 50}) as producer:
        future = producer.send_many(TOPIC, values, partitions=[0] * 600)
        assert future.result(WAIT_S) == 600
    assert cluster.log(TOPIC, 0) == values


def test_bad_records_and_partitions_raise_before_anything_is_queued(cluster: FakeCluster):
    # A partition beyond the known count is waited for up to max.block.ms (it may be new).
    with Producer({"bootstrap.servers": BOOTSTRAP, "max.block.ms": 200}) as producer:
        with pytest.raises(InvalidRecordError):
            producer.send_many(TOPIC, [b"a"] * 10_000 + [1])  # type: ignore[list-item]
        with pytest.raises(KafkaError) as error:
            producer.send_many(TOPIC, [b"a", b"b"], partitions=[0, 9])
        assert error.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # A partitions column of another length than the values (it dropped the records past
        # its end, the future counting only those queued, or raised an IndexError).
        with pytest.raises(InvalidRecordError, match="1 partitions for 3 values"):
            producer.send_many(TOPIC, [b"a", b"b", b"c"], partitions=[0])
        with pytest.raises(InvalidRecordError, match="3 partitions for 1 values"):
            producer.send_many(TOPIC, [b"a"], partitions=[0, 1, 2])
        assert producer.send_many(TOPIC, []).result(0) == 0
        producer.flush(WAIT_S)
    assert all(not cluster.log(TOPIC, p) for p in range(4))


def refuse_partition_1(cluster: FakeCluster) -> None:
    """Every broker answers INVALID_RECORD (not retriable) for partition 1, stores the rest."""

    def answer(topic, partition, batch):
        if partition != 1:
            return None
        return broker_pb2.ProduceResponse.PartitionResponse(
            error_code=ErrorCode.INVALID_RECORD, error_message="refused"
        )

    for broker in cluster.brokers.values():
        broker.answer_hook = answer


def test_the_future_counts_the_records_of_failed_batches(cluster: FakeCluster):
    refuse_partition_1(cluster)
    with Producer({"bootstrap.servers": BOOTSTRAP}) as producer:
        future = producer.send_many(TOPIC, [b"v"] * 40, partitions=[n % 4 for n in range(40)])
        producer.flush(WAIT_S)
        assert future.failed_count(0) == 10
        assert future.exception(0).code == ErrorCode.INVALID_RECORD
        with pytest.raises(KafkaError):
            future.result(0)


def test_failed_records_counts_every_record_that_failed_for_good(cluster: FakeCluster):
    """Kafka's record-error-total: what an application that keeps no future still learns."""

    refuse_partition_1(cluster)
    with Producer({"bootstrap.servers": BOOTSTRAP}) as producer:
        for n in range(12):
            producer.send(TOPIC, b"v", partition=n % 4)
        producer.flush(WAIT_S)
        assert producer.failed_records == 3
        producer.send_many(TOPIC, [b"v"] * 40, partitions=[n % 4 for n in range(40)])
        producer.flush(WAIT_S)
        assert producer.failed_records == 13
    assert len(cluster.log(TOPIC, 0)) == 13, "the other partitions' records were written"

    async def send_async() -> int:
        async with AsyncProducer({"bootstrap.servers": BOOTSTRAP}) as producer:
            for n in range(8):
                await producer.send(TOPIC, b"v", partition=n % 4)
            await producer.flush(WAIT_S)
        return producer.failed_records

    assert asyncio.run(send_async()) == 2
