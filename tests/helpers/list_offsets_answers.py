"""A broker's ListOffsets answer made up by a test's fake broker: every partition the request
names, answered alike (the client tests of the consumer driver and of the request limit)."""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2


def list_offsets_answer(
    request: broker_pb2.ListOffsetsRequest, offset: int, error_code: int = ErrorCode.NONE
) -> broker_pb2.ListOffsetsResponse:
    """Each partition of `request` answered `offset` with `error_code`."""
    return broker_pb2.ListOffsetsResponse(
        topics=[
            broker_pb2.ListOffsetsResponse.TopicResponse(
                name=topic.name,
                partitions=[
                    broker_pb2.ListOffsetsResponse.PartitionResponse(
                        partition=p.partition,
                        offset=offset,
                        error_code=error_code,  # type: ignore[arg-type]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )
