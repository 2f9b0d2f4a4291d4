"""What a controller's gauges say, computed from its committed metadata image (pure).

Kafka's KafkaController and QuorumController gauges:
- `active`: 1 on the active controller, 0 on a standby (ActiveControllerCount: summed over the
  quorum it must be exactly 1);
- `metadata_offset`: the offset of the last record applied here (LastAppliedRecordOffset), on
  every controller, so a lagging standby shows;
- brokers fenced and unfenced (FencedBrokerCount, ActiveBrokerCount), partitions and offline
  partitions, i.e. with no leader (GlobalPartitionCount, OfflinePartitionsCount), topics
  (GlobalTopicCount), coordinators live and fenced.

The cluster-wide counts are reported by the active controller only, zero on standbys, as Kafka
does: summing a gauge over the quorum then gives the cluster's value, never three times it.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.metadata.image import MetadataImage


@dataclass(frozen=True)
class ControllerGauges:
    active: int = 0
    metadata_offset: int = -1
    brokers_fenced: int = 0
    brokers_unfenced: int = 0
    topics: int = 0
    partitions: int = 0
    partitions_offline: int = 0
    coordinators_live: int = 0
    coordinators_fenced: int = 0


def controller_gauges(image: MetadataImage, *, active: bool) -> ControllerGauges:
    """The gauges of a controller holding `image` (cluster-wide ones only when `active`)."""
    metadata_offset = image.end_offset - 1  # end_offset is where the next record lands
    if not active:
        return ControllerGauges(metadata_offset=metadata_offset)
    fenced = sum(1 for broker in image.brokers.values() if broker.fenced)
    partitions = offline = 0
    for topic in image.topics.values():
        partitions += len(topic.partitions)
        offline += sum(1 for state in topic.partitions.values() if state.is_offline)
    coordinators_fenced = sum(1 for c in image.coordinators.values() if c.fenced)
    return ControllerGauges(
        active=1,
        metadata_offset=metadata_offset,
        brokers_fenced=fenced,
        brokers_unfenced=len(image.brokers) - fenced,
        topics=len(image.topics),
        partitions=partitions,
        partitions_offline=offline,
        coordinators_live=len(image.coordinators) - coordinators_fenced,
        coordinators_fenced=coordinators_fenced,
    )
