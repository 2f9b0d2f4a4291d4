"""Replay: the metadata state machine, `image + batch -> image`, the same on every replica.

Theory of operation (DESIGN §2). Controllers apply committed Raft entries with `replay`; brokers
and clients apply what FetchMetadata sends them with the same function, so all of them compute
the same image at the same offset. Replay is pure and total over its input:

- a batch whose `base_offset` lies below the image's end offset is *stale* (`StaleBatchError`):
  a deposed leader generated it, or this replica applied it already. It changes nothing;
- a batch whose `base_offset` lies beyond the image's end offset (a gap), or at the right offset
  with a `previous_hash` that is not the image's hash, means this replica's log differs from the
  leader's (`MetadataDivergenceError`): the replica must reload a snapshot. A gap is never stale:
  the leader generated the batch against its image of every batch before it in the log, so a
  replica that applied that same log ends where the batch begins. One that ends elsewhere applied
  something else there, such as a batch of another record count than the quorum committed
  (pysyncobj truncating an applied entry, DESIGN §2); skipping the gap, it would skip every later
  batch alike, its image frozen for good without the hash ever being compared;
- a batch whose records do not fit the image (a partition of an unknown topic, a leader outside
  the replicas, …) is refused whole (`InvalidBatchError`, a kind of stale batch): the controller
  validates before generating, so this only happens to a batch generated against another image.
  Records are all-or-nothing per batch, like a Raft entry. Among the checks: a partition's
  eligible leader replicas (KIP-966) are distinct replicas outside its ISR, so a change moving
  one into the ISR sets both lists; a change without them keeps them (older logs have none).
  A reassignment's adding and removing replicas (KIP-455) are disjoint sets of replicas.

Records naming a broker epoch that is no longer the broker's (a FenceBroker racing a
re-registration) are applied as no-ops: they are valid history, just overtaken. So is an
UnfenceBroker for a registration in controlled shutdown (a FenceBroker with
`in_controlled_shutdown`, KIP-841): only a new registration clears that mark. A
ProducerIdsRecord is the exception: its block was answered once committed, so it always moves
`next_producer_id` on, and one that would not move it forward is refused.

Coordinators (DESIGN §5, §6) register live; a FenceCoordinatorRecord naming an older epoch is a
no-op, like a broker's. A CoordinatorAssignmentRecord is stricter, because its assignment epoch
is the producer epoch a coordinator writes its coordinator topic (`__consumer_offsets` or
`__transaction_state`; a record without a topic names `__consumer_offsets`, as every record did
before transactions) with: one whose topic is not a coordinator topic, whose assignment epoch
does not move forward, whose partition does not exist, or whose coordinator (other than -1) is
not registered and unfenced under that epoch is refused, and so is one whose new producer id
lies below `next_producer_id` (it could belong to a block a broker already holds). A partition
keeps its producer id until it rotates (coordinator_control.py): a record with another producer
id must name the partition's current one as `retired_producer_id`, and every later record must
name the same retired id until the next rotation, so each owner knows which id to fence. A
record without the field retires nothing. A partition's first producer id, and each new one,
moves `next_producer_id` past it. A ClientQuotaRecord must name an entity and one of Kafka's
two keys, with a whole value > 0 to set (metadata/client_quotas.py); ACL records: acl_replay.py;
SCRAM credentials: scram_credentials.py.
"""

from __future__ import annotations

from dataclasses import replace

