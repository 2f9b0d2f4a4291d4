"""Snapshots: a whole image as the records that rebuild it, and back.

A snapshot replaces a prefix of the metadata log: a replica too far behind (or diverged) loads it
instead of the batches it missed, and a controller's Raft dump stores one. The records are in a
canonical order (brokers by id, topics by name, partitions by number, configs by key, then one
ProducerIdsRecord), so two replicas with the same image write the same snapshot. Records in a
snapshot carry the state the log built up: a broker's epoch (RegisterBrokerRecord.broker_epoch,
since the record no longer sits at that offset), a partition's leader and partition epochs, and
the next producer id. The image keeps only that id, not which broker took the last block, so the
snapshot's ProducerIdsRecord names broker -1, epoch -1 (as Kafka's ProducerIdsImage writes it);
it is left out while no block was ever given (next_producer_id 0). An unfenced broker's
registration is followed by an UnfenceBrokerRecord, one in controlled shutdown by a
FenceBrokerRecord marking it so (KIP-841: no heartbeat of that epoch may unfence it).
Coordinators follow (by id: RegisterCoordinatorRecord with its epoch, then a
FenceCoordinatorRecord when fenced), then the coordinator assignments by partition, epochs and
producer ids (and retired ones, when set) as they are; they come after the ProducerIdsRecord,
whose next_producer_id already lies above every assignment's producer id. A partition's
eligible leader replicas (KIP-966) and a reassignment in progress (KIP-455: adding and removing
replicas) ride in its PartitionRecord; none, the fields are absent, as in snapshots written
before them. Client quotas follow (the default entity first, then by client.id, keys by name),
and the ACL bindings come last, in their sort order (metadata/acl_replay.py).
"""

from __future__ import annotations

from samsa.metadata.acl_replay import snapshot_records as acl_records
from samsa.metadata.client_quotas import snapshot_records as client_quota_records
from samsa.metadata.image import NO_PRODUCER_ID, MetadataImage
from samsa.metadata.replay import ImageBuilder, MetadataReplayError
from samsa.metadata.scram_credentials import snapshot_records as scram_records
from samsa.v1 import metadata_pb2


class InvalidSnapshotError(ValueError):
    """The snapshot does not describe a consistent image."""


def to_snapshot(image: MetadataImage) -> metadata_pb2.MetadataSnapshot:
    """The snapshot of `image`."""
    records: list[metadata_pb2.MetadataRecord] = []
    for broker_id, broker in sorted(image.brokers.items()):
        records.append(
            metadata_pb2.MetadataRecord(
                register_broker=metadata_pb2.RegisterBrokerRecord(
                    broker_id=broker_id,
                    incarnation_id=broker.incarnation_id,
                    endpoint=broker.endpoint,
                    rack=broker.rack,
                    broker_epoch=broker.broker_epoch,
                    internal_endpoint=broker.internal_endpoint,
                )
            )
        )
        if not broker.fenced:
            records.append(
                metadata_pb2.MetadataRecord(
                    unfence_broker=metadata_pb2.UnfenceBrokerRecord(
                        broker_id=broker_id, broker_epoch=broker.broker_epoch
                    )
                )
            )
        elif broker.in_controlled_shutdown:
            records.append(
                metadata_pb2.MetadataRecord(
                    fence_broker=metadata_pb2.FenceBrokerRecord(
                        broker_id=broker_id,
                        broker_epoch=broker.broker_epoch,
                        in_controlled_shutdown=True,
                    )
                )
            )
    for _, topic in sorted(image.topics.items()):
        records.append(
            metadata_pb2.MetadataRecord(
                topic=metadata_pb2.TopicRecord(name=topic.name, topic_id=topic.topic_id)
            )
        )
        for _, state in sorted(topic.partitions.items()):
            records.append(
                metadata_pb2.MetadataRecord(
                    partition=metadata_pb2.PartitionRecord(
                        topic_id=topic.topic_id,
                        partition=state.partition,
                        replicas=state.replicas,
                        isr=state.isr,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        partition_epoch=state.partition_epoch,
                        eligible_leader_replicas=state.elr,
                        adding_replicas=state.adding,
                        removing_replicas=state.removing,
                    )
                )
            )
    for (resource_type, resource_name), values in sorted(image.configs.items()):
        for name, value in sorted(values.items()):
            records.append(
                metadata_pb2.MetadataRecord(
                    config=metadata_pb2.ConfigRecord(
                        resource_type=resource_type,  # type: ignore[arg-type]
                        resource_name=resource_name,
                        name=name,
                        value=value,
                    )
                )
            )
    if image.next_producer_id > 0:
        records.append(
            metadata_pb2.MetadataRecord(
                producer_ids=metadata_pb2.ProducerIdsRecord(
                    broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id
                )
            )
        )
    records += _coordinator_records(image)
    records += client_quota_records(image.client_quotas)
    records += acl_records(image.acls)
    records += scram_records(image.scram_credentials)
    return metadata_pb2.MetadataSnapshot(
        end_offset=image.end_offset,
        hash=image.hash,
        timestamp_ms=image.timestamp_ms,
        records=records,
    )


def _coordinator_records(image: MetadataImage) -> list[metadata_pb2.MetadataRecord]:
    records = []
    for coordinator_id, coordinator in sorted(image.coordinators.items()):
        records.append(
            metadata_pb2.MetadataRecord(
                register_coordinator=metadata_pb2.RegisterCoordinatorRecord(
                    coordinator_id=coordinator_id,
                    incarnation_id=coordinator.incarnation_id,
                    endpoint=coordinator.endpoint,
                    coordinator_epoch=coordinator.coordinator_epoch,
                    internal_endpoint=coordinator.internal_endpoint,
                )
            )
        )
        if coordinator.fenced:
            records.append(
                metadata_pb2.MetadataRecord(
                    fence_coordinator=metadata_pb2.FenceCoordinatorRecord(
                        coordinator_id=coordinator_id,
                        coordinator_epoch=coordinator.coordinator_epoch,
                    )
                )
            )
    for (topic, partition), assignment in sorted(image.coordinator_assignments.items()):
        record = metadata_pb2.CoordinatorAssignmentRecord(
            topic=topic,
            partition=partition,
            coordinator_id=assignment.coordinator_id,
            coordinator_epoch=assignment.coordinator_epoch,
            assignment_epoch=assignment.assignment_epoch,
            producer_id=assignment.producer_id,
        )
        if assignment.retired_producer_id != NO_PRODUCER_ID:
            record.retired_producer_id = assignment.retired_producer_id
        records.append(metadata_pb2.MetadataRecord(coordinator_assignment=record))
    return records


def from_snapshot(snapshot: metadata_pb2.MetadataSnapshot) -> MetadataImage:
    """The image a snapshot describes; InvalidSnapshotError when it is inconsistent."""
    if snapshot.end_offset < 0 or len(snapshot.hash) != 16:
        raise InvalidSnapshotError("a snapshot needs a non-negative end offset and a 16-byte hash")
    builder = ImageBuilder(MetadataImage.empty())
    try:
        for record in snapshot.records:
            builder.apply(record, snapshot.end_offset, from_snapshot=True)
    except MetadataReplayError as error:
        raise InvalidSnapshotError(f"inconsistent snapshot: {error}") from error
    return builder.build(
        end_offset=snapshot.end_offset, hash=snapshot.hash, timestamp_ms=snapshot.timestamp_ms
    )
