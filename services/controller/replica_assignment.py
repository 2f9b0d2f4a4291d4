"""Replicas placed by hand: CreateTopics' and CreatePartitions' `assignments` (Kafka's
`kafka-topics.sh --replica-assignment`). Pure.

Theory of operation. Kafka lets an operator name each partition's replicas instead of letting
the controller place them (racks or disks the controller does not know about, a layout copied
from another cluster). `manual_assignment` checks such a plan the way Kafka's controller does and
answers either the partition -> replicas map, in the given order (the first replica is the
preferred leader), or why it cannot be placed, with what to change:

- no count or factor beside it (INVALID_REQUEST): the plan says both, and two answers to one
  question would leave it to us which one wins;
- partition indexes exactly 0..n-1, each once, n at most `limits.topic_partitions_max`;
- each list non-empty, distinct, at most `limits.replication_factor_max` registered brokers, and
  every list as long as the others: Kafka keeps one replication factor per topic, which
  CreatePartitions and the min.insync.replicas checks rely on.

CreatePartitions' plan (`added_assignment`) is one list per new partition, in order, each as
long as the topic's replication factor, checked list by list the same way.

Fenced brokers (registered, not live) may be named, as Kafka allows: the plan is the operator's
and a broker restarting or in controlled shutdown at that moment is still part of it. The
partition starts with the live replicas as its ISR and the first of them leading; a fenced
replica follows once it is back and joins the ISR when caught up, as a replica a reassignment
adds does (AlterPartition). A partition with no live replica is refused: it would start offline,
with nobody to take writes, and nothing would ever bring it online but a broker's return.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence, Set

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

Problem = tuple[ErrorCode, str]
NOT_GIVEN = (-1, 0)  # a count or factor left to the plan: -1 as in Kafka, 0 unset on the wire


def manual_assignment(
    topic: c.CreateTopicsRequest.Topic, registered: Collection[int], live: Set[int]
) -> dict[int, list[int]] | Problem:
    """`topic.assignments` as partition -> replicas, or why they cannot be placed (see the
    module doc). `registered`: every registered broker id; `live`: the unfenced ones."""
    if topic.num_partitions not in NOT_GIVEN or topic.replication_factor not in NOT_GIVEN:
        return (
            ErrorCode.INVALID_REQUEST,
            f"num_partitions={topic.num_partitions} and replication_factor="
            f"{topic.replication_factor} are given with a replica assignment, which sets both: "
            "leave them at -1",
        )
    count = len(topic.assignments)
    if count > limits.topic_partitions_max:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"the replica assignment has {count} partitions; at most "
            f"{limits.topic_partitions_max} (limits.topic_partitions_max)",
        )
    plan: dict[int, list[int]] = {}
    for item in topic.assignments:
        if item.partition_index in plan:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {item.partition_index} is assigned more than once: give each "
                "partition one replica list",
            )
        plan[item.partition_index] = list(item.broker_ids)
    if set(plan) != set(range(count)):
        wrong = sorted(set(plan) - set(range(count)))
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"the replica assignment names partitions {wrong}: partitions are numbered 0 to "
            f"{count - 1} here (one list per partition, from 0, without gaps)",
        )
    factor = len(plan[0])
    for index in range(count):
        problem = replica_list_problem(index, plan[index], factor, registered, live)
        if problem is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
    return plan


def added_assignment(
    wanted: c.CreatePartitionsRequest.Topic,
    current: int,
    factor: int,
    registered: Collection[int],
    live: Set[int],
) -> dict[int, list[int]] | Problem:
    """CreatePartitions' `assignments` as partition -> replicas for the partitions from
    `current` on (one list per new partition, in order, each of the topic's replication factor
    `factor`), or why they cannot be placed. The count is the caller's to check first."""
    added = wanted.count - current
    if len(wanted.assignments) != added:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"{len(wanted.assignments)} replica lists for the {added} partitions added to "
            f"{wanted.name!r} ({current} -> {wanted.count}): give one per new partition, in order",
        )
    plan: dict[int, list[int]] = {}
    for index, item in enumerate(wanted.assignments, start=current):
        problem = replica_list_problem(index, item.broker_ids, factor, registered, live)
        if problem is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        plan[index] = list(item.broker_ids)
    return plan


def replica_list_problem(
    index: int, replicas: Sequence[int], factor: int, registered: Collection[int], live: Set[int]
) -> str | None:
    """Why `replicas` cannot be partition `index`'s in a topic of replication factor `factor`
    (partition 0's list length), or None."""
    where = f"partition {index}"
    if not replicas:
        return f"the replica list of {where} is empty: name at least one broker"
    if len(replicas) > limits.replication_factor_max:
        return (
            f"the replica list of {where} names {len(replicas)} brokers; at most "
            f"{limits.replication_factor_max} (limits.replication_factor_max)"
        )
    if len(set(replicas)) != len(replicas):
        return f"the replica list {list(replicas)} of {where} names a broker more than once"
    unknown = [r for r in replicas if r not in registered]
    if unknown:
        return (
            f"the replica list {list(replicas)} of {where} names brokers {unknown} that are not "
            "registered (see `samsa cluster` for the brokers)"
        )
    if len(replicas) != factor:
        return (
            f"the replica list {list(replicas)} of {where} has {len(replicas)} replicas but "
            f"partition 0 has {factor}: every partition of a topic has the same replication "
            "factor"
        )
    if not any(r in live for r in replicas):
        return (
            f"every replica of {where} ({list(replicas)}) is on a fenced broker: name at least "
            "one live broker, so that the partition has a leader"
        )
    return None


def partition_records(
    topic_id: bytes, assignment: Mapping[int, Sequence[int]], live: Set[int]
) -> list[m.MetadataRecord]:
    """New partitions' records: the replicas in the given order, the live ones in sync, the
    first live one leading (the first replica whenever it is live, the preferred leader)."""
    records = []
    for partition, replicas in sorted(assignment.items()):
        isr = [r for r in replicas if r in live]
        record = m.PartitionRecord(
            topic_id=topic_id, partition=partition, replicas=replicas, isr=isr, leader=isr[0]
        )
        records.append(m.MetadataRecord(partition=record))
    return records
