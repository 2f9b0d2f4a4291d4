"""Coordinator lifecycle and ownership of the coordinator topics (__consumer_offsets for groups,
__transaction_state for transactional ids): registration, heartbeats, fencing, creating the
internal topics, and giving their partitions to live coordinators (DESIGN §1, §5, §6).

Pure decisions over the committed image (see control_plane.py). The rules:

- A coordinator registers live (it has no replicas to catch up); its coordinator epoch is the
  offset of its RegisterCoordinatorRecord. A second process with the same id and another
  incarnation is refused (DUPLICATE_BROKER_REGISTRATION) while the registered one is unfenced
  and heartbeating; a restart (its session is stale) re-registers, and the old incarnation's
  assignments stop being valid at once, since they name the old epoch.
- Sessions live in leader memory (liveness.py, a BrokerLiveness of coordinator ids), never in
  the log; an expired session, or a heartbeat asking for shutdown, fences the coordinator. A fenced
  coordinator owns nothing and must register again.
- `plan_coordinator_topics` creates each missing coordinator topic (compacted, placed like any
  topic) once a coordinator is live and enough brokers are unfenced for its replication factor:
  Kafka's `offsets.topic.*` and `transaction.state.log.*` settings. Both usually appear in the
  same batch; each waits only for its own replication factor.
- `plan_coordinator_assignments` works on each coordinator topic on its own, in
  COORDINATOR_TOPICS order: it gives every partition whose assignment is not valid (never
  assigned, owner fenced, re-registered or gone) to the live coordinator with the fewest
  partitions of that topic (ties: the lowest id), then moves partitions, highest-numbered first,
  from the most to the least loaded coordinator until their counts differ by at most one. Each
  change of owner is one CoordinatorAssignmentRecord (naming the topic) with assignment epoch + 1
  (0 the first time) and the partition's producer id, taken from next_producer_id at its first
  assignment: the owner writes the partition with (producer id, assignment epoch), so the broker
  fences any write of an earlier owner. With no live coordinator, partitions whose owner died go
  to -1.
- The producer epoch is an int16 (limits.producer_epoch_max), and a coordinator in a crash loop
  changes owner every few seconds. When the next assignment epoch would reach the limit, the
  partition instead takes a new producer id from next_producer_id at epoch 0 and names the old
  one as `retired_producer_id` (KIP-360's answer to an exhausted epoch), kept in its later
  records until the next rotation. Each owner first writes a writer-epoch record as (retired
  id, producer_epoch_max, sequence 0): every earlier owner used a lower epoch under that id, so
  the brokers refuse those owners from then on (coordinator_partition.py); a later owner's
  repeat of it is answered as a duplicate.

Registration and fencing plan the assignments in the same batch (`_with_assignments`): the
planner runs over the image the first records produce (replay is pure, so every replica computes
that image too), and no reader ever sees a live coordinator without its share, or a dead one's
partitions unmoved for longer than one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    COORDINATOR_TOPICS,
    INTERNAL_TOPIC_LOG_DEFAULTS,
    NO_COORDINATOR,
    TRANSACTION_STATE_TOPIC,
    valid_assignment,
)
from samsa.metadata.image import NO_PRODUCER_ID, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.placement import assign_replicas
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.metadata.topic_defaults import cluster_defaults, defaults_for_topic
from samsa.services.controller.control_result import ClusterDefaults, ControlResult, RandomSource
from samsa.services.controller.eligible_leaders import MIN_ISR_CONFIG
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# The coordinator topics' configs. Only the last record per key matters (Kafka's policy), and
# compaction cleans closed segments only, so they roll at 100 MiB, as Kafka's
# offsets.topic.segment.bytes and transaction.state.log.segment.bytes, not at the 1 GiB of
# other topics: a busy group or transactional id leaves a smaller log behind, and a new owner
# loads it faster. Then the timestamp bound of every internal topic (INTERNAL_TOPIC_LOG_DEFAULTS).
COORDINATOR_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * limits.MIB),
    **INTERNAL_TOPIC_LOG_DEFAULTS,
}


# --- registration and sessions -------------------------------------------------------------------


def register_coordinator(
    image: MetadataImage,
    request: c.RegisterCoordinatorRequest,
    *,
    liveness: BrokerLiveness,
    now_ms: int,
    session_timeout_ms: int,
) -> ControlResult[c.RegisterCoordinatorResponse]:
    existing = image.coordinators.get(request.coordinator_id)
    if (
        existing is not None
        and existing.incarnation_id != request.incarnation_id
        and not existing.fenced
        and liveness.is_alive(
            existing.coordinator_id, existing.coordinator_epoch, now_ms, session_timeout_ms
        )
    ):
        response = c.RegisterCoordinatorResponse(coordinator_epoch=-1)
        response.status.error_code = ErrorCode.DUPLICATE_BROKER_REGISTRATION  # type: ignore[assignment]
        response.status.error_message = (
            f"coordinator id {request.coordinator_id} is registered by another live coordinator "
            f"process ({existing.endpoint}); give each coordinator its own id"
        )
        return ControlResult([], response)
    record = m.MetadataRecord(
        register_coordinator=m.RegisterCoordinatorRecord(
            coordinator_id=request.coordinator_id,
            incarnation_id=request.incarnation_id,
            endpoint=request.endpoint,
            internal_endpoint=request.internal_endpoint,
        )
    )
    return ControlResult(
        _with_assignments(image, [record]),
        c.RegisterCoordinatorResponse(coordinator_epoch=image.end_offset),
    )


def coordinator_heartbeat(
    image: MetadataImage, request: c.CoordinatorHeartbeatRequest
) -> ControlResult[c.CoordinatorHeartbeatResponse]:
    coordinator = image.coordinators.get(request.coordinator_id)
    response = c.CoordinatorHeartbeatResponse()
    if coordinator is None or coordinator.coordinator_epoch != request.coordinator_epoch:
        response.status.error_code = ErrorCode.STALE_BROKER_EPOCH  # type: ignore[assignment]
        response.status.error_message = (
            f"coordinator {request.coordinator_id} epoch {request.coordinator_epoch} is not "
            f"current ({'unregistered' if coordinator is None else coordinator.coordinator_epoch})"
            ": register again"
        )
        response.is_fenced = True
        return ControlResult([], response)
    response.is_fenced = True
    if request.want_shutdown:
        response.should_shut_down = True
        if coordinator.fenced:
            return ControlResult([], response)
        fenced = fence_coordinators(image, [coordinator.coordinator_id])
        return ControlResult(fenced.records, response)
    if coordinator.fenced:
        response.status.error_code = ErrorCode.STALE_BROKER_EPOCH  # type: ignore[assignment]
        response.status.error_message = (
            f"coordinator {request.coordinator_id} epoch {request.coordinator_epoch} was fenced "
            "(its session expired): it owns no partition; register again"
        )
        return ControlResult([], response)
    response.is_fenced = False
    return ControlResult([], response)


def fence_coordinators(image: MetadataImage, coordinator_ids: Iterable[int]) -> ControlResult[None]:
    """Fence these unfenced coordinators and move their partitions, in one batch."""
    records = [
        m.MetadataRecord(
            fence_coordinator=m.FenceCoordinatorRecord(
                coordinator_id=coordinator_id, coordinator_epoch=coordinator.coordinator_epoch
            )
        )
        for coordinator_id in sorted(set(coordinator_ids))
        if (coordinator := image.coordinators.get(coordinator_id)) is not None
        and not coordinator.fenced
    ]
    return ControlResult(_with_assignments(image, records) if records else [], None)


def _with_assignments(
    image: MetadataImage, records: list[m.MetadataRecord]
) -> list[m.MetadataRecord]:
    """`records` followed by the assignment changes the image after them calls for."""
    after = replay(image, make_batch(image, records, image.timestamp_ms))
    return records + plan_coordinator_assignments(after).records


# --- the coordinator topics ---------------------------------------------------------------------


@dataclass(frozen=True)
class CoordinatorTopicSettings:
    """How large one coordinator topic is made, and the Kafka name of its replication factor
    (also its `samsa up` setting), for messages."""

    name: str
    num_partitions: int
    replication_factor: int
    replication_factor_setting: str
    configs: dict[str, str]  # beyond COORDINATOR_TOPIC_CONFIGS


def coordinator_topic_settings(defaults: ClusterDefaults) -> list[CoordinatorTopicSettings]:
    """The settings of every coordinator topic, in COORDINATOR_TOPICS order."""
    settings = [
        CoordinatorTopicSettings(
            CONSUMER_OFFSETS_TOPIC,
            defaults.offsets_topic_num_partitions,
            defaults.offsets_topic_replication_factor,
            "offsets.topic.replication.factor",
            {},  # min.insync.replicas: the cluster's, as Kafka's offsets topic
        ),
        CoordinatorTopicSettings(
            TRANSACTION_STATE_TOPIC,
            defaults.transaction_state_log_num_partitions,
            defaults.transaction_state_log_replication_factor,
            "transaction.state.log.replication.factor",
            # Kafka's transaction.state.log.min.isr: a decision (PrepareCommit) that one replica
            # alone acknowledged dies with that replica's unflushed tail, and a coordinator
            # that reloads without it aborts a transaction whose markers were partly written.
            {
                "min.insync.replicas": str(
                    min(
                        defaults.transaction_state_log_min_isr,
                        defaults.transaction_state_log_replication_factor,
                    )
                )
            },
        ),
    ]
    assert tuple(topic.name for topic in settings) == COORDINATOR_TOPICS
    return settings


def coordinator_topic_problem(
    image: MetadataImage, defaults: ClusterDefaults, name: str
) -> str | None:
    """Why the coordinator topic `name` cannot be created now (or exists already), or None."""
    (settings,) = [topic for topic in coordinator_topic_settings(defaults) if topic.name == name]
    if name in image.topics:
        return f"{name} exists"
    if not image.live_coordinators():
        return "no live coordinator yet"
    live_brokers = len(image.live_brokers())
    if live_brokers < settings.replication_factor:
        return (
            f"it needs {settings.replication_factor} live brokers "
            f"({settings.replication_factor_setting}), has {live_brokers}"
        )
    return None


def plan_coordinator_topics(
    image: MetadataImage,
    defaults: ClusterDefaults,
    *,
    rng: RandomSource,
    new_topic_id: Callable[[], bytes],
) -> ControlResult[None]:
    """The records creating every coordinator topic that is missing and can be created now,
    in one batch."""
    records: list[m.MetadataRecord] = []
    for settings in coordinator_topic_settings(defaults):
        if coordinator_topic_problem(image, defaults, settings.name) is None:
            records += _coordinator_topic_records(image, settings, rng, new_topic_id())
    return ControlResult(records, None)


def _coordinator_topic_records(
    image: MetadataImage, settings: CoordinatorTopicSettings, rng: RandomSource, topic_id: bytes
) -> list[m.MetadataRecord]:
    assert settings.num_partitions >= 1
    assert len(topic_id) == 16
    live = [broker.broker_id for broker in image.live_brokers()]
    racks = {broker.broker_id: broker.rack for broker in image.live_brokers()}
    assignment = assign_replicas(
        settings.num_partitions,
        settings.replication_factor,
        live,
        start_index=rng.randrange(len(live)),
        first_shift=rng.randrange(len(live)),
        racks=racks,
    )
    topic = m.TopicRecord(name=settings.name, topic_id=topic_id)
    records = [m.MetadataRecord(topic=topic)]
    records += [
        m.MetadataRecord(
            partition=m.PartitionRecord(
                topic_id=topic_id,
                partition=partition,
                replicas=replicas,
                isr=replicas,
                leader=replicas[0],
            )
        )
        for partition, replicas in sorted(assignment.items())
    ]
    records += [
        m.MetadataRecord(
            config=m.ConfigRecord(
                resource_type=TOPIC_RESOURCE,  # type: ignore[arg-type]
                resource_name=settings.name,
                name=name,
                value=value,
            )
        )
        for name, value in sorted(_coordinator_topic_configs(image, settings).items())
    ]
    return records


def _coordinator_topic_configs(
    image: MetadataImage, settings: CoordinatorTopicSettings
) -> dict[str, str]:
    """The topic's own configs. A cluster-wide min.insync.replicas default above its replication
    factor would have every acks=all write of its coordinators refused (NOT_ENOUGH_REPLICAS) and
    its configs invalid: the topic then gets its replication factor as its own value, capped
    as __transaction_state's transaction.state.log.min.isr is."""
    configs = COORDINATOR_TOPIC_CONFIGS | settings.configs
    default = defaults_for_topic(settings.name, cluster_defaults(image)).get(MIN_ISR_CONFIG)
    if MIN_ISR_CONFIG not in configs and default and int(default) > settings.replication_factor:
        configs[MIN_ISR_CONFIG] = str(settings.replication_factor)
    return configs


