"""ListOffsets: the earliest, latest (high watermark) or first-at-a-time offset of partitions."""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.services.broker.partition_host import LeadershipError, PartitionHost
from samsa.v1 import broker_pb2


def list_offsets(
    host: PartitionHost, request: broker_pb2.ListOffsetsRequest
) -> broker_pb2.ListOffsetsResponse:
    response = broker_pb2.ListOffsetsResponse()
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        for wanted in topic.partitions:
            result = topic_response.partitions.add(
                partition=wanted.partition, offset=-1, timestamp_ms=-1
            )
            hosted = host.leader(topic.name, wanted.partition)
            if isinstance(hosted, LeadershipError):
                result.error_code = hosted.code  # type: ignore[assignment]
                result.error_message = hosted.message
                continue
            result.leader_epoch = hosted.leader_epoch
            spec = wanted.offset_spec
            if spec == broker_pb2.OFFSET_SPEC_EARLIEST:
                result.offset = hosted.log.log_start_offset
            elif spec == broker_pb2.OFFSET_SPEC_LATEST:
                result.offset = hosted.high_watermark
            elif spec == broker_pb2.OFFSET_SPEC_TIMESTAMP:
                found = hosted.log.offset_for_timestamp(wanted.timestamp_ms)
                if found is not None and found[0] < hosted.high_watermark:
                    result.offset, result.timestamp_ms = found
            else:
                result.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
                result.error_message = "offset_spec must be EARLIEST, LATEST or TIMESTAMP"
    return response
