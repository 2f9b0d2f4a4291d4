"""Record builders for metadata tests: one short call per record kind."""

from __future__ import annotations

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.v1 import metadata_pb2 as m


def register(
    broker_id: int, endpoint: str = "", rack: str = "", incarnation: str = "i"
) -> m.MetadataRecord:
    return m.MetadataRecord(
        register_broker=m.RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=incarnation,
            endpoint=endpoint or f"127.0.0.1:{9000 + broker_id}",
            rack=rack,
        )
    )


def unfence(broker_id: int, epoch: int) -> m.MetadataRecord:
    return m.MetadataRecord(
        unfence_broker=m.UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch)
    )


def fence(broker_id: int, epoch: int, *, shutdown: bool = False) -> m.MetadataRecord:
    """`shutdown`: marked in controlled shutdown (KIP-841)."""
    record = m.FenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch)
    if shutdown:
        record.in_controlled_shutdown = True
    return m.MetadataRecord(fence_broker=record)


def topic(name: str, topic_id: bytes) -> m.MetadataRecord:
    return m.MetadataRecord(topic=m.TopicRecord(name=name, topic_id=topic_id))


def partition(
    topic_id: bytes, number: int, replicas: list[int], leader: int | None = None
) -> m.MetadataRecord:
    return m.MetadataRecord(
        partition=m.PartitionRecord(
            topic_id=topic_id,
            partition=number,
            replicas=replicas,
            isr=replicas,
            leader=replicas[0] if leader is None else leader,
        )
    )


def change(topic_id: bytes, number: int, **fields: object) -> m.MetadataRecord:
    record = m.PartitionChangeRecord(topic_id=topic_id, partition=number)
    if "leader" in fields:
        record.leader = fields["leader"]  # type: ignore[assignment]
    if "isr" in fields:
        record.isr.ids.extend(fields["isr"])  # type: ignore[arg-type]
    if "replicas" in fields:
        record.replicas.ids.extend(fields["replicas"])  # type: ignore[arg-type]
    if "elr" in fields:  # eligible leader replicas (KIP-966)
        record.eligible_leader_replicas.ids.extend(fields["elr"])  # type: ignore[arg-type]
    return m.MetadataRecord(partition_change=record)


def config(resource_type: int, name: str, key: str, value: str | None) -> m.MetadataRecord:
    record = m.ConfigRecord(resource_type=resource_type, resource_name=name, name=key)  # type: ignore[arg-type]
    if value is not None:
        record.value = value
    return m.MetadataRecord(config=record)


def remove(topic_id: bytes) -> m.MetadataRecord:
    return m.MetadataRecord(remove_topic=m.RemoveTopicRecord(topic_id=topic_id))


def apply(image: MetadataImage, *records: m.MetadataRecord, now_ms: int = 1000) -> MetadataImage:
    return replay(image, make_batch(image, list(records), now_ms))
