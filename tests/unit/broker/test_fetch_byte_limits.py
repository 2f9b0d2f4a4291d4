"""Goal: a Fetch answer holds at most `max_bytes` of batches, except its very first batch (KIP-74,
as broker.proto documents max_bytes): a client keeps max_bytes below its receive limit, and an
answer past that limit fails to arrive, again on every retry of the same fetch.

Method: real logs in a temp dir, one batch of ~1 KiB in each of two partitions, fetched with a
max_bytes that holds one of them; sessionless and in a fetch session (the two passes of fetch.py).
With decode_records, the records count as they decode (a zstd batch of a few hundred bytes may
decode to megabytes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.common.record.header import COMPRESSION_ZSTD
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2

TOPIC_ID = b"\x0b" * 16


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    with hosting(tmp_path, single_broker_image({"t": (TOPIC_ID, led_partitions(2))})) as hosted:
        yield hosted


def append(host: PartitionHost, partition: int, batch: bytes) -> None:
    data = broker_pb2.ProduceRequest.PartitionData(partition=partition, records=batch)
    topic = broker_pb2.ProduceRequest.TopicData(name="t", partitions=[data])
    answer, _ = produce(host, broker_pb2.ProduceRequest(acks=1, topics=[topic]), 5)
    assert answer.topics[0].partitions[0].error_code == 0


def fetch_both(max_bytes: int, *, in_session: bool) -> broker_pb2.FetchRequest:
    partitions = [
        broker_pb2.FetchRequest.PartitionData(partition=p, fetch_offset=0) for p in (0, 1)
    ]
    request = broker_pb2.FetchRequest(
        max_bytes=max_bytes,
        topics=[broker_pb2.FetchRequest.TopicData(name="t", partitions=partitions)],
    )
    if in_session:
        request.session_id, request.session_epoch = 0, 0
    return request


@pytest.mark.parametrize("in_session", [False, True], ids=["sessionless", "in-session"])
def test_only_the_first_batch_of_an_answer_may_exceed_max_bytes(host, in_session):
    batch = build_batch([b"x" * 1000])
    append(host, 0, batch)
    append(host, 1, batch)
    max_bytes = len(batch) + len(batch) // 2  # room for one batch, not two
    sessions = FetchSessionCache() if in_session else None
    response = asyncio.run(fetch(host, fetch_both(max_bytes, in_session=in_session), sessions))
    sizes = {p.partition: len(p.records) for t in response.topics for p in t.partitions}
    assert sum(sizes.values()) <= max_bytes, f"{sizes} holds more than max_bytes={max_bytes}"
    assert sizes[0] == len(batch), "the first partition's batch is in the answer"

    # The batch left out comes in the next fetch: nothing is lost by leaving it out.
    if in_session:
        follow_up = broker_pb2.FetchRequest(
            max_bytes=max_bytes, session_id=response.session_id, session_epoch=1
        )
        partition = broker_pb2.FetchRequest.PartitionData(partition=0, fetch_offset=1)
        follow_up.topics.add(name="t").partitions.append(partition)
    else:
        follow_up = fetch_both(max_bytes, in_session=False)
        follow_up.topics[0].partitions[0].fetch_offset = 1
    response = asyncio.run(fetch(host, follow_up, sessions))
    sizes = {p.partition: len(p.records) for t in response.topics for p in t.partitions}
    assert sizes.get(1) == len(batch)


def test_a_partition_after_the_first_still_gets_a_batch_larger_than_its_own_limit(host):
    """partition_max_bytes stays soft past the first partition: a fetch without a session
    reads its partitions in the order it names them, and a strict limit would keep a partition
    whose batch is larger behind a busy one for ever. max_bytes holds."""
    batch = build_batch([b"x" * 1000])
    append(host, 0, batch)
    append(host, 1, batch)
    request = fetch_both(10 * len(batch), in_session=False)
    for wanted in request.topics[0].partitions:
        wanted.partition_max_bytes = 10
    response = asyncio.run(fetch(host, request))
    assert [len(p.records) for p in response.topics[0].partitions] == [len(batch)] * 2


def test_a_partition_left_out_goes_first_next_time_behind_a_busy_one(host):
    """Partition 0 gets a batch before every fetch and is named in each (its position moved);
    partition 1's one batch never fits behind it. Read in the order named-then-changed it was
    left out of every answer for as long as partition 0 stayed busy: a partition left out of
    an answer is read first in the session's next one (Kafka rotates its partitions too)."""
    batch = build_batch([b"x" * 1000])
    append(host, 0, batch)
    append(host, 1, batch)
    max_bytes = len(batch) + len(batch) // 2
    sessions = FetchSessionCache()
    request = fetch_both(max_bytes, in_session=True)
    positions = {0: 0, 1: 0}
    delivered: list[set[int]] = []
    for epoch in range(1, 5):
        response = asyncio.run(fetch(host, request, sessions))
        assert response.error_code == 0
        got = {p.partition for t in response.topics for p in t.partitions if p.records}
        delivered.append(got)
        request = broker_pb2.FetchRequest(
            max_bytes=max_bytes, session_id=response.session_id, session_epoch=epoch
        )
        for t in response.topics:
            for p in t.partitions:
                if p.records:
                    positions[p.partition] = p.next_fetch_offset
                    wanted = broker_pb2.FetchRequest.PartitionData(
                        partition=p.partition, fetch_offset=p.next_fetch_offset
                    )
                    request.topics.add(name="t").partitions.append(wanted)
        append(host, 0, batch)  # partition 0 stays busy
    assert any(1 in got for got in delivered), f"partition 1 was never delivered: {delivered}"
    assert positions[1] == 1


