"""The follower's half of replication: what it asks of its leader, and how it stores the answer.

`follower_position` is what a follower names for one partition in its next fetch: its log end
offset (how the leader learns its progress), the leader epoch it believes current, the epoch of
its last batch (KIP-320) and its log start offset (the leader's low watermark counts it).

`answer_is_current` says whether an answer still fits the replica when it arrives: the partition
may have moved on while the fetch was out (a new leader, this broker leading it, a truncation).

`apply_leader_answer` stores one partition's answer in the replica (module doc of
replica_fetcher.py): out of range, it truncates or starts over at the leader's log start; a
diverging epoch truncates to where both logs still agree (`truncation_offset`: never blindly
to the high watermark, KIP-101, and one epoch at a time, KIP-279); records are appended as the
leader assigned them; the high watermark becomes the leader's kept within its own log
(`HostedPartition.take_leader_high_watermark`, which tells the log: Kafka's follower settles the
transactions its high watermark passed as its leader does); a log start the leader moved is
followed.

No gRPC and no clock here (time comes in as `now_ms`): the fetch loops (replica_fetcher.py) do
the I/O around these, and the replication simulation (tests/unit/broker/
test_replication_simulation.py) drives the same functions in one process.
"""

from __future__ import annotations

import logging

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.fetch_session_client import FetchPosition
from samsa.common.record.header import HEADER_BYTES, read_header
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)

FETCH_PARTITION_BYTES = 1024 * 1024  # Kafka's replica.fetch.max.bytes

FetchPartitionResult = broker_pb2.FetchResponse.PartitionResponse


def follower_position(hosted: HostedPartition) -> FetchPosition:
    """What this replica asks its leader for next."""
    return FetchPosition(
        fetch_offset=hosted.log.log_end_offset,
        current_leader_epoch=hosted.leader_epoch,
        last_fetched_epoch=hosted.log.latest_epoch,
        partition_max_bytes=FETCH_PARTITION_BYTES,
        log_start_offset=hosted.log.log_start_offset,
        topic_id=hosted.topic_id,  # never the records of another topic of this name (KIP-516)
    )


def straddled_start(records: bytes, log_start_offset: int, log_end_offset: int) -> int | None:
    """Where an empty replica log must start to take `records`: the first batch's base offset
    when the log holds nothing and that batch begins below the log's end but reaches it; else
    None (the records are appended as they are, or refused as out of order)."""
    if log_start_offset != log_end_offset or len(records) < HEADER_BYTES:
        return None
    header = read_header(records)
    if header.base_offset < log_end_offset <= header.last_offset:
        return header.base_offset
    return None


def truncation_offset(
    own_epoch_end: tuple[int, int],
    leader_epoch: int,
    leader_end_offset: int,
    log_end_offset: int,
    high_watermark: int,
) -> int:
    """Where a follower truncates when the leader says their logs diverge (KIP-101, KIP-279).

    The leader answered (`leader_epoch`, `leader_end_offset`): the largest epoch it holds up to
    the follower's last one, and where that epoch ends in its log. `own_epoch_end` is the
    follower's own `end_offset_for_epoch(leader_epoch)`. If the follower holds that epoch, the
    logs agree up to the smaller of the two ends. If it does not, it holds only older epochs
    there: it truncates to the end of those and asks again with its new last epoch, one round
    per epoch, until the answer is an epoch both hold. Truncating to the leader's end alone
    would keep batches of an epoch the leader never had (when the follower's log is longer) or
    truncate nothing and ask the same question forever (when it is shorter). Only a leader
    that knows no epoch at all at or below the follower's answers an undefined end; then the
    high watermark is all that is known to be shared."""
    if leader_end_offset < 0:
        return min(high_watermark, log_end_offset)
    own_epoch, own_end = own_epoch_end
    if own_epoch < 0:
        return min(leader_end_offset, log_end_offset)
    if own_epoch != leader_epoch:
        return min(own_end, log_end_offset)
    return min(own_end, leader_end_offset, log_end_offset)


def answer_is_current(
    hosted: HostedPartition | None, leader_id: int, sent: FetchPosition | None
) -> bool:
    """Whether an answer from `leader_id` to the fetch that asked `sent` still applies: this
    broker still follows the partition from that leader, and its log ends where it did, and it
    is still the topic the fetch named (deleted and created again meanwhile, the new log may
    end where the old one did, and the answer holds the old topic's records)."""
    return (
        hosted is not None
        and sent is not None
        and not hosted.is_leader
        and hosted.leader_id == leader_id
        and hosted.log.log_end_offset == sent.fetch_offset
        and sent.topic_id == hosted.topic_id
    )


def apply_leader_answer(hosted: HostedPartition, result: FetchPartitionResult, now_ms: int) -> bool:
    """Store one partition's answer; False when it was an error (leadership changed, or an
    append failed) and nothing was stored."""
    log_ = hosted.log
    where = f"{hosted.topic}-{hosted.partition}"
    if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
        if log_.log_end_offset < result.log_start_offset:
            log.warning("follower behind the leader's log start", extra={"partition": where})
            log_.truncate_fully_and_start_at(result.log_start_offset)
        else:
            log_.truncate_to(min(result.high_watermark, log_.log_end_offset))
        hosted.log_changed()
        return True
    if result.error_code != ErrorCode.NONE:
        return False  # leadership changed: the metadata log will say where to go
    if result.HasField("diverging_epoch"):
        target = truncation_offset(
            log_.end_offset_for_epoch(result.diverging_epoch.leader_epoch),
            result.diverging_epoch.leader_epoch,
            result.diverging_epoch.end_offset,
            log_.log_end_offset,
            hosted.high_watermark,
        )
        # Records dropped are worth a warning; an epoch this replica began as a leader and wrote
        # nothing in (start_leader_epoch), which the new leader never had, is routine after a
        # leadership change: only the epoch entry at the log end goes.
        log.log(
            logging.WARNING if target < log_.log_end_offset else logging.INFO,
            "follower log diverged from the leader's: truncating",
            extra={
                "partition": where,
                "epoch": result.diverging_epoch.leader_epoch,
                "truncate_to": target,
                "log_end_offset": log_.log_end_offset,
            },
        )
        log_.truncate_to(target)
        hosted.log_changed()
        return True
    records = result.records  # read once: each read of a bytes field copies it
    if records:
        start_at = straddled_start(records, log_.log_start_offset, log_.log_end_offset)
        if start_at is not None:
            # The leader's log start (a DeleteRecords) falls inside its first batch, and this
            # replica started over there: it starts at the batch instead, or it could never
            # append it (Kafka handles UnexpectedAppendOffsetException the same way). Its next
            # fetch reports it and the leader's log start moves it up again.
            log_.truncate_fully_and_start_at(start_at)
            # Its high watermark (at the old start) is now above its log end: kept within the
            # log, as after any truncation, in case the append below fails.
            hosted.log_changed()
        try:
            log_.append_as_follower(records, now_ms=now_ms)
        except SamsaError as error:
            log.error("follower append failed", extra={"partition": where, "error": str(error)})
            return False
    if result.log_start_offset > log_.log_start_offset:
        # The leader deleted records (DeleteRecords or its retention): so does this replica,
        # and its next fetch reports where it starts (the leader's low watermark).
        log_.delete_records(min(result.log_start_offset, log_.log_end_offset))
    moved = hosted.take_leader_high_watermark(result.high_watermark)
    if records or moved:
        hosted.notify_appended()
    return True
