"""What the broker refuses before it touches a partition: request limits and malformed fields.

Pure: each check takes a request and returns None, or the gRPC status and a message saying what
to change. The adapters (servicer.py, produce_stream.py, fetch_stream.py, replica_stream.py)
send it as an abort; a stream's reader hands it to the stream's own task first, since only that
task may send the status.
"""

from __future__ import annotations

import grpc

from samsa.common import limits
from samsa.common.request_counts import too_many, too_many_nested
from samsa.services.broker.requests.fetch_session import CLOSE_EPOCH
from samsa.v1 import broker_pb2

Refusal = tuple[grpc.StatusCode, str]


PartitionRequest = (
    broker_pb2.ProduceRequest
    | broker_pb2.FetchRequest
    | broker_pb2.ListOffsetsRequest
    | broker_pb2.DescribeProducersRequest
    | broker_pb2.DeleteRecordsRequest
    | broker_pb2.DescribeLogDirsRequest
)


def partition_count(request: PartitionRequest) -> int:
    # Plain loops: this runs for every request, and a generator per sum costs as much again.
    count = 0
    for topic in request.topics:
        count += len(topic.partitions)
    if isinstance(request, broker_pb2.FetchRequest):
        for forgotten in request.forgotten_topics:
            count += len(forgotten.partitions)
    return count


def too_many_partitions(request: PartitionRequest) -> Refusal | None:
    """Why `request` is refused for the partitions or topic entries it names, if it is (see
    common/request_counts.py: a Fetch's forgotten topics count as its topics do)."""
    entries = len(request.topics)
    if isinstance(request, broker_pb2.FetchRequest):
        entries += len(request.forgotten_topics)
    message = too_many_nested(
        partition_count(request),
        "partitions",
        entries=entries,
        limit=limits.request_partitions_max,
    )
    return None if message is None else (grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def partitions_refusal(
    request: broker_pb2.ListOffsetsRequest
    | broker_pb2.DescribeProducersRequest
    | broker_pb2.DeleteRecordsRequest,
) -> Refusal | None:
    """Why ListOffsets, DescribeProducers or DeleteRecords refuses `request` before looking at a
    partition, if it does: too many partitions, or one named twice (each answer holds one
    result per partition named, so a partition named 10,000 times in a 10 KB DescribeProducers
    had its whole producer table built into the answer 10,000 times)."""
    refusal = too_many_partitions(request)
    if refusal is not None:
        return refusal
    named: set[tuple[str, int]] = set()
    for topic in request.topics:
        for entry in topic.partitions:
            number = entry if isinstance(entry, int) else entry.partition
            key = (topic.name, number)
            if key in named:
                return (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{topic.name}-{number} is named twice: name each partition once",
                )
            named.add(key)
    return None


def log_dirs_refusal(request: broker_pb2.DescribeLogDirsRequest) -> Refusal | None:
    """Why DescribeLogDirs refuses `request`, if it does: too many partitions or topic entries,
    a topic or partition named twice (a topic listing no partitions stands for all it hosts, so
    a second entry would answer them twice), a negative partition_limit or cursor partition."""
    refusal = too_many_partitions(request)
    if refusal is not None:
        return refusal
    names: set[str] = set()
    for topic in request.topics:
        if topic.name in names:
            return (
                grpc.StatusCode.INVALID_ARGUMENT,
                f"topic {topic.name!r} is named twice: name each topic once",
            )
        names.add(topic.name)
        if len(set(topic.partitions)) != len(topic.partitions):
            return (
                grpc.StatusCode.INVALID_ARGUMENT,
                f"a partition of {topic.name} is named twice: name each partition once",
            )
    if request.partition_limit < 0 or request.cursor.partition < 0:
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            "partition_limit and cursor.partition must not be negative",
        )
    return None


def produce_refusal(request: broker_pb2.ProduceRequest) -> Refusal | None:
    """Why Produce refuses `request` before anything is appended, if it does."""
    refusal = too_many_partitions(request)
    if refusal is not None:
        return refusal
    named: set[tuple[str, int]] = set()
    for topic in request.topics:
        for data in topic.partitions:
            # Once each: the transactional check (txn_verification.py) gives a partition one
            # verdict, which an entry of another producer's batches would otherwise ride on.
            key = (topic.name, data.partition)
            if key in named:
                return (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{topic.name}-{data.partition} is named twice: name each partition once "
                    "(several batches of one partition go concatenated in its `records`)",
                )
            named.add(key)
            # The partition is named only once refused: no string is formatted per partition.
            message = too_many(
                len(data.typed_records),
                "typed records",
                limits.typed_records_per_partition_max,
                " per partition, or encoded batches",
            )
            if message is not None:
                return (
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{topic.name}-{data.partition}: {message}",
                )
    return None


def fetch_refusal(request: broker_pb2.FetchRequest) -> Refusal | None:
    """Why Fetch (and both fetch streams) refuses `request` before reading anything, if it does."""
    refusal = too_many_partitions(request)
    if refusal is not None:
        return refusal
    if request.max_wait_ms < 0 or request.min_bytes < 0 or request.max_bytes < 0:
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            "max_wait_ms, min_bytes and max_bytes must not be negative",
        )
    if request.HasField("session_id") and (
        request.session_id < 0 or request.session_epoch < CLOSE_EPOCH
    ):
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            "session_id must not be negative, nor session_epoch below -1",
        )
    named: set[tuple[str, int]] = set()
    for topic in request.topics:
        for wanted in topic.partitions:
            if wanted.partition_max_bytes < 0 or wanted.fetch_offset < 0:
                return (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{topic.name}-{wanted.partition}: fetch_offset and partition_max_bytes "
                    "must not be negative",
                )
            key = (topic.name, wanted.partition)
            if key in named:  # an answer holds one result, and one set of records, per partition
                return (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{topic.name}-{wanted.partition} is named twice: name each partition once",
                )
            named.add(key)
    return None