from samsa.metadata.acl_replay import AclChanges, AclReplay
from samsa.metadata.client_quotas import ClientQuotaReplay
from samsa.metadata.coordinators import COORDINATOR_TOPICS, NO_COORDINATOR, assignment_topic
from samsa.metadata.image import (
    BROKER_RESOURCE,
    NO_PRODUCER_ID,
    TOPIC_RESOURCE,
    BrokerRegistration,
    CoordinatorAssignment,
    CoordinatorRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.metadata.records import chain_hash
from samsa.metadata.scram_credentials import ScramReplay
from samsa.v1 import metadata_pb2


class MetadataReplayError(Exception):
    """A batch could not be applied; the image is unchanged."""


class StaleBatchError(MetadataReplayError):
    """The batch starts below the image's end offset; skip it."""


class InvalidBatchError(StaleBatchError):
    """The batch's records do not fit the image; skip it whole."""


class MetadataDivergenceError(MetadataReplayError):
    """The batch was generated against a log that differs from this replica's."""


def replay(image: MetadataImage, batch: metadata_pb2.MetadataRecordBatch) -> MetadataImage:
    """The image after `batch` (see the module docstring for the errors)."""
    if batch.base_offset < image.end_offset:
        raise StaleBatchError(
            f"batch at offset {batch.base_offset}, the image ends at {image.end_offset}"
        )
    if batch.base_offset > image.end_offset:
        raise MetadataDivergenceError(
            f"batch at offset {batch.base_offset}, beyond the image's end {image.end_offset}: "
            "this replica lacks records the leader had applied, or applied others in their place"
        )
    if batch.previous_hash != image.hash:
        raise MetadataDivergenceError(
            f"at offset {image.end_offset} the batch expects hash {batch.previous_hash.hex()}, "
            f"this replica has {image.hash.hex()}"
        )
    if not batch.records:
        raise InvalidBatchError(f"the batch at offset {batch.base_offset} has no records")
    builder = ImageBuilder(image)
    for index, record in enumerate(batch.records):
        builder.apply(record, batch.base_offset + index, from_snapshot=False)
    return builder.build(
        end_offset=batch.base_offset + len(batch.records),
        hash=chain_hash(image.hash, batch.records),
        timestamp_ms=batch.timestamp_ms,
    )


class ImageBuilder(AclReplay, ClientQuotaReplay, ScramReplay):
    """A mutable copy of an image's maps; unchanged topics and brokers are shared, not copied.
    A builder makes one image: `build` hands its maps to that image, so it is not used again."""

    record_error = InvalidBatchError

    def __init__(self, image: MetadataImage) -> None:
        self.brokers = dict(image.brokers)
        self.topics = dict(image.topics)
        self.topic_names = dict(image.topic_names)
        self.configs = dict(image.configs)
        self.next_producer_id = image.next_producer_id
        self.coordinators = dict(image.coordinators)
        self.coordinator_assignments = dict(image.coordinator_assignments)
        self.client_quotas = dict(image.client_quotas)
        self.acls = AclChanges(image.acls)
        self.scram_credentials = dict(image.scram_credentials)
        # Partition maps this builder made (a copy of the old image's, or a new topic's), by topic
        # name. No image holds them until `build`, so later records of the batch change them in
        # place: P partitions of one topic cost O(P), not O(P²), and the old image is never touched.
        self._own_partitions: dict[str, dict[int, PartitionState]] = {}

    def build(self, *, end_offset: int, hash: bytes, timestamp_ms: int) -> MetadataImage:
        return MetadataImage(
            end_offset=end_offset,
            hash=hash,
            timestamp_ms=timestamp_ms,
            brokers=self.brokers,
            topics=self.topics,
            topic_names=self.topic_names,
            configs=self.configs,
            next_producer_id=self.next_producer_id,
            coordinators=self.coordinators,
            coordinator_assignments=self.coordinator_assignments,
            client_quotas=self.client_quotas,
            acls=self.acls.build(),
            scram_credentials=self.scram_credentials,
        )

    def apply(
        self, record: metadata_pb2.MetadataRecord, offset: int, *, from_snapshot: bool
    ) -> None:
        kind = record.WhichOneof("record")
        if kind is None:
            raise InvalidBatchError(f"the record at offset {offset} is empty (unknown kind?)")
        getattr(self, f"_{kind}")(getattr(record, kind), offset, from_snapshot)

    # --- brokers ----------------------------------------------------------------------------

    def _register_broker(
        self, record: metadata_pb2.RegisterBrokerRecord, offset: int, from_snapshot: bool
    ) -> None:
        if record.broker_id < 0 or not record.endpoint:
            raise InvalidBatchError(f"broker registration at {offset} lacks an id or endpoint")
        self.brokers[record.broker_id] = BrokerRegistration(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            endpoint=record.endpoint,
            rack=record.rack,
            broker_epoch=record.broker_epoch if from_snapshot else offset,
            fenced=True,
            internal_endpoint=record.internal_endpoint,
        )

    def _current(self, broker_id: int, broker_epoch: int) -> BrokerRegistration | None:
        broker = self.brokers.get(broker_id)
        return broker if broker is not None and broker.broker_epoch == broker_epoch else None

    def _unregister_broker(
        self, record: metadata_pb2.UnregisterBrokerRecord, offset: int, from_snapshot: bool
    ) -> None:
        if self._current(record.broker_id, record.broker_epoch) is not None:
            del self.brokers[record.broker_id]

    def _fence_broker(
        self, record: metadata_pb2.FenceBrokerRecord, offset: int, from_snapshot: bool
    ) -> None:
        broker = self._current(record.broker_id, record.broker_epoch)
        if broker is not None:
            shutting_down = broker.in_controlled_shutdown or record.in_controlled_shutdown
            self.brokers[record.broker_id] = replace(
                broker, fenced=True, in_controlled_shutdown=shutting_down
            )

    def _unfence_broker(
        self, record: metadata_pb2.UnfenceBrokerRecord, offset: int, from_snapshot: bool
    ) -> None:
        broker = self._current(record.broker_id, record.broker_epoch)
        if broker is not None and not broker.in_controlled_shutdown:
            self.brokers[record.broker_id] = replace(broker, fenced=False)

    # --- topics and partitions --------------------------------------------------------------

    def _topic(self, record: metadata_pb2.TopicRecord, offset: int, from_snapshot: bool) -> None:
        if not record.name or len(record.topic_id) != 16:
            raise InvalidBatchError(f"topic record at {offset} lacks a name or a 16-byte id")
        if record.name in self.topics or record.topic_id in self.topic_names:
            raise InvalidBatchError(f"topic {record.name!r} (record at {offset}) already exists")
        partitions: dict[int, PartitionState] = {}
        self._own_partitions[record.name] = partitions
        self.topics[record.name] = TopicImage(record.name, record.topic_id, partitions)
        self.topic_names[record.topic_id] = record.name

    def _topic_of(self, topic_id: bytes, offset: int) -> TopicImage:
        name = self.topic_names.get(topic_id)
        if name is None:
            raise InvalidBatchError(f"record at {offset} names unknown topic id {topic_id.hex()}")
        return self.topics[name]

    def _partition(
        self, record: metadata_pb2.PartitionRecord, offset: int, from_snapshot: bool
    ) -> None:
        topic = self._topic_of(record.topic_id, offset)
        if record.partition < 0 or record.partition in topic.partitions:
            raise InvalidBatchError(
                f"partition {record.partition} of {topic.name!r} (record at {offset}) is invalid "
                "or exists"
            )
        state = PartitionState(
            partition=record.partition,
            replicas=tuple(record.replicas),
            isr=tuple(record.isr),
            leader=record.leader,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            elr=tuple(record.eligible_leader_replicas),
            adding=tuple(record.adding_replicas),
            removing=tuple(record.removing_replicas),
        )
        _check_partition(state, topic.name, offset)
        self._put_partition(topic, state)

    def _partition_change(
        self, record: metadata_pb2.PartitionChangeRecord, offset: int, from_snapshot: bool
    ) -> None:
        topic = self._topic_of(record.topic_id, offset)
        state = topic.partitions.get(record.partition)
        if state is None:
            raise InvalidBatchError(
                f"change of unknown partition {topic.name}-{record.partition} at {offset}"
            )
        changed = state
        if record.HasField("replicas"):
            changed = replace(changed, replicas=tuple(record.replicas.ids))
        if record.HasField("isr"):
            changed = replace(changed, isr=tuple(record.isr.ids))
        if record.HasField("eligible_leader_replicas"):
            changed = replace(changed, elr=tuple(record.eligible_leader_replicas.ids))
        if record.HasField("adding_replicas"):
            changed = replace(changed, adding=tuple(record.adding_replicas.ids))
        if record.HasField("removing_replicas"):
            changed = replace(changed, removing=tuple(record.removing_replicas.ids))
        if record.HasField("leader"):
            changed = replace(changed, leader=record.leader, leader_epoch=state.leader_epoch + 1)
        if changed is state:
            raise InvalidBatchError(f"partition change at {offset} changes nothing")
        changed = replace(changed, partition_epoch=state.partition_epoch + 1)
        _check_partition(changed, topic.name, offset)
        self._put_partition(topic, changed)

    def _put_partition(self, topic: TopicImage, state: PartitionState) -> None:
        partitions = self._own_partitions.get(topic.name)
        if partitions is None:  # the first change of this topic in the batch: copy it once
            partitions = self._own_partitions[topic.name] = dict(topic.partitions)
        partitions[state.partition] = state
        if topic.partitions is not partitions:
            self.topics[topic.name] = replace(topic, partitions=partitions)

    def _remove_topic(
        self, record: metadata_pb2.RemoveTopicRecord, offset: int, from_snapshot: bool
    ) -> None:
        topic = self._topic_of(record.topic_id, offset)
        del self.topics[topic.name]
        del self.topic_names[topic.topic_id]
        self._own_partitions.pop(topic.name, None)
        self.configs.pop((TOPIC_RESOURCE, topic.name), None)
        if topic.name in COORDINATOR_TOPICS:  # the controller refuses this; stay consistent
            for key in [key for key in self.coordinator_assignments if key[0] == topic.name]:
                del self.coordinator_assignments[key]

    # --- configs ----------------------------------------------------------------------------

    def _config(self, record: metadata_pb2.ConfigRecord, offset: int, from_snapshot: bool) -> None:
        if record.resource_type == TOPIC_RESOURCE:
            if record.resource_name not in self.topics:
                raise InvalidBatchError(
                    f"config record at {offset} names unknown topic {record.resource_name!r}"
                )
        elif record.resource_type != BROKER_RESOURCE:
            raise InvalidBatchError(f"config record at {offset} has no resource type")
        if not record.name:
            raise InvalidBatchError(f"config record at {offset} has no config name")
        key = (record.resource_type, record.resource_name)
        values = dict(self.configs.get(key, {}))
        if record.HasField("value"):
            values[record.name] = record.value
        else:
            values.pop(record.name, None)
        if values:
            self.configs[key] = values
        else:
            self.configs.pop(key, None)

    # --- producer ids -------------------------------------------------------------------------

    def _producer_ids(
        self, record: metadata_pb2.ProducerIdsRecord, offset: int, from_snapshot: bool
    ) -> None:
        # Only ever forward: a record that does not move next_producer_id up would hand out ids
        # (or none) that lie in blocks already given, so no replica may apply it (Kafka's
        # ProducerIdControlManager.replay refuses it the same way). A snapshot names no owner.
        if not from_snapshot and record.broker_id < 0:
            raise InvalidBatchError(f"producer ids record at {offset} names no broker")
        if record.next_producer_id <= self.next_producer_id:
            raise InvalidBatchError(
                f"producer ids record at {offset} moves next_producer_id from "
                f"{self.next_producer_id} to {record.next_producer_id}; it only grows"
            )
        self.next_producer_id = record.next_producer_id

    # --- coordinators --------------------------------------------------------------------------

    def _register_coordinator(
        self, record: metadata_pb2.RegisterCoordinatorRecord, offset: int, from_snapshot: bool
    ) -> None:
        if record.coordinator_id < 0 or not record.endpoint:
            raise InvalidBatchError(f"coordinator registration at {offset} lacks an id or endpoint")
        self.coordinators[record.coordinator_id] = CoordinatorRegistration(
            coordinator_id=record.coordinator_id,
            incarnation_id=record.incarnation_id,
            endpoint=record.endpoint,
            coordinator_epoch=record.coordinator_epoch if from_snapshot else offset,
            fenced=False,
            internal_endpoint=record.internal_endpoint,
        )

    def _fence_coordinator(
        self, record: metadata_pb2.FenceCoordinatorRecord, offset: int, from_snapshot: bool
    ) -> None:
        coordinator = self.coordinators.get(record.coordinator_id)
        if coordinator is not None and coordinator.coordinator_epoch == record.coordinator_epoch:
            self.coordinators[record.coordinator_id] = replace(coordinator, fenced=True)

    def _coordinator_assignment(
        self, record: metadata_pb2.CoordinatorAssignmentRecord, offset: int, from_snapshot: bool
    ) -> None:
        name = assignment_topic(record.topic)
        where = f"coordinator assignment of partition {record.partition} of {name} at {offset}"
        if name not in COORDINATOR_TOPICS:
            raise InvalidBatchError(f"{where}: {name!r} is not a coordinator topic")
        topic = self.topics.get(name)
        if topic is None or record.partition not in topic.partitions:
            raise InvalidBatchError(f"{where}: no such partition of {name}")
        if record.producer_id < 0:
            raise InvalidBatchError(f"{where}: producer id {record.producer_id} is negative")
        retired = _retired_producer_id(record)
        if retired < NO_PRODUCER_ID:
            raise InvalidBatchError(f"{where}: retired producer id {retired} is invalid")
        previous = self.coordinator_assignments.get((name, record.partition))
        if not from_snapshot:
            _check_assignment(record, previous, self.coordinators, self.next_producer_id, where)
        self.coordinator_assignments[(name, record.partition)] = CoordinatorAssignment(
            topic=name,
            partition=record.partition,
            coordinator_id=record.coordinator_id,
            coordinator_epoch=record.coordinator_epoch,
            assignment_epoch=record.assignment_epoch,
            producer_id=record.producer_id,
            retired_producer_id=retired,
        )
        self.next_producer_id = max(self.next_producer_id, record.producer_id + 1)


def _check_assignment(
    record: metadata_pb2.CoordinatorAssignmentRecord,
    previous: CoordinatorAssignment | None,
    coordinators: dict[int, CoordinatorRegistration],
    next_producer_id: int,
    where: str,
) -> None:
    """Refuse an assignment that does not follow `previous` (see the module docstring)."""
    rotated = previous is not None and record.producer_id != previous.producer_id
    if previous is None or rotated:
        first_epoch, retired = 0, NO_PRODUCER_ID if previous is None else previous.producer_id
    else:
        first_epoch, retired = previous.assignment_epoch + 1, previous.retired_producer_id
    if record.assignment_epoch < first_epoch:
        raise InvalidBatchError(
            f"{where}: assignment epoch {record.assignment_epoch} does not move forward "
            f"(at least {first_epoch})"
        )
    named = _retired_producer_id(record)
    if rotated and named != retired:
        raise InvalidBatchError(
            f"{where}: producer id {record.producer_id} is not the partition's {retired}, "
            "and the record does not retire that one"
        )
    if named != retired:
        raise InvalidBatchError(
            f"{where}: retired producer id {named} is not {retired}, the partition's until "
            "its producer id rotates"
        )
    if (previous is None or rotated) and record.producer_id < next_producer_id:
        raise InvalidBatchError(
            f"{where}: producer id {record.producer_id} lies below next_producer_id "
            f"{next_producer_id} and may already be handed out"
        )
    if record.coordinator_id == NO_COORDINATOR:
        return
    coordinator = coordinators.get(record.coordinator_id)
    if (
        coordinator is None
        or coordinator.fenced
        or coordinator.coordinator_epoch != record.coordinator_epoch
    ):
        raise InvalidBatchError(
            f"{where}: coordinator {record.coordinator_id} epoch {record.coordinator_epoch} is "
            "not registered and live"
        )


def _retired_producer_id(record: metadata_pb2.CoordinatorAssignmentRecord) -> int:
    """The record's retired producer id: NO_PRODUCER_ID when unset, as in every record written
    before producer ids rotated."""
    if record.HasField("retired_producer_id"):
        return record.retired_producer_id
    return NO_PRODUCER_ID


def _check_partition(state: PartitionState, topic: str, offset: int) -> None:
    problem = state.problem()
    if problem is not None:
        raise InvalidBatchError(f"{topic}-{state.partition} (record at {offset}): {problem}")
