"""DescribeLogDirs: what this broker stores, per log directory and partition replica.

Theory of operation. Kafka's `kafka-log-dirs.sh --describe` (DescribeLogDirs; KIP-827 added the
directories' total and usable bytes) shows, per broker and log directory, each hosted replica's
size in bytes, its offset lag and whether it is a future replica. A Samsa broker has one log
directory, its data dir, so an answer holds one LogDir; `is_future` is always false (Kafka's
moves between a broker's directories do not exist here) and kept for parity.

This core is pure: the adapter (servicer.py) hands it the hosted partition numbers by topic, a
function giving one replica's figures (its log's size, which the log keeps in memory as the sum
of its segments' sizes — what retention.bytes reads, so no file is stat'ed per call — its high
watermark and log end offset), and the directory's disk space, read off the event loop.

Which replicas: those of the topics named (a topic's listed partitions, or all it hosts when it
lists none), or every hosted one when no topic is named; one named but not hosted is left out,
as Kafka leaves it out. They are answered in topic name, then partition order, at most `limit`
a page: a broker may host far more partitions than a request may name, and "every partition"
must still fit one gRPC message (limits.log_dirs_answer_partitions_max). A page that stops at
the limit carries the cursor of the first replica it left out; the next request continues from
there. Only the topics reached are sorted, so a page costs the sort of the topic names plus its
own partitions, not the sort of everything hosted.

Offset lag is Kafka's for a current (non-future) replica: max(high watermark - log end offset,
0). A log never ends below the high watermark its replica knows, so it reads 0; it is kept so
that a client reads the figure Kafka's tools show.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2

# Kafka's DescribeLogDirsResponse.UNKNOWN_VOLUME_BYTES: the disk's figures could not be read.
UNKNOWN_VOLUME_BYTES = -1

Cursor = broker_pb2.DescribeLogDirsRequest.Cursor


@dataclass(frozen=True)
class ReplicaFigures:
    """One hosted replica as DescribeLogDirs shows it."""

    size_bytes: int
    high_watermark: int
    log_end_offset: int


@dataclass(frozen=True)
class DiskSpace:
    """The log directory's file system (shutil.disk_usage): total and usable bytes."""

    total_bytes: int
    usable_bytes: int


def offset_lag(high_watermark: int, log_end_offset: int) -> int:
    """Kafka's offset lag of a current replica (see the module doc)."""
    return max(high_watermark - log_end_offset, 0)


def page_limit(asked: int, limit_max: int) -> int:
    """The partitions one answer carries: `asked`, where 0 or above the maximum means it."""
    return limit_max if asked <= 0 or asked > limit_max else asked


def selected_partitions(
    request: broker_pb2.DescribeLogDirsRequest, hosted: Mapping[str, Collection[int]]
) -> Iterator[tuple[str, int]]:
    """The hosted replicas the request asks for, in topic name then partition order, from its
    cursor on (see the module doc). Lazy: a page takes only what it answers, and one more."""
    wanted: dict[str, Collection[int] | None] = {}
    if request.topics:
        for topic in request.topics:
            if topic.name in hosted:
                wanted[topic.name] = set(topic.partitions) if topic.partitions else None
    else:
        wanted = dict.fromkeys(hosted)
    start = request.cursor if request.HasField("cursor") else None
    for name in sorted(wanted):
        if start is not None and name < start.topic:
            continue
        asked = wanted[name]
        numbers = hosted[name] if asked is None else [n for n in asked if n in hosted[name]]
        first = start.partition if start is not None and name == start.topic else 0
        for number in sorted(numbers):
            if number >= first:
                yield name, number


def describe_log_dirs(
    request: broker_pb2.DescribeLogDirsRequest,
    hosted: Mapping[str, Collection[int]],
    figures: Callable[[str, int], ReplicaFigures],
    path: str,
    disk: DiskSpace | str,
    limit: int,
) -> broker_pb2.DescribeLogDirsResponse:
    """The answer: the one log directory at `path`, its disk space (or, as a string, why it
    could not be read: KAFKA_STORAGE_ERROR), and at most `limit` of the replicas asked for."""
    response = broker_pb2.DescribeLogDirsResponse()
    log_dir = response.log_dirs.add(path=path)
    if isinstance(disk, str):
        log_dir.error_code = ErrorCode.KAFKA_STORAGE_ERROR  # type: ignore[assignment]
        log_dir.error_message = disk
        log_dir.total_bytes = log_dir.usable_bytes = UNKNOWN_VOLUME_BYTES
    else:
        log_dir.total_bytes = disk.total_bytes
        log_dir.usable_bytes = disk.usable_bytes
    topic_result = None
    for answered, (name, number) in enumerate(selected_partitions(request, hosted)):
        if answered == limit:
            response.next_cursor.topic = name
            response.next_cursor.partition = number
            break
        if topic_result is None or topic_result.name != name:
            topic_result = log_dir.topics.add(name=name)
        replica = figures(name, number)
        topic_result.partitions.add(
            partition=number,
            size_bytes=replica.size_bytes,
            offset_lag=offset_lag(replica.high_watermark, replica.log_end_offset),
            is_future=False,
        )
    return response
