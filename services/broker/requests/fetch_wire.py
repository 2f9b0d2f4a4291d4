"""A fetch answer with its records beside it, and its serialization with them spliced in.

`fetch.fetch_answer` returns the FetchResponse without the partitions' `records` and the stored
bytes read for each partition beside it (`FetchAnswer`). The stream handlers (FetchStream,
ReplicaFetchStream) send `stream_message(answer)`: the stream message serialized by hand, each
partition's bytes spliced in as its `records` field, in one join. Put into the message object
instead, a partition's bytes were copied into it, again into the stream message that wraps it
(protobuf copies a sub-message it is given), and again when serialized; with several MiB per
answer, and fresh buffers costing page faults on top of the copy, that was most of what a broker
spent per record it sent (~4.5 us per 1 KiB record fetched). The unary Fetch and the tests take
`with_records(answer)`, the FetchResponse whole. Unary Fetch sends `response_bytes(answer)`.

The layout is protobuf's wire format (common/protobuf_wire.py): a message may hold its fields in
any order, so each PartitionResponse is its other fields, serialized by protobuf, followed by
field 8 (`records`); each TopicResponse its name, then its partitions; the FetchResponse its
other fields, then its topics; the stream message (FetchStreamResponse and
ReplicaFetchStreamResponse alike) field 1 holding it; unary Fetch sends the FetchResponse
itself (`response_bytes`). tests/unit/broker/test_fetch_wire.py
checks that it parses back to the same message. Pure: no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from samsa.common.protobuf_wire import LENGTH_DELIMITED, tag, varint
from samsa.v1 import broker_pb2

_STREAM_RESPONSE = tag(1, LENGTH_DELIMITED)  # {Replica,}FetchStreamResponse.response
_TOPICS = tag(2, LENGTH_DELIMITED)  # FetchResponse.topics
_PARTITIONS = tag(2, LENGTH_DELIMITED)  # TopicResponse.partitions
_RECORDS = tag(8, LENGTH_DELIMITED)  # PartitionResponse.records


class FetchAnswer(NamedTuple):
    """A FetchResponse without its partitions' records, and those records by (topic,
    partition): each is the `records` of the partition of that name in `response`; and the
    bytes it holds of the broker's answer budget (answer_budget.py), which whoever writes the
    answer releases once it is written."""

    response: broker_pb2.FetchResponse
    records: dict[tuple[str, int], bytes]
    held_bytes: int = 0


def with_records(answer: FetchAnswer) -> broker_pb2.FetchResponse:
    """The answer's FetchResponse with the records put into it (for unary Fetch and tests)."""
    records = answer.records
    if records:
        for topic in answer.response.topics:
            for result in topic.partitions:
                data = records.get((topic.name, result.partition))
                if data is not None:
                    result.records = data
    return answer.response


def stream_message(answer: FetchAnswer) -> bytes:
    """The serialized stream message carrying the answer, records spliced in. Consumes
    `answer.response` (its topics are cleared on the way)."""
    parts, size = _response_parts(answer)
    return b"".join([_STREAM_RESPONSE, varint(size), *parts])


def response_bytes(answer: FetchAnswer) -> bytes:
    """The serialized FetchResponse, records spliced in (unary Fetch). Consumes
    `answer.response`."""
    parts, _ = _response_parts(answer)
    return b"".join(parts)


def _response_parts(answer: FetchAnswer) -> tuple[list[bytes], int]:
    """The FetchResponse's serialization in pieces (the records among them, uncopied), and
    its size."""
    response, records = answer.response, answer.records
    topic_parts: list[bytes] = []
    for topic in response.topics:
        parts: list[bytes] = []
        for result in topic.partitions:
            fields = result.SerializeToString()
            data = records.get((topic.name, result.partition))
            if data:
                length = varint(len(data))
                size = len(fields) + len(_RECORDS) + len(length) + len(data)
                parts += (_PARTITIONS, varint(size), fields, _RECORDS, length, data)
            else:
                parts += (_PARTITIONS, varint(len(fields)), fields)
        topic.ClearField("partitions")
        name = topic.SerializeToString()
        topic_parts += (_TOPICS, varint(len(name) + sum(map(len, parts))), name)
        topic_parts += parts
    response.ClearField("topics")
    parts = [response.SerializeToString(), *topic_parts]
    return parts, sum(map(len, parts))
