"""Goal: the portable produce path (typed_records, for clients without a batch codec) is idempotent
when the request names its producer (PartitionData.producer_id, producer_epoch, base_sequence):
a replayed request — what a client sends after losing the answer — stores nothing and answers
the first write's offsets, a gap or a stale epoch is refused before a byte is written, and the
fields are refused unless all three are set, in range, and with typed_records.

Method: the real produce handler against real logs in a temp dir (one broker's partitions from a
metadata image), reading back with Fetch; every refusal checks that the log did not grow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.record import header
from samsa.common.record.codec import build_batch, decode_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import read_once
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2 as b
from samsa.v1 import records_pb2

PRODUCER_ID, EPOCH = 4001, 3


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    image = single_broker_image({"t": (b"\x07" * 16, led_partitions(1, 1, 0))})
    with hosting(tmp_path, image) as hosted:
        yield hosted


def typed(*values: bytes) -> list[records_pb2.Record]:
    return [records_pb2.Record(value=value, timestamp_ms=7) for value in values]


def send(host: PartitionHost, records=(), raw: bytes = b"", **producer) -> tuple[int, int, str]:
    """(error code, base offset, error message) of one partition's produce."""
    data = b.ProduceRequest.PartitionData(
        partition=0, typed_records=records, records=raw, **producer
    )
    request = b.ProduceRequest(
        acks=1, topics=[b.ProduceRequest.TopicData(name="t", partitions=[data])]
    )
    answer, _ = produce(host, request, 1_700_000_000_000)
    result = answer.topics[0].partitions[0]
    return result.error_code, result.base_offset, result.error_message


def producer(sequence: int, epoch: int = EPOCH) -> dict[str, int]:
    return {"producer_id": PRODUCER_ID, "producer_epoch": epoch, "base_sequence": sequence}


def stored(host: PartitionHost) -> list[tuple[int, bytes, int, int, int]]:
    """(offset, value, producer id, epoch, base sequence of its batch) of every stored record."""
    response, _, _ = read_once(
        host,
        b.FetchRequest(
            topics=[
                b.FetchRequest.TopicData(
                    name="t", partitions=[b.FetchRequest.PartitionData(partition=0)]
                )
            ]
        ),
    )
    data = response.topics[0].partitions[0].records
    rows, position = [], 0
    while position < len(data):
        batch = header.read_header(data, position)
        decoded = decode_batch(data, position)
        for delta, value in enumerate(decoded.values):
            rows.append(
                (
                    batch.base_offset + delta,
                    value,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                )
            )
        position += batch.batch_length + header.LOG_OVERHEAD
    return rows


def test_a_replayed_request_stores_nothing_and_answers_the_first_writes_offsets(host):
    assert send(host, typed(b"a", b"b", b"c"), **producer(0))[:2] == (ErrorCode.NONE, 0)
    assert send(host, typed(b"a", b"b", b"c"), **producer(0))[:2] == (ErrorCode.NONE, 0)
    assert send(host, typed(b"d"), **producer(3))[:2] == (ErrorCode.NONE, 3)
    assert stored(host) == [
        (0, b"a", PRODUCER_ID, EPOCH, 0),
        (1, b"b", PRODUCER_ID, EPOCH, 0),
        (2, b"c", PRODUCER_ID, EPOCH, 0),
        (3, b"d", PRODUCER_ID, EPOCH, 3),
    ]


def test_the_same_replay_without_the_producer_fields_is_stored_twice(host):
    """The contrast: what the fields prevent."""
    send(host, typed(b"a"))
    send(host, typed(b"a"))
    assert [(offset, value) for offset, value, *_ in stored(host)] == [(0, b"a"), (1, b"a")]


def test_a_sequence_gap_and_a_stale_epoch_are_refused_before_anything_is_written(host):
    send(host, typed(b"a"), **producer(0))
    code, _, message = send(host, typed(b"x"), **producer(5))
    assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and message
    assert send(host, typed(b"b"), **producer(0, epoch=EPOCH + 1))[0] == ErrorCode.NONE
    code, _, message = send(host, typed(b"y"), **producer(1, epoch=EPOCH))
    assert code == ErrorCode.INVALID_PRODUCER_EPOCH and message
    assert [value for _, value, *_ in stored(host)] == [b"a", b"b"]


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"producer_id": PRODUCER_ID, "producer_epoch": EPOCH}, "together"),
        ({"base_sequence": 0}, "together"),
        ({"producer_id": -2, "producer_epoch": EPOCH, "base_sequence": 0}, "InitProducerId"),
        ({"producer_id": PRODUCER_ID, "producer_epoch": 40000, "base_sequence": 0}, "0..32767"),
        ({"producer_id": PRODUCER_ID, "producer_epoch": EPOCH, "base_sequence": -1}, "negative"),
    ],
)
def test_incomplete_or_out_of_range_producer_fields_are_refused(host, fields, says):
    code, _, message = send(host, typed(b"a"), **fields)
    assert code == ErrorCode.INVALID_REQUEST and says in message
    assert stored(host) == []


def test_producer_fields_beside_a_raw_batch_are_refused(host):
    code, _, message = send(host, raw=build_batch([b"a"]), **producer(0))
    assert code == ErrorCode.INVALID_REQUEST and "own header" in message
    assert stored(host) == []
