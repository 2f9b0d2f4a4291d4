"""Goal: a fetch answer serialized with its records spliced in (fetch_wire.py) is the same
message the generated classes would send — for FetchStream and ReplicaFetchStream alike, with
several topics and partitions, partitions with and without records, errors, aborted
transactions, a diverging epoch, a session id and large records — and `with_records` puts the
same records into the FetchResponse itself.

Method: build each answer twice, once with the records inside the message (the reference) and
once beside it, and compare what parses back.
"""

from __future__ import annotations

from samsa.common.record.codec import build_batch
from samsa.services.broker.requests.fetch_wire import (
    FetchAnswer,
    response_bytes,
    stream_message,
    with_records,
)
from samsa.v1 import broker_pb2 as b

Response = b.FetchResponse
Partition = Response.PartitionResponse

RECORDS = {
    ("orders", 0): build_batch([b"a", b"bb"]),
    ("orders", 3): build_batch([b"x" * 1000] * 300),  # lengths that need 3-byte varints
    ("ü", 1): build_batch([b"z"], keys=[b"k"]),
}


def answer_without_records() -> Response:
    return Response(
        session_id=42,
        throttle_time_ms=0,
        topics=[
            Response.TopicResponse(
                name="orders",
                partitions=[
                    Partition(partition=0, high_watermark=2, next_fetch_offset=2),
                    Partition(partition=1, error_code=6, error_message="not the leader"),
                    Partition(
                        partition=3,
                        high_watermark=900,
                        last_stable_offset=800,
                        aborted_transactions=[
                            Response.AbortedTransaction(producer_id=7, first_offset=5)
                        ],
                    ),
                ],
            ),
            Response.TopicResponse(
                name="ü",
                partitions=[
                    Partition(partition=1, high_watermark=1),
                    Partition(
                        partition=2,
                        diverging_epoch=Response.EpochEndOffset(leader_epoch=3, end_offset=10),
                    ),
                ],
            ),
            Response.TopicResponse(name="empty"),
        ],
    )


def reference() -> Response:
    response = answer_without_records()
    for topic in response.topics:
        for partition in topic.partitions:
            data = RECORDS.get((topic.name, partition.partition))
            if data is not None:
                partition.records = data
    return response


def test_the_spliced_stream_message_parses_to_the_answer_with_its_records() -> None:
    expected = reference()
    for stream_type in (b.FetchStreamResponse, b.ReplicaFetchStreamResponse):
        message = stream_message(FetchAnswer(answer_without_records(), dict(RECORDS)))
        assert stream_type.FromString(message) == stream_type(response=expected)


def test_the_unary_answer_parses_to_the_response_with_its_records() -> None:
    message = response_bytes(FetchAnswer(answer_without_records(), dict(RECORDS)))
    assert Response.FromString(message) == reference()


def test_an_answer_without_records_or_topics_is_protobufs_own_bytes() -> None:
    for response in (Response(), Response(session_id=9, error_code=72, error_message="gone")):
        copy = Response()
        copy.CopyFrom(response)
        message = stream_message(FetchAnswer(copy, {}))
        assert message == b.FetchStreamResponse(response=response).SerializeToString()


def test_with_records_puts_the_records_into_the_response() -> None:
    assert with_records(FetchAnswer(answer_without_records(), dict(RECORDS))) == reference()
