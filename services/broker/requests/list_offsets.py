"""ListOffsets: the earliest, latest, first-at-a-time or newest-record offset of partitions.

"Latest" is the high watermark, or the last stable offset under read_committed (Kafka's rule):
a read_committed consumer that resets to the end starts where it can read, and its lag counts
only what it may see. The timestamp lookups are bounded the same way: MAX_TIMESTAMP (KIP-734,
as Kafka answers it since KAFKA-16310) is the record with the largest timestamp, the first of
equals, among those from the log start up to that end, transaction markers aside; none
visible answers offset and timestamp -1 with no error. A search that needs records whose bytes
are corrupt at rest (a segment's unframed tail, local_log.py) answers KAFKA_STORAGE_ERROR, as a
fetch of them does, never an offset past them. Each answer carries the leader epoch of
the batch holding the offset found (KIP-320), as Kafka's; a request naming an older or newer
current leader epoch than the leader's is refused (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
A leader just elected whose high watermark has not yet reached the start of its epoch answers
every spec but EARLIEST with OFFSET_NOT_AVAILABLE (retriable): its high watermark is still the
one it had as a follower, and an end read from it could go backwards (a streaming reader would
take that for truncated data). Kafka's does so for LATEST and the like; for a TIMESTAMP whose
record lies below that high watermark it answers, where this one asks the client to retry.
A topic named with its id (KIP-516), as Produce and Fetch name it, is answered only by a
partition hosted under that id, else UNKNOWN_TOPIC_ID (PartitionHost.leader): a broker behind on
metadata, still hosting a deleted topic of the same name, does not hand the old log's offsets to
a client of the re-created topic."""

from __future__ import annotations

from samsa.common.errors import ErrorCode, SamsaError
from samsa.services.broker.hosted_partition import HostedPartition, LeadershipError
from samsa.services.broker.log.leader_epoch import epoch_of
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.partition_read import leader_epoch_refusal
from samsa.v1 import broker_pb2, records_pb2


def list_offsets(
    host: PartitionHost, request: broker_pb2.ListOffsetsRequest
) -> broker_pb2.ListOffsetsResponse:
    response = broker_pb2.ListOffsetsResponse()
    read_committed = request.isolation_level == records_pb2.ISOLATION_LEVEL_READ_COMMITTED
    # A follower (its broker id as replica_id) is answered from the log end, as Kafka's
    # ListOffsets answers a replica: it reads beyond the high watermark anyway.
    from_replica = request.HasField("replica_id") and request.replica_id >= 0
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        for wanted in topic.partitions:
            result = topic_response.partitions.add(
                partition=wanted.partition, offset=-1, timestamp_ms=-1, leader_epoch=-1
            )
            hosted = host.leader(topic.name, wanted.partition, topic.topic_id)
            if isinstance(hosted, LeadershipError):
                result.error_code = hosted.code  # type: ignore[assignment]
                result.error_message = hosted.message
                continue
            refusal = leader_epoch_refusal(wanted, hosted.leader_epoch)
            if refusal is not None:
                result.error_code, result.error_message = refusal  # type: ignore[assignment]
                continue
            spec = wanted.offset_spec
            caught_up = from_replica or hosted.high_watermark_caught_up
            if spec != broker_pb2.OFFSET_SPEC_EARLIEST and not caught_up:
                result.error_code = ErrorCode.OFFSET_NOT_AVAILABLE  # type: ignore[assignment]
                result.error_message = (
                    f"{topic.name}-{wanted.partition}: this leader was just elected and its high "
                    f"watermark ({hosted.high_watermark}) has not yet reached the start of its "
                    f"leader epoch ({hosted.replica.epoch_start_offset}); retry"
                )
                continue
            visible_end = hosted.log.log_end_offset if from_replica else hosted.high_watermark
            if read_committed:
                visible_end = hosted.log.last_stable_offset(visible_end)
            if spec == broker_pb2.OFFSET_SPEC_EARLIEST:
                result.offset = hosted.log.log_start_offset
            elif spec == broker_pb2.OFFSET_SPEC_LATEST:
                result.offset = visible_end
            elif spec in (broker_pb2.OFFSET_SPEC_TIMESTAMP, broker_pb2.OFFSET_SPEC_MAX_TIMESTAMP):
                try:
                    found = _timestamp_lookup(hosted, spec, wanted.timestamp_ms, visible_end)
                except SamsaError as error:  # records corrupt at rest: as a fetch of them is
                    result.error_code = error.code  # type: ignore[assignment]
                    result.error_message = str(error)
                    continue
                if found is not None:
                    result.offset, result.timestamp_ms = found
            else:
                result.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
                result.error_message = (
                    f"offset_spec {spec} is not set or unknown: use EARLIEST (1), LATEST (2), "
                    f"TIMESTAMP (3) or MAX_TIMESTAMP (4)"
                )
                continue
            result.leader_epoch = answered_epoch(hosted, spec, result.offset)
    return response


def _timestamp_lookup(
    hosted: HostedPartition, spec: int, timestamp_ms: int, visible_end: int
) -> tuple[int, int] | None:
    """The record a TIMESTAMP or MAX_TIMESTAMP spec finds below `visible_end`, or None; a
    StorageError when the search needs records whose bytes are corrupt at rest."""
    if spec == broker_pb2.OFFSET_SPEC_MAX_TIMESTAMP:
        return hosted.log.max_timestamp_record(visible_end)
    found = hosted.log.offset_for_timestamp(timestamp_ms)
    return found if found is not None and found[0] < visible_end else None


def answered_epoch(hosted: HostedPartition, spec: int, offset: int) -> int:
    """The epoch of the batch holding a record found, of the log start's batch for EARLIEST,
    the leader's latest for LATEST (Kafka's answers); -1 when nothing was found."""
    if spec == broker_pb2.OFFSET_SPEC_LATEST:
        return hosted.log.latest_epoch
    return epoch_of(hosted.log.leader_epoch_entries(), offset)
