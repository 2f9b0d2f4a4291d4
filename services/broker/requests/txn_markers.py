"""WriteTxnMarkers: a transaction coordinator's phase 2, the COMMIT/ABORT markers on partitions.

Theory of operation (DESIGN §5; Kafka's WriteTxnMarkers and KIP-890). Once a transaction's decision
(PrepareCommit or PrepareAbort) is durable in `__transaction_state`, its coordinator asks each
partition leader to write one marker per partition of the transaction: a control batch of one
record, carrying the producer id and the epoch the coordinator bumped at the end. The log checks the
marker before writing it (producer_state.py): a marker at an epoch not above the producer's is a
retry (nothing written, success) when no transaction opened since and the marker written at that
epoch is of the same type, and refused otherwise (INVALID_PRODUCER_EPOCH), so a marker delayed past
the next transaction can never end it, and a COMMIT never passes for written where an ABORT was.
Each marker is acknowledged once the high watermark passes it, as an acks=all produce is, and a
partition whose ISR is below min.insync.replicas refuses it (NOT_ENOUGH_REPLICAS): the coordinator
writes CompleteCommit/CompleteAbort only when every marker is replicated, and a marker that could
still be truncated away decides nothing.

Only cluster members may call it (the servicer checks the membership proof): a forged marker
would commit or abort someone else's transaction. Markers go to internal topics too
(`__consumer_offsets`, for offsets committed in a transaction).
"""

from __future__ import annotations

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, build_control_batch
from samsa.common.request_counts import TOPIC_ENTRIES, too_many, too_many_nested
from samsa.services.broker.hosted_partition import LeadershipError
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.produce import ReplicationWait, fail
from samsa.v1 import broker_pb2

PartitionResult = broker_pb2.WriteTxnMarkersResponse.PartitionResult
TIMEOUT_MS_DEFAULT = 30_000


def markers_refusal(
    request: broker_pb2.WriteTxnMarkersRequest,
) -> tuple[grpc.StatusCode, str] | None:
    """Why the request is refused before anything is written, if it is."""
    # Each marker is answered with an entry even when it names no partition, and each of its
    # topic entries is looked at: count all three.
    message = too_many_nested(
        sum(len(topic.partitions) for marker in request.markers for topic in marker.topics),
        "partitions",
        entries=len(request.markers),
        entries_what="markers",
        limit=limits.request_partitions_max,
    ) or too_many(
        sum(len(marker.topics) for marker in request.markers),
        TOPIC_ENTRIES,
        limits.request_partitions_max,
    )
    if message is not None:
        return grpc.StatusCode.RESOURCE_EXHAUSTED, message
    if request.timeout_ms < 0:
        return grpc.StatusCode.INVALID_ARGUMENT, f"timeout_ms={request.timeout_ms} is negative"
    return None


def timeout_s(request: broker_pb2.WriteTxnMarkersRequest) -> float:
    """How long the markers wait for replication: the caller's timeout, capped as an acks=all
    produce's is, so no request holds a task and its answer for as long as it names."""
    timeout_ms = request.timeout_ms or TIMEOUT_MS_DEFAULT
    return min(timeout_ms, limits.produce_timeout_ms_max) / 1000


def write_txn_markers(
    host: PartitionHost, request: broker_pb2.WriteTxnMarkersRequest, now_ms: int
) -> tuple[broker_pb2.WriteTxnMarkersResponse, list[ReplicationWait]]:
    """Append every marker; the response is final except for the replication waits returned
    (answered by produce_wait.await_replication)."""
    response = broker_pb2.WriteTxnMarkersResponse()
    waits: list[ReplicationWait] = []
    for marker in request.markers:
        marker_result = response.markers.add(producer_id=marker.producer_id)
        kind = CONTROL_TYPE_COMMIT if marker.committed else CONTROL_TYPE_ABORT
        for topic in marker.topics:
            topic_result = marker_result.topics.add(name=topic.name)
            for partition in topic.partitions:
                result = topic_result.partitions.add(partition=partition)
                wait = _write(host, marker, kind, topic.name, partition, result, now_ms)
                if wait is not None:
                    waits.append(wait)
    return response, waits


def _write(
    host: PartitionHost,
    marker: broker_pb2.WriteTxnMarkersRequest.TransactionMarker,
    kind: int,
    topic: str,
    partition: int,
    result: PartitionResult,
    now_ms: int,
) -> ReplicationWait | None:
    hosted = host.leader(topic, partition)
    if isinstance(hosted, LeadershipError):
        hosted.refuse(result)
        return None
    if len(hosted.isr) < hosted.min_insync_replicas:
        fail(
            result,  # type: ignore[arg-type]
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"the ISR {list(hosted.isr)} is smaller than min.insync.replicas="
            f"{hosted.min_insync_replicas}: the marker is not written",
        )
        return None
    try:
        batch = build_control_batch(
            kind,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            timestamp=now_ms,
        )
        info = hosted.log.append_as_leader(
            batch, leader_epoch=hosted.leader_epoch, now_ms=now_ms, allow_control_batches=True
        )
    except SamsaError as error:
        fail(result, error.code, str(error))  # type: ignore[arg-type]
        return None
    if info.record_count:
        hosted.on_leader_append()
        end_offset = info.last_offset + 1
    else:
        # Written before (a retry): it is acknowledged once everything appended so far is.
        end_offset = hosted.log.log_end_offset
    if hosted.high_watermark >= end_offset:
        return None
    return ReplicationWait(hosted, end_offset, result, hosted.leader_epoch)  # type: ignore[arg-type]