# --- assignments ---------------------------------------------------------------------------------


def plan_coordinator_assignments(image: MetadataImage) -> ControlResult[None]:
    """The CoordinatorAssignmentRecords that bring every partition of every coordinator topic
    to a live coordinator, balanced within one per topic (see the module docstring)."""
    records: list[m.MetadataRecord] = []
    next_producer_id = image.next_producer_id
    for name in COORDINATOR_TOPICS:
        topic_records, next_producer_id = _plan_topic_assignments(image, name, next_producer_id)
        records += topic_records
    return ControlResult(records, None)


def _plan_topic_assignments(
    image: MetadataImage, name: str, next_producer_id: int
) -> tuple[list[m.MetadataRecord], int]:
    """The assignment records of one coordinator topic, and the next producer id after the
    ones its new partitions took."""
    topic = image.topics.get(name)
    if topic is None:
        return [], next_producer_id
    live = {coordinator.coordinator_id for coordinator in image.live_coordinators()}
    current = {number: valid_assignment(image, name, number) for number in sorted(topic.partitions)}
    owners = {p: a.coordinator_id for p, a in current.items() if a is not None}
    if live:
        owners = _balanced(owners, [p for p, a in current.items() if a is None], live)
    records = []
    for partition, valid in current.items():
        owner = owners.get(partition, NO_COORDINATOR)
        if valid is not None and valid.coordinator_id == owner:
            continue
        previous = image.coordinator_assignments.get((name, partition))
        if owner == NO_COORDINATOR and (
            previous is None or previous.coordinator_id == NO_COORDINATOR
        ):
            continue  # no owner before, none now: nothing changes
        if previous is None:
            producer_id, assignment_epoch, retired = next_producer_id, 0, NO_PRODUCER_ID
            next_producer_id += 1
        elif previous.assignment_epoch + 1 >= limits.producer_epoch_max:
            # Epochs exhausted: a fresh id, and the owners fence the old one at the limit.
            producer_id, assignment_epoch, retired = next_producer_id, 0, previous.producer_id
            next_producer_id += 1
        else:
            producer_id, assignment_epoch = previous.producer_id, previous.assignment_epoch + 1
            retired = previous.retired_producer_id
        record = m.CoordinatorAssignmentRecord(
            topic=name,
            partition=partition,
            coordinator_id=owner,
            coordinator_epoch=-1,
            assignment_epoch=assignment_epoch,
            producer_id=producer_id,
        )
        if retired != NO_PRODUCER_ID:
            record.retired_producer_id = retired
        if owner != NO_COORDINATOR:
            record.coordinator_epoch = image.coordinators[owner].coordinator_epoch
        records.append(m.MetadataRecord(coordinator_assignment=record))
    return records, next_producer_id


