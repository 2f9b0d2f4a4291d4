"""Admin.describe_log_dirs, the pure half: which brokers to ask, the request, and the answer's
pages merged into Kafka's shape (log_dir_calls.py carries the calls).

Kafka's Admin.describeLogDirs answers, per broker, per log directory: an error or none, the
directory's total and usable bytes (KIP-827; -1 when the broker could not read them), and each
replica there by (topic, partition) with its size in bytes, offset lag and whether it is a
future replica. A Samsa broker has one log directory, its data dir. A broker answers in pages
(broker.proto's DescribeLogDirsRequest.cursor): each page carries the directory's figures and
some of its replicas, and the replicas of all pages make the whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2

PartitionKey = tuple[str, int]

# A topic name no topic has (names are 1 to 249 characters): asked alone, a broker answers its
# directories' figures and no replica, which is what an empty `topics` asks for.
NO_TOPIC = ""


@dataclass(frozen=True)
class ReplicaInfo:
    """One partition replica in a log directory (Kafka's ReplicaInfo)."""

    size: int  # bytes of its segment files
    offset_lag: int  # max(high watermark - log end offset, 0): 0 for a current replica
    is_future: bool  # always False: a Samsa broker has one log directory


@dataclass
class LogDirDescription:
    """One log directory of a broker (Kafka's LogDirDescription)."""

    error: KafkaError | None  # KAFKA_STORAGE_ERROR when its disk could not be read
    total_bytes: int  # its file system's size; -1 when unknown
    usable_bytes: int  # the bytes free there for the broker; -1 when unknown
    replicas: dict[PartitionKey, ReplicaInfo] = field(default_factory=dict)


def brokers_to_ask(asked: Iterable[int] | None, registered: Mapping[int, str]) -> dict[int, str]:
    """Each broker's endpoint, by id: every registered broker when `asked` is None, else those
    asked, in order, once each. KafkaError (BROKER_NOT_AVAILABLE) naming the ids not registered,
    before anything is sent."""
    if asked is None:
        return dict(sorted(registered.items()))
    wanted = list(dict.fromkeys(asked))
    if unknown := [broker_id for broker_id in wanted if broker_id not in registered]:
        known = ",".join(map(str, sorted(registered))) or "none"
        raise KafkaError(
            f"broker(s) {','.join(map(str, unknown))} are not registered "
            f"(registered brokers: {known})",
            ErrorCode.BROKER_NOT_AVAILABLE,
        )
    return {broker_id: registered[broker_id] for broker_id in wanted}


def log_dirs_request(
    topics: Iterable[str] | None, partition_limit: int = 0
) -> broker_pb2.DescribeLogDirsRequest:
    """The first page's request: every replica of `topics`, or every replica when None."""
    request = broker_pb2.DescribeLogDirsRequest(partition_limit=partition_limit)
    names = None if topics is None else list(dict.fromkeys(topics))
    if names is not None:
        for name in names or [NO_TOPIC]:
            request.topics.add(name=name)
    return request


def merge_page(
    described: dict[str, LogDirDescription], page: broker_pb2.DescribeLogDirsResponse
) -> None:
    """Add one page's directories and replicas to `described` (by path); a later page's
    figures replace an earlier one's, so the figures are those of the last page read."""
    for log_dir in page.log_dirs:
        error = None
        if log_dir.error_code != ErrorCode.NONE:
            error = KafkaError.of(log_dir.error_code, log_dir.error_message)
        before = described.get(log_dir.path)
        replicas = before.replicas if before is not None else {}
        for topic in log_dir.topics:
            for replica in topic.partitions:
                replicas[(topic.name, replica.partition)] = ReplicaInfo(
                    replica.size_bytes, replica.offset_lag, replica.is_future
                )
        described[log_dir.path] = LogDirDescription(
            error, log_dir.total_bytes, log_dir.usable_bytes, replicas
        )
