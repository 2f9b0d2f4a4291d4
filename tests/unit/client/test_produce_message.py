"""Goal: the hand-serialized ProduceStream message (produce_message.py) is exactly what the
generated classes would send — the same bytes as their SerializeToString, parsing back to the
same message — for every field the SDK sets, including the defaults protobuf leaves out, acks 0
and -1 (an `optional` field and a negative varint), several topics, partitions and batches.

Method: build the same request both ways and compare bytes and parsed messages.
"""

from __future__ import annotations

import pytest

from samsa.client.produce_message import produce_request, produce_stream_message
from samsa.common.protobuf_wire import varint
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2


def reference(
    correlation_id: int,
    acks: int,
    timeout_ms: int,
    by_partition: dict[tuple[str, int], list[bytes]],
    transactional_id: str = "",
    add_partitions_to_txn: bool = False,
    traceparent: str = "",
) -> broker_pb2.ProduceStreamRequest:
    by_topic: dict[str, list[broker_pb2.ProduceRequest.PartitionData]] = {}
    for (topic, partition), batches in by_partition.items():
        by_topic.setdefault(topic, []).append(
            broker_pb2.ProduceRequest.PartitionData(partition=partition, records=b"".join(batches))
        )
    request = broker_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        transactional_id=transactional_id,
        add_partitions_to_txn=add_partitions_to_txn,
        topics=[
            broker_pb2.ProduceRequest.TopicData(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ],
    )
    return broker_pb2.ProduceStreamRequest(
        correlation_id=correlation_id, request=request, traceparent=traceparent
    )


BATCH_A = build_batch([b"a", b"bb"])
BATCH_B = build_batch([b"x" * 300], keys=[b"k"])
BIG = build_batch([b"v" * 1000] * 200)  # lengths that need 3-byte varints


@pytest.mark.parametrize(
    ("correlation_id", "acks", "timeout_ms", "by_partition", "extra"),
    [
        (0, 1, 30_000, {("t", 0): [BATCH_A]}, {}),
        (1, -1, 0, {("t", 3): [BATCH_A, BATCH_B]}, {}),
        (2**40, 0, 5, {("t", 0): [BATCH_A], ("t", 1): [BATCH_B], ("ü", 7): [BIG]}, {}),
        (
            7,
            -1,
            120_000,
            {("orders", 2): [BIG, BATCH_A]},
            {
                "transactional_id": "tx-1",
                "add_partitions_to_txn": True,
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            },
        ),
    ],
)
def test_the_message_is_what_the_generated_classes_serialize(
    correlation_id: int,
    acks: int,
    timeout_ms: int,
    by_partition: dict[tuple[str, int], list[bytes]],
    extra: dict,
) -> None:
    traceparent = extra.pop("traceparent", "")
    request = produce_request(acks, timeout_ms, by_partition, **extra)
    message = produce_stream_message(correlation_id, request, traceparent)
    expected = reference(
        correlation_id, acks, timeout_ms, by_partition, traceparent=traceparent, **extra
    )
    assert message == expected.SerializeToString()
    parsed = broker_pb2.ProduceStreamRequest.FromString(message)
    assert parsed == expected
    assert parsed.request.HasField("acks"), "acks is optional: 0 must be on the wire"


def test_varints_match_protobuf() -> None:
    for value in (0, 1, 127, 128, 300, 2**31 - 1, -1, -(2**31)):  # int32, as acks
        assert varint(value) == broker_pb2.ProduceRequest(acks=value).SerializeToString()[1:]
    for value in (1, 2**40, 2**64 - 1):  # uint64, as the correlation id
        encoded = broker_pb2.ProduceStreamRequest(correlation_id=value).SerializeToString()
        assert varint(value) == encoded[1:]
