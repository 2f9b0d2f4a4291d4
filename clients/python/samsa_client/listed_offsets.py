"""Admin.list_offsets, the pure half: what the caller asks for into ListOffsets specs, and the
leaders' answers into `ListedOffset` (Kafka's ListOffsetsResultInfo).

A spec is what Kafka's OffsetSpec names: "earliest" (the log start offset), "latest" (the high
watermark, or under read_committed the last stable offset), "max_timestamp" (the record with the
largest timestamp, KIP-734) or a timestamp in ms (the first record at or after it).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.v1 import broker_pb2, records_pb2

OffsetSpec = str | int  # "earliest", "latest", "max_timestamp", or a timestamp in ms
K = TypeVar("K")
TIMESTAMP_MAX = 2**63 - 1  # int64, the field's type

NAMED_SPECS = {
    "earliest": broker_pb2.OFFSET_SPEC_EARLIEST,
    "latest": broker_pb2.OFFSET_SPEC_LATEST,
    "max_timestamp": broker_pb2.OFFSET_SPEC_MAX_TIMESTAMP,
}
ISOLATION_LEVELS = {
    "read_uncommitted": records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED,
    "read_committed": records_pb2.ISOLATION_LEVEL_READ_COMMITTED,
}


@dataclass(frozen=True)
class ListedOffset:
    """One partition's answer. `offset` and `timestamp` are -1 when a timestamp or
    max_timestamp lookup found no record (none at or after it, or the partition holds none
    the asker may read); `timestamp` is -1 for earliest and latest. `leader_epoch` is the
    leader's epoch when it answered (KIP-320), None when it did not say."""

    offset: int
    timestamp: int
    leader_epoch: int | None


# ListOffsets errors after which the leader is looked up again and the lookup retried.
LIST_OFFSETS_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,  # a leader just elected: ask it again shortly
        ErrorCode.UNKNOWN_TOPIC_ID,  # deleted and created again: the refresh shows the new id
    }
)


def offset_spec_of(spec: OffsetSpec) -> tuple[int, int]:
    """(OffsetSpec enum, timestamp_ms) for one partition's spec; ValueError saying what is
    accepted for anything else."""
    if isinstance(spec, bool):  # bool is an int: True is no timestamp
        raise ValueError(f"offset spec {spec!r}: {_ACCEPTED}")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"offset spec {spec}: a timestamp is ms since the epoch (≥ 0)")
        return broker_pb2.OFFSET_SPEC_TIMESTAMP, spec
    if isinstance(spec, str):
        named = NAMED_SPECS.get(spec.strip().lower().replace("-", "_"))
        if named is not None:
            return named, -1
    raise ValueError(f"offset spec {spec!r}: {_ACCEPTED}")


_ACCEPTED = "use 'earliest', 'latest', 'max_timestamp' or a timestamp in ms"


def timestamp_specs(timestamps: Mapping[K, int]) -> dict[K, tuple[int, int]]:
    """A consumer's offsets_for_times, as specs per partition; ValueError for a timestamp that
    is not an int (a numpy integer is one, as for send()) from 0 to int64's largest, as Kafka's
    consumer refuses a negative target time."""
    specs = {}
    for partition, timestamp in timestamps.items():
        is_int = not isinstance(timestamp, bool) and hasattr(timestamp, "__index__")
        if not is_int or not 0 <= operator.index(timestamp) <= TIMESTAMP_MAX:
            raise ValueError(
                f"the target time for {partition} is {timestamp!r}: it must be an int of ms "
                "since the epoch, >= 0 (an int64)"
            )
        specs[partition] = (broker_pb2.OFFSET_SPEC_TIMESTAMP, operator.index(timestamp))
    return specs


def isolation_of(level: str) -> int:
    """The IsolationLevel enum for Kafka's isolation.level name."""
    found = ISOLATION_LEVELS.get(level)
    if found is None:
        raise InvalidConfigError(
            f"isolation_level {level!r}: use 'read_uncommitted' or 'read_committed'"
        )
    return found


def listed_offset_of(answer: broker_pb2.ListOffsetsResponse.PartitionResponse) -> ListedOffset:
    """A partition's answer, which must not be an error."""
    assert answer.error_code == ErrorCode.NONE, answer.error_message
    epoch = answer.leader_epoch if answer.leader_epoch >= 0 else None
    return ListedOffset(answer.offset, answer.timestamp_ms, epoch)


def list_offsets_request(
    specs: Mapping[tuple[str, int], tuple[int, int]],
    isolation: int,
    topic_ids: Mapping[str, bytes] | None = None,
) -> broker_pb2.ListOffsetsRequest:
    """ListOffsets for `specs` ((OffsetSpec, timestamp) per partition); under read_committed
    the latest offset is the last stable offset. `topic_ids`: each topic's id as the metadata
    shows it (KIP-516), so that a broker still hosting a deleted topic of that name answers
    UNKNOWN_TOPIC_ID rather than the old log's offsets; a topic without one is not checked."""
    by_topic: dict[str, list[broker_pb2.ListOffsetsRequest.PartitionData]] = {}
    for (topic, partition), (spec, timestamp) in specs.items():
        by_topic.setdefault(topic, []).append(
            broker_pb2.ListOffsetsRequest.PartitionData(
                partition=partition,
                offset_spec=spec,
                timestamp_ms=timestamp,  # type: ignore[arg-type]
            )
        )
    return broker_pb2.ListOffsetsRequest(
        isolation_level=isolation,  # type: ignore[arg-type]
        topics=[
            broker_pb2.ListOffsetsRequest.TopicData(
                name=t, partitions=p, topic_id=(topic_ids or {}).get(t, b"")
            )
            for t, p in by_topic.items()
        ],
    )