# A zstd batch of a few hundred stored bytes whose one record decodes to 1 MiB.
INFLATING = build_batch([bytes(1024 * 1024)], compression=COMPRESSION_ZSTD)


def decoded_fetch(max_bytes: int, offsets: dict[int, int]) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(max_bytes=max_bytes, decode_records=True)
    for partition, offset in offsets.items():
        request.topics.add(name="t").partitions.add(partition=partition, fetch_offset=offset)
    return request


def test_decoded_answers_count_the_bytes_records_decode_to(host):
    """decode_records answers counted stored bytes: eight batches of a few hundred bytes each
    came back as 8 MiB of records for max_bytes=64 KiB (and, with max_bytes at its 64 MiB
    limit, as many as ~190,000 such batches inflated at once on the broker). The decoded
    records count: the first batch whole (KIP-74), the rest within max_bytes, and a later
    partition's first batch waits for a later fetch when it does not fit."""
    assert len(INFLATING) < 1024
    for _ in range(8):
        append(host, 0, INFLATING)
    append(host, 1, INFLATING)
    response = asyncio.run(fetch(host, decoded_fetch(64 * 1024, {0: 0, 1: 0})))
    first, second = response.topics[0].partitions[0], response.topics[1].partitions[0]
    assert [len(r.value) for r in first.decoded_records] == [1024 * 1024]
    assert first.next_fetch_offset == 1  # the next fetch goes on from the batch left out
    assert (second.error_code, len(second.decoded_records)) == (0, 0)
    assert response.ByteSize() < 1024 * 1024 + 64 * 1024

    response = asyncio.run(fetch(host, decoded_fetch(64 * 1024, {0: 1})))
    assert [r.offset for r in response.topics[0].partitions[0].decoded_records] == [1]


def test_a_batch_decoding_past_what_an_answer_carries_is_refused(host, monkeypatch):
    """A first batch whose records decode to more than fetch_response_bytes_max could not be
    sent (the answer outgrows the gRPC message limit) on any retry: it is refused with
    MESSAGE_TOO_LARGE, naming its offset, so the reader can seek past it."""
    monkeypatch.setattr(limits, "fetch_response_bytes_max", 512 * 1024)
    append(host, 0, INFLATING)
    response = asyncio.run(fetch(host, decoded_fetch(64 * 1024, {0: 0})))
    result = response.topics[0].partitions[0]
    assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert "offset 0 decodes to" in result.error_message
    assert len(result.decoded_records) == 0
