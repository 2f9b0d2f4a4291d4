"""What a broker's gauges say, computed from the partitions it hosts (pure).

Kafka's ReplicaManager gauges, for the partitions of one broker:
- partitions led and followed (LeaderCount, and PartitionCount minus it);
- under-replicated partitions: led here, with an ISR smaller than the replica set
  (UnderReplicatedPartitions);
- under-min-ISR partitions: led here, with an ISR smaller than min.insync.replicas, so acks=all
  produce is refused (UnderMinIsrPartitionCount);
- producer ids in use: the entries of the producer state tables beside the logs, summed over the
  hosted replicas as Kafka's ProducerIdCount does (a producer writing to three partitions here
  counts three times: that is what the memory holds).

The broker computes these on its event loop every few seconds (maintenance.py) and the metrics
exporter reads the frozen result from its own thread (broker_metrics.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class HostedView(Protocol):
    """What the gauges read of a hosted partition (partition_host.HostedPartition)."""

    @property
    def topic(self) -> str: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def isr(self) -> tuple[int, ...]: ...

    @property
    def replica_count(self) -> int: ...

    @property
    def min_insync_replicas(self) -> int: ...

    @property
    def producer_count(self) -> int: ...


@dataclass(frozen=True)
class BrokerGauges:
    partitions_led: int = 0
    partitions_followed: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    producer_ids: int = 0


def broker_gauges(partitions: Iterable[HostedView]) -> BrokerGauges:
    """The gauges over every hosted partition (one pass, a few attribute reads each)."""
    led = followed = under_replicated = under_min_isr = producer_ids = 0
    for hosted in partitions:
        producer_ids += hosted.producer_count
        if not hosted.is_leader:
            followed += 1
            continue
        led += 1
        isr_size = len(hosted.isr)
        if isr_size < hosted.replica_count:
            under_replicated += 1
        if isr_size < hosted.min_insync_replicas:
            under_min_isr += 1
    return BrokerGauges(led, followed, under_replicated, under_min_isr, producer_ids)


def isr_change_counts(old_isr: Iterable[int], new_isr: Iterable[int]) -> tuple[int, int]:
    """(shrinks, expands) of one accepted ISR change, as Kafka counts them: one shrink when
    replicas left, one expand when replicas joined (both when it did both)."""
    old, new = set(old_isr), set(new_isr)
    return int(bool(old - new)), int(bool(new - old))
