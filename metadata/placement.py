"""Replica placement: Kafka's assignment of partitions to brokers, with and without racks.

Leaders go round-robin over the brokers from a start index; each partition's followers follow
its leader at a shift that grows by one every time the partitions have gone once around the
brokers, so that replicas of consecutive partitions do not pile onto the same pairs of brokers.
With racks, the broker list is first interleaved rack by rack, and a follower is skipped while its
rack (or the broker itself) already holds a replica of the partition, unless every rack (or
broker) does. A broker without a rack counts as one more rack, shared by every such broker
(as in KRaft's striped placer): a cluster half-way to racks still spreads each partition over
the racks it has. Randomness (the start index and the first shift) comes in as arguments, so that
placement is deterministic given them and Kafka's published examples can be checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class PlacementError(ValueError):
    """The brokers cannot hold the replicas asked for; the message says why."""


def _replica_index(first: int, shift: int, replica: int, broker_count: int) -> int:
    step = 1 + (shift + replica) % (broker_count - 1)
    return (first + step) % broker_count


def assign_replicas(
    partition_count: int,
    replication_factor: int,
    brokers: Sequence[int],
    *,
    start_index: int,
    first_shift: int,
    first_partition: int = 0,
    racks: Mapping[int, str] | None = None,
) -> dict[int, list[int]]:
    """Partition number -> replicas (leader first) for partitions `first_partition` onwards."""
    if partition_count < 1:
        raise PlacementError(f"the partition count must be at least 1, not {partition_count}")
    if replication_factor < 1:
        raise PlacementError(f"the replication factor must be at least 1, not {replication_factor}")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"replication factor {replication_factor} is larger than the {len(brokers)} "
            "available (unfenced) brokers"
        )
    if racks is not None and _rack_aware_over(brokers, racks):
        return _rack_aware(
            partition_count,
            replication_factor,
            _racks_of(brokers, racks),
            brokers,
            start_index,
            first_shift,
            first_partition,
        )
    ordered = sorted(brokers)
    count = len(ordered)
    start = start_index % count
    shift = first_shift % count + _rounds_before(first_partition, count)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + partition_count):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        replicas = [ordered[first]]
        replicas += [
            ordered[_replica_index(first, shift, j, count)] for j in range(replication_factor - 1)
        ]
        assignment[partition] = replicas
    return assignment


def _rack_aware_over(brokers: Sequence[int], racks: Mapping[int, str]) -> bool:
    """Whether placement over `brokers` is rack-aware: when any one of them has a rack."""
    return any(racks.get(broker) for broker in brokers)


def _racks_of(brokers: Sequence[int], racks: Mapping[int, str]) -> dict[int, str]:
    """Each broker's rack, "" (one rack of their own) for the brokers without one."""
    return {broker: racks.get(broker) or "" for broker in brokers}


def leader_start_index(
    leader: int, brokers: Sequence[int], racks: Mapping[int, str] | None = None
) -> int | None:
    """The `start_index` under which `assign_replicas` gives partition 0 to `leader` (None when
    it is not among `brokers`). Partition additions pass it, so the new partitions' leaders
    continue the topic's round-robin (Kafka's addPartitions starts from partition 0's leader).
    With racks, leaders go round the rack-alternated list, not the brokers by id: an index in
    the latter restarts the round elsewhere, and some brokers lead a partition more than others.
    """
    if racks is not None and _rack_aware_over(brokers, racks):
        order = rack_alternated(_racks_of(brokers, racks), brokers)
    else:
        order = sorted(brokers)
    return order.index(leader) if leader in order else None


def _rounds_before(first_partition: int, count: int) -> int:
    """Shift increments that partitions 1 .. first_partition - 1 would have made."""
    return (first_partition - 1) // count if first_partition > 0 else 0


def rack_alternated(racks: Mapping[int, str], brokers: Sequence[int]) -> list[int]:
    """Brokers interleaved by rack: first of rack a, first of rack b, second of rack a, …"""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(brokers):
        for queue in queues:
            if depth < len(queue):
                result.append(queue[depth])
        depth += 1
    return result


def _rack_aware(
    partition_count: int,
    replication_factor: int,
    racks: Mapping[int, str],
    brokers: Sequence[int],
    start_index: int,
    first_shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    arranged = rack_alternated(racks, brokers)
    count = len(arranged)
    rack_count = len({racks[broker] for broker in brokers})
    start = start_index % count
    shift = first_shift % count + _rounds_before(first_partition, count)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + partition_count):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        while len(replicas) < replication_factor:
            broker = arranged[_replica_index(first, shift * rack_count, k, count)]
            k += 1
            rack_ok = racks[broker] not in racks_used or len(racks_used) == rack_count
            if rack_ok and broker not in replicas:
                replicas.append(broker)
                racks_used.add(racks[broker])
        assignment[partition] = replicas
    return assignment
