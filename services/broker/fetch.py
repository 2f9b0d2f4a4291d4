"""Fetch: whole stored batches up to the high watermark, with Kafka's long-poll.

A fetch answers at once when its partitions hold at least `min_bytes` between them, otherwise it
waits up to `max_wait_ms` for appends, woken by the partitions' `data_arrived` events (never by
polling). Limits: `partition_max_bytes` per partition and `max_bytes` in total, except that the
first batch of the answer is returned whole even if larger (KIP-74), so a consumer always makes
progress. Records travel as the stored bytes; `decode_records` (for clients with only generated
code) decodes them into typed records on the broker.
"""

from __future__ import annotations

import asyncio
import time

from samsa.common import limits
from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import RecordBatch, decode_batch
from samsa.common.record.header import read_header
from samsa.services.broker.partition_host import HostedPartition, LeadershipError, PartitionHost
from samsa.v1 import broker_pb2, records_pb2

PARTITION_MAX_BYTES_DEFAULT = 1024 * 1024  # Kafka's max.partition.fetch.bytes
MAX_BYTES_DEFAULT = 50 * 1024 * 1024  # Kafka's fetch.max.bytes

FetchPartition = broker_pb2.FetchResponse.PartitionResponse


async def fetch(host: PartitionHost, request: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
    """Answer `request`, waiting for data as its max_wait_ms and min_bytes ask."""
    wait_s = min(request.max_wait_ms, limits.fetch_wait_ms_max) / 1000
    deadline = time.monotonic() + wait_s
    while True:
        response, size, waits = read_once(host, request)
        remaining = deadline - time.monotonic()
        if size >= max(request.min_bytes, 1) or remaining <= 0 or not waits:
            return response
        await first_of(waits, remaining)


def read_once(
    host: PartitionHost, request: broker_pb2.FetchRequest
) -> tuple[broker_pb2.FetchResponse, int, list[asyncio.Event]]:
    """One pass over the partitions: the answer, its record bytes, and events to wait on."""
    response = broker_pb2.FetchResponse()
    replica_id = request.replica_id if request.HasField("replica_id") else -1
    now_ms = int(time.time() * 1000)
    budget = min(request.max_bytes or MAX_BYTES_DEFAULT, limits.fetch_response_bytes_max)
    total = 0
    waits: list[asyncio.Event] = []
    errors = False
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        for wanted in topic.partitions:
            result = topic_response.partitions.add(
                partition=wanted.partition, next_fetch_offset=wanted.fetch_offset
            )
            hosted = host.leader(topic.name, wanted.partition)
            if isinstance(hosted, LeadershipError) and replica_id < 0:
                # Any replica serves consumers up to its own high watermark (KIP-392): a
                # consumer sent here by its leader's preferred_read_replica, or one whose
                # metadata is a little stale. Committed data only, so it is never wrong.
                hosted = host.get(topic.name, wanted.partition) or hosted
            if isinstance(hosted, LeadershipError):
                _fail(result, hosted.code, hosted.message)
                result.current_leader.leader_id = hosted.leader_id
                result.current_leader.leader_epoch = hosted.leader_epoch
                errors = True
                continue
            if replica_id >= 0 and not _is_replica(hosted, replica_id, result):
                errors = True
                continue
            if _diverged(hosted, wanted, result):
                continue
            if request.rack_id and replica_id < 0 and hosted.is_leader:
                preferred = _replica_in_rack(host, hosted, request.rack_id)
                if preferred is not None:
                    result.preferred_read_replica = preferred
                    result.high_watermark = hosted.high_watermark
                    continue
            high_watermark = hosted.high_watermark
            result.high_watermark = high_watermark
            result.last_stable_offset = high_watermark
            result.log_start_offset = hosted.log.log_start_offset
            if wanted.HasField("current_leader_epoch") and (
                wanted.current_leader_epoch != hosted.leader_epoch
            ):
                code = (
                    ErrorCode.FENCED_LEADER_EPOCH
                    if wanted.current_leader_epoch < hosted.leader_epoch
                    else ErrorCode.UNKNOWN_LEADER_EPOCH
                )
                _fail(result, code, f"leader epoch is {hosted.leader_epoch}: refresh metadata")
                errors = True
                continue
            partition_budget = min(
                wanted.partition_max_bytes or PARTITION_MAX_BYTES_DEFAULT,
                limits.fetch_partition_bytes_max,
                max(budget - total, 0),
            )
            if total and partition_budget <= 0:
                continue  # the answer is full; the client asks again from here
            # Followers read up to the log end (that is how the high watermark advances);
            # consumers only up to the high watermark.
            upper = None if replica_id >= 0 else high_watermark
            try:
                read = hosted.log.read(
                    wanted.fetch_offset, max(partition_budget, 1), max_offset=upper
                )
            except SamsaError as error:
                _fail(result, error.code, str(error))
                errors = True
                continue
            if replica_id >= 0 and hosted.replication is not None:
                hosted.replication.on_follower_fetch(
                    replica_id, wanted.fetch_offset, hosted.log.log_end_offset, now_ms
                )
                if hosted.advance_high_watermark():
                    result.high_watermark = hosted.high_watermark
                    result.last_stable_offset = hosted.high_watermark
            result.next_fetch_offset = read.next_offset
            if read.records:
                if request.decode_records:
                    _decode_into(result, read.records, wanted.fetch_offset)
                else:
                    result.records = read.records
                total += len(read.records)
            waits.append(hosted.data_arrived)
    return response, total, [] if errors else waits


def _replica_in_rack(host: PartitionHost, hosted: HostedPartition, rack: str) -> int | None:
    """An in-sync follower in the consumer's rack, when the leader is not in it (KIP-392)."""
    brokers = host.image.brokers
    me = brokers.get(host.broker_id)
    if me is None or me.rack == rack:
        return None
    for replica in hosted.isr:
        broker = brokers.get(replica)
        usable = replica != host.broker_id and broker is not None and not broker.fenced
        if usable and broker.rack == rack:  # type: ignore[union-attr]
            return replica
    return None


def _is_replica(hosted: HostedPartition, replica_id: int, result: FetchPartition) -> bool:
    if hosted.state is not None and replica_id in hosted.state.replicas:
        return True
    _fail(
        result,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        f"broker {replica_id} is not a replica of {hosted.topic}-{hosted.partition}",
    )
    return False


def _diverged(
    hosted: HostedPartition, wanted: broker_pb2.FetchRequest.PartitionData, result: FetchPartition
) -> bool:
    """KIP-320: does the fetcher's log (its last fetched epoch) disagree with ours? If so the
    answer carries the epoch and end offset to truncate (a follower) or reset (a consumer) to."""
    if not wanted.HasField("last_fetched_epoch") or wanted.last_fetched_epoch < 0:
        return False
    epoch, end_offset = hosted.log.end_offset_for_epoch(wanted.last_fetched_epoch)
    if epoch == wanted.last_fetched_epoch and end_offset >= wanted.fetch_offset:
        return False
    result.diverging_epoch.leader_epoch = epoch
    result.diverging_epoch.end_offset = end_offset
    result.high_watermark = hosted.high_watermark
    result.log_start_offset = hosted.log.log_start_offset
    return True


def _decode_into(result: FetchPartition, records: bytes, from_offset: int) -> None:
    """Typed records for clients with only the generated code. A stored batch that cannot be
    decoded (written by an older version, or damaged on disk) ends the answer before it, so the
    records ahead of it are still served; when it comes first, the partition answers
    CORRUPT_MESSAGE naming its offset, and the client can seek past it."""
    position = 0
    while position < len(records):
        try:
            batch = decode_batch(records, position)
        except SamsaError as error:
            bad_offset = _base_offset_at(records, position, from_offset)
            if position == 0:
                _fail(
                    result,
                    ErrorCode.CORRUPT_MESSAGE,
                    f"the stored batch at offset {bad_offset} cannot be decoded ({error}); "
                    f"seek past it to read on",
                )
            else:
                result.next_fetch_offset = bad_offset
            return
        _add_typed(result, batch, from_offset)
        position += batch.header.size_bytes


def _base_offset_at(records: bytes, position: int, default: int) -> int:
    try:
        return max(default, read_header(records, position).base_offset)
    except SamsaError:
        return default


def _add_typed(result: FetchPartition, batch: RecordBatch, from_offset: int) -> None:
    for record in batch:
        if record.offset < from_offset:
            continue
        typed = result.decoded_records.add(offset=record.offset, timestamp_ms=record.timestamp)
        if record.key is not None:
            typed.key = record.key
        if record.value is not None:
            typed.value = record.value
        for key, value in record.headers:
            header = records_pb2.RecordHeader(key=key)
            if value is not None:
                header.value = value
            typed.headers.append(header)


async def first_of(events: list[asyncio.Event], timeout_s: float) -> None:
    """Return when any of `events` is set, or after `timeout_s`."""
    tasks = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _fail(result: FetchPartition, code: int, message: str) -> None:
    result.error_code = code  # type: ignore[assignment]
    result.error_message = message
