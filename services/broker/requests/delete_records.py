"""DeleteRecords: move partitions' log start offsets up (Kafka's KIP-107).

The leader checks each partition (leadership, an internal or compacted-only topic, an offset at
most the high watermark), moves its own log start (`Log.delete_records`: checkpointed, and the
segments wholly below it deleted) and marks the partition changed, so that fetch sessions carry
the new log start to the followers, which move theirs (replica_fetcher.py). A partition is
answered once its low watermark, the smallest log start over the leader and the ISR's followers
as their fetches report it (replication.py), has reached the offset, or REQUEST_TIMED_OUT at the
deadline. Waiting for the ISR is what keeps a leader elected later from serving deleted records
again: only an ISR member can be elected (unclean election aside).

`delete_refusal` is pure; `start_deletion` moves one partition's log start (the replication
simulation calls it too); `delete_records` does the moves and the waiting."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.services.broker.hosted_partition import HostedPartition, LeadershipError
from samsa.services.broker.partition_host import PartitionHost
from samsa.v1 import broker_pb2

TIMEOUT_MS_DEFAULT = 30_000  # Kafka's AdminClient default for deleteRecords
TIMEOUT_MS_MAX = 300_000
HIGH_WATERMARK = -1  # an offset of -1 asks for everything below the high watermark
ANSWER_MARGIN_S = 0.25  # the answer's own time to reach the caller
POLL_S = 0.1  # the longest a waiting partition goes without looking at its low watermark

PartitionResult = broker_pb2.DeleteRecordsResponse.PartitionResponse


def timeout_refusal(timeout_ms: int) -> str | None:
    """Why a request's timeout_ms is refused (INVALID_ARGUMENT), or None."""
    if not 0 <= timeout_ms <= TIMEOUT_MS_MAX:
        return f"timeout_ms {timeout_ms} must be 0 (the default, 30 s) to {TIMEOUT_MS_MAX}"
    return None


def delete_refusal(
    topic: str, offset: int, *, high_watermark: int, cleanup_deletes: bool
) -> tuple[ErrorCode, str] | None:
    """Why the leader refuses to delete `topic`'s records below `offset`, or None."""
    if topic in INTERNAL_TOPICS:
        return ErrorCode.POLICY_VIOLATION, f"{topic} is internal: its records cannot be deleted"
    if not cleanup_deletes:
        return (
            ErrorCode.POLICY_VIOLATION,
            f"{topic} has cleanup.policy=compact: records are deleted only where the policy "
            "includes delete",
        )
    if offset < HIGH_WATERMARK or offset > high_watermark:
        return (
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} must be -1 (the high watermark) or 0 to the high watermark "
            f"{high_watermark}: records not yet committed cannot be deleted",
        )
    return None


@dataclass
class _Deletion:
    hosted: HostedPartition
    offset: int
    result: PartitionResult


async def delete_records(
    host: PartitionHost, request: broker_pb2.DeleteRecordsRequest, time_remaining_s: float | None
) -> broker_pb2.DeleteRecordsResponse:
    """Move each partition's log start, then wait for the ISR to follow (see the module doc)."""
    timeout_s = (request.timeout_ms or TIMEOUT_MS_DEFAULT) / 1000
    if time_remaining_s is not None:  # answer before the caller's deadline, with time to spare
        timeout_s = min(timeout_s, max(time_remaining_s - ANSWER_MARGIN_S, 0))
    deadline = time.monotonic() + timeout_s
    response = broker_pb2.DeleteRecordsResponse()
    deletions = []
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        for wanted in topic.partitions:
            result = topic_response.partitions.add(partition=wanted.partition, low_watermark=-1)
            deletion = start_deletion(host, topic.name, wanted, result)
            if deletion is not None:
                deletions.append(deletion)
    await asyncio.gather(*(_await_low_watermark(d, deadline) for d in deletions))
    return response


def start_deletion(
    host: PartitionHost,
    topic: str,
    wanted: broker_pb2.DeleteRecordsRequest.PartitionData,
    result: PartitionResult,
) -> _Deletion | None:
    hosted = host.leader(topic, wanted.partition)
    if isinstance(hosted, LeadershipError):
        hosted.refuse(result)
        return None
    refusal = delete_refusal(
        topic,
        wanted.offset,
        high_watermark=hosted.high_watermark,
        cleanup_deletes=hosted.log.config.delete,
    )
    if refusal is not None:
        _fail(result, *refusal)
        result.low_watermark = _low_watermark(hosted)
        return None
    offset = hosted.high_watermark if wanted.offset == HIGH_WATERMARK else wanted.offset
    if offset > hosted.log.log_start_offset:
        hosted.log.delete_records(offset)
        hosted.notify_appended()  # fetch sessions carry the new log start to the followers
    return _Deletion(hosted, offset, result)


async def _await_low_watermark(deletion: _Deletion, deadline: float) -> None:
    hosted, result = deletion.hosted, deletion.result
    while True:
        changed = hosted.data_arrived  # taken before the check: a wake in between is kept
        if not hosted.is_leader:
            _fail(result, ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership moved while waiting")
            return
        result.low_watermark = _low_watermark(hosted)
        if result.low_watermark >= deletion.offset:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _fail(
                result,
                ErrorCode.REQUEST_TIMED_OUT,
                f"the ISR's replicas start at {result.low_watermark}, not yet {deletion.offset}: "
                "the leader's records are deleted and the followers are still following",
            )
            return
        # Woken when a follower reports a new log start; polled too, for a first report.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), min(remaining, POLL_S))


def _low_watermark(hosted: HostedPartition) -> int:
    return hosted.replica.low_watermark(hosted.log.log_start_offset)


def _fail(result: PartitionResult, code: ErrorCode, message: str) -> None:
    result.error_code = code  # type: ignore[assignment]
    result.error_message = message
