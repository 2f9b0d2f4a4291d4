"""Goal: end to end through the producer driver, a broker whose byte limit is below the batches
the producer builds gets every record, in order, exactly once: MESSAGE_TOO_LARGE splits the
batch (accumulator side: test_client_accumulator_split.py) instead of failing all its records,
each record's future gives its own offset, and the sequences the broker sees stay gap-free. A
record the broker can never take fails alone, with its size and what to raise.

Method: both facades (idempotent, the default) against the in-memory brokers
(fake_produce_cluster.py) with `max_batch_bytes` set (a topic's max.message.bytes): the fake
refuses a larger batch with MESSAGE_TOO_LARGE and appends nothing, and answers a repeat of its
last sequenced batch with the first write's offset.
"""

from __future__ import annotations

import asyncio

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, KafkaError, Producer
from samsa.common.errors import ErrorCode

TOPIC = "events"
WAIT_S = 10
# linger.ms: everything sent before the flush goes in one batch of batch.size.
SETTINGS = {"bootstrap.servers": "fake:9092", "linger.ms": 60_000, "batch.size": 16_384}
LIMIT_BYTES = 1_000  # ~7 of the 100-byte records below
VALUES = [b"%03d" % n + b"v" * 97 for n in range(40)]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=1)
    fake.install(monkeypatch)
    fake.brokers[1].max_batch_bytes = LIMIT_BYTES
    return fake


def written_sequences(cluster: FakeCluster) -> list[tuple[int, int, int]]:
    """(epoch, base sequence, records) of each batch the broker appended, in order."""
    return [
        (b.header.producer_epoch, b.header.base_sequence, b.header.record_count)
        for _, _, b in cluster.brokers[1].received
        if b.header.size_bytes <= LIMIT_BYTES
    ]


def assert_gap_free(sequences: list[tuple[int, int, int]]) -> None:
    """Each epoch's sequences run from 0 without a gap; epochs only grow."""
    expected: dict[int, int] = {}
    for epoch, base_sequence, count in sequences:
        assert epoch >= max(expected, default=0)
        assert base_sequence == expected.get(epoch, 0)
        expected[epoch] = base_sequence + count


def test_a_batch_too_large_for_the_broker_is_split_and_every_record_lands_once(
    cluster: FakeCluster,
):
    with Producer(SETTINGS) as producer:
        futures = [producer.send(TOPIC, value, partition=0) for value in VALUES]
        producer.flush(timeout=WAIT_S)
        offsets = [future.result(timeout=0).offset for future in futures]
        assert producer.batch_splits >= 1
    assert offsets == list(range(len(VALUES)))
    assert cluster.log(TOPIC, 0) == VALUES
    assert_gap_free(written_sequences(cluster))
    assert sum(count for _, _, count in written_sequences(cluster)) == len(VALUES)


def test_send_many_counts_no_failure_for_a_split_batch(cluster: FakeCluster):
    with Producer(SETTINGS) as producer:
        future = producer.send_many(TOPIC, VALUES, partitions=[0] * len(VALUES))
        producer.flush(timeout=WAIT_S)
        assert future.result(timeout=0) == len(VALUES) and future.failed_count() == 0
    assert cluster.log(TOPIC, 0) == VALUES


def test_a_record_the_broker_never_takes_fails_alone_with_its_size(cluster: FakeCluster):
    huge = b"h" * 2 * LIMIT_BYTES
    values = [*VALUES[:10], huge, *VALUES[10:20]]
    with Producer(SETTINGS) as producer:
        futures = [producer.send(TOPIC, value, partition=0) for value in values]
        many = producer.send_many(TOPIC, [huge, VALUES[20]], partitions=[0, 0])
        producer.flush(timeout=WAIT_S)
        errors = [future.exception(timeout=0) for future in futures]
        assert producer.failed_records == 2
    failed = errors.pop(10)
    assert errors == [None] * 20
    assert failed is not None and failed.code == ErrorCode.MESSAGE_TOO_LARGE
    size = len(huge) + 61 + 24  # the batch header, then the record's arrays
    assert f"the record is {size} bytes in a batch of its own" in str(failed)
    assert "max.request.size (1048576)" in str(failed) and "max.message.bytes" in str(failed)
    assert many.failed_count() == 1
    with pytest.raises(KafkaError) as first_failure:
        many.result()
    assert first_failure.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert cluster.log(TOPIC, 0) == VALUES[:21]  # in order, once each
    # The refused record's sequence was never written: the rest went on in a new epoch.
    sequences = written_sequences(cluster)
    assert_gap_free(sequences)
    assert {epoch for epoch, _, _ in sequences} == {0, 1, 2}


def test_async_producer_awaits_each_piece_of_a_split_batch(cluster: FakeCluster):
    async def main() -> list[int]:
        async with AsyncProducer(SETTINGS) as producer:
            futures = [await producer.send(TOPIC, value, partition=0) for value in VALUES]
            await producer.flush(timeout=WAIT_S)
            return [(await future).offset for future in futures]

    assert asyncio.run(main()) == list(range(len(VALUES)))
    assert cluster.log(TOPIC, 0) == VALUES
