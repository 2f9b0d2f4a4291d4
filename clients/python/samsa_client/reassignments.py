"""Partition reassignment (KIP-455), the pure half of Admin.alter_partition_reassignments and
Admin.list_partition_reassignments: arguments checked and turned into requests, answers turned
into results. admin.py sends the requests (controller_calls.py); nothing here does I/O.

A reassignment names a partition's target replica list, in preference order; None cancels the
one in progress (Kafka's Optional.empty()). A target is checked before anything is sent: on the
wire an empty list would read as "no target", and a string or a bool would go as something else
than the broker ids meant. A request carries at most limits.admin_request_items_max partitions
(a server refuses more, whole), so a larger call is split; every request's results are merged
before an error is raised, so one refused partition never hides another's outcome.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from samsa.client.errors import KafkaError, TopicError, first_of
from samsa.client.partition_outcomes import partition_outcomes
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

TopicPartition = tuple[str, int]
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress (Kafka's PartitionReassignment): the partition's replicas now
    (the target's and those being removed), those being added (still catching up), and those
    removed once every adding replica is in the ISR."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def checked_topic_partition(key: object) -> TopicPartition:
    """A (topic, partition) key, or TopicError saying how partitions are named."""
    if (
        not isinstance(key, tuple)
        or len(key) != 2
        or not isinstance(key[0], str)
        or isinstance(key[1], bool)
        or not isinstance(key[1], int)
        or not 0 <= key[1] <= INT32_MAX
    ):
        raise TopicError(
            f"{key!r} is not a partition: name one as (topic, partition), a str and an int >= 0",
            ErrorCode.INVALID_REQUEST,
        )
    return key[0], key[1]


def _checked_target(name: str, target: object) -> list[int]:
    """The target replica list of partition `name`, or TopicError saying what to change."""
    if isinstance(target, str | bytes) or not isinstance(target, Iterable):
        raise TopicError(
            f"partition {name}: replicas {target!r} is not a list of broker ids (None cancels)",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    replicas = list(target)
    if not replicas:
        raise TopicError(
            f"partition {name}: the target replica list is empty: name at least one broker id "
            "(None cancels the reassignment in progress)",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    for broker_id in replicas:
        if isinstance(broker_id, bool) or not isinstance(broker_id, int):
            raise TopicError(
                f"partition {name}: replica {broker_id!r} is not a broker id (an int)",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        if not 0 <= broker_id <= INT32_MAX:
            raise TopicError(
                f"partition {name}: broker id {broker_id} is out of range (0 to {INT32_MAX})",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
    if len(set(replicas)) != len(replicas):
        twice = next(b for b in replicas if replicas.count(b) > 1)
        raise TopicError(
            f"partition {name}: the target replica list {replicas} names broker {twice} twice",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    return replicas


def alter_requests(
    reassignments: Mapping[TopicPartition, Sequence[int] | None],
) -> list[c.AlterPartitionReassignmentsRequest]:
    """AlterPartitionReassignments requests for `reassignments`, in their order, at most
    admin_request_items_max partitions each; TopicError, before anything is sent, for a key or
    a target that cannot be right."""
    Partition = c.AlterPartitionReassignmentsRequest.Partition
    partitions = []
    for key, target in reassignments.items():
        topic, number = checked_topic_partition(key)
        if target is None:
            partitions.append(Partition(topic=topic, partition=number, cancel=True))
        else:
            replicas = _checked_target(f"{topic}-{number}", target)
            partitions.append(Partition(topic=topic, partition=number, replicas=replicas))
    step = limits.admin_request_items_max
    return [
        c.AlterPartitionReassignmentsRequest(partitions=partitions[start : start + step])
        for start in range(0, len(partitions), step)
    ]


def raise_partition_errors(
    requests: Sequence[c.AlterPartitionReassignmentsRequest],
    answers: Sequence[c.AlterPartitionReassignmentsResponse],
) -> None:
    """TopicError for the first partition refused (or left unanswered), once all are read; its
    `errors` names every refused partition by (topic, partition), each message naming it."""
    outcomes = partition_outcomes(requests, answers)
    errors: dict[Hashable, KafkaError] = {k: e for k, e in outcomes.items() if e is not None}
    error = first_of(errors)
    if error is not None:
        raise error


def list_requests(
    partitions: Iterable[TopicPartition] | None, min_metadata_offset: int
) -> list[c.ListPartitionReassignmentsRequest]:
    """ListPartitionReassignments requests, each answered from at least `min_metadata_offset`:
    one naming nothing (every reassignment) for None, none for no partitions (on the wire an
    empty list means all), else the partitions by topic, each once, at most
    admin_request_items_max partitions per request."""
    if partitions is None:
        return [c.ListPartitionReassignmentsRequest(min_metadata_offset=min_metadata_offset)]
    keys = list(dict.fromkeys(checked_topic_partition(key) for key in partitions))
    step = limits.admin_request_items_max
    requests = []
    for start in range(0, len(keys), step):
        by_topic: dict[str, list[int]] = {}
        for topic, number in keys[start : start + step]:
            by_topic.setdefault(topic, []).append(number)
        Topic = c.ListPartitionReassignmentsRequest.Topic
        requests.append(
            c.ListPartitionReassignmentsRequest(
                topics=[Topic(name=name, partitions=ps) for name, ps in by_topic.items()],
                min_metadata_offset=min_metadata_offset,
            )
        )
    return requests


def reassignments_of(
    answers: Iterable[c.ListPartitionReassignmentsResponse],
) -> dict[TopicPartition, PartitionReassignment]:
    """The reassignments in progress the answers list, by (topic, partition)."""
    return {
        (r.topic, r.partition): PartitionReassignment(
            tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas)
        )
        for answer in answers
        for r in answer.reassignments
    }