def _balanced(owners: dict[int, int], unowned: list[int], live: set[int]) -> dict[int, int]:
    """`owners` with every `unowned` partition given to a live coordinator, then balanced.

    Unowned partitions go, in partition order, to the least-loaded coordinator (ties: lowest
    id); then, while the most-loaded coordinator (ties: lowest id) holds two or more partitions
    beyond the least-loaded, its highest-numbered partition moves there. Each move narrows the
    gap, so the loop ends with counts within one, after the fewest moves this order allows.
    """
    owners = dict(owners)
    held: dict[int, list[int]] = {coordinator_id: [] for coordinator_id in sorted(live)}
    for partition, owner in sorted(owners.items()):
        held[owner].append(partition)
    for partition in unowned:
        target = min(held, key=lambda coordinator_id: (len(held[coordinator_id]), coordinator_id))
        held[target].append(partition)
        owners[partition] = target
    while True:
        most = min(held, key=lambda coordinator_id: (-len(held[coordinator_id]), coordinator_id))
        least = min(held, key=lambda coordinator_id: (len(held[coordinator_id]), coordinator_id))
        if len(held[most]) - len(held[least]) < 2:
            return owners
        moved = max(held[most])
        held[most].remove(moved)
        held[least].append(moved)
        owners[moved] = least
