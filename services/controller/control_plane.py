"""The controller's decisions: a request and the committed image in, records and an answer out.

Pure (no I/O, no clock, no global randomness): the driver passes the image, `now_ms` and a random
source, commits the records as one batch, and fills the answer's status. Every rule of DESIGN §2
that the controller enforces is here, where it is tested directly:

- brokers register fenced (epoch = the registration's offset) and are unfenced once a heartbeat
  shows they applied the log up to their own registration; a second live process with the same
  id is refused;
- fencing a broker (session expired, controlled shutdown, re-registration) moves each leadership
  it holds to the first live ISR member in replica order, leader epoch + 1; with none, the
  partition goes offline and keeps its last ISR member (KIP-966), which leads again when it
  comes back;
- topics are placed with Kafka's assignment (metadata/placement.py) over unfenced brokers and
  validated with Kafka's rules and names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from samsa.common import limits
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.metadata.image import (
    BROKER_RESOURCE,
    NO_LEADER,
    TOPIC_RESOURCE,
    MetadataImage,
    PartitionState,
)
from samsa.metadata.placement import PlacementError, assign_replicas
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.topic_configs import TOPIC_KEYS, validate_topic_configs
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

R = TypeVar("R")

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
LIST_CONFIGS = frozenset({"cleanup.policy"})


class RandomSource(Protocol):
    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int: ...


@dataclass(frozen=True)
class ControlResult(Generic[R]):
    """Records to commit as one batch (maybe none) and the answer to send once they are."""

    records: list[m.MetadataRecord]
    response: R


@dataclass(frozen=True)
class ClusterDefaults:
    """Kafka's broker-side defaults for topics created without explicit values."""

    num_partitions: int = 1
    default_replication_factor: int = 1
    broker_session_timeout_ms: int = 9000


# --- brokers ---------------------------------------------------------------------------------


def register_broker(
    image: MetadataImage,
    request: c.RegisterBrokerRequest,
    *,
    liveness: BrokerLiveness,
    now_ms: int,
    session_timeout_ms: int,
) -> ControlResult[c.RegisterBrokerResponse]:
    existing = image.brokers.get(request.broker_id)
    if (
        existing is not None
        and existing.incarnation_id != request.incarnation_id
        and not existing.fenced
        and liveness.is_alive(existing.broker_id, existing.broker_epoch, now_ms, session_timeout_ms)
    ):
        response = c.RegisterBrokerResponse(broker_epoch=-1)
        response.status.error_code = ErrorCode.DUPLICATE_BROKER_REGISTRATION  # type: ignore[assignment]
        response.status.error_message = (
            f"broker id {request.broker_id} is registered by another live process "
            f"({existing.endpoint}); give each broker its own id"
        )
        return ControlResult([], response)
    records = [
        m.MetadataRecord(
            register_broker=m.RegisterBrokerRecord(
                broker_id=request.broker_id,
                incarnation_id=request.incarnation_id,
                endpoint=request.endpoint,
                rack=request.rack,
            )
        )
    ]
    # The new incarnation starts fenced: whatever the old one led must move or go offline.
    records += _leadership_moves(image, {request.broker_id})
    return ControlResult(records, c.RegisterBrokerResponse(broker_epoch=image.end_offset))


def broker_heartbeat(
    image: MetadataImage, request: c.BrokerHeartbeatRequest
) -> ControlResult[c.BrokerHeartbeatResponse]:
    broker = image.brokers.get(request.broker_id)
    response = c.BrokerHeartbeatResponse()
    if broker is None or broker.broker_epoch != request.broker_epoch:
        response.status.error_code = ErrorCode.STALE_BROKER_EPOCH  # type: ignore[assignment]
        response.status.error_message = (
            f"broker {request.broker_id} epoch {request.broker_epoch} is not current "
            f"({'unregistered' if broker is None else broker.broker_epoch}): register again"
        )
        response.is_fenced = True
        return ControlResult([], response)
    caught_up = request.metadata_offset > broker.broker_epoch
    response.is_caught_up = caught_up
    if request.want_shutdown:
        response.is_fenced = True
        response.should_shut_down = True
        return ControlResult(
            [] if broker.fenced else fence_brokers(image, [broker.broker_id]).records, response
        )
    if broker.fenced and caught_up:
        records = [
            m.MetadataRecord(
                unfence_broker=m.UnfenceBrokerRecord(
                    broker_id=broker.broker_id, broker_epoch=broker.broker_epoch
                )
            )
        ]
        records += _elections_on_return(image, broker.broker_id)
        response.is_fenced = False
        return ControlResult(records, response)
    response.is_fenced = broker.fenced
    return ControlResult([], response)


def fence_brokers(image: MetadataImage, broker_ids: Iterable[int]) -> ControlResult[None]:
    """Fence these unfenced brokers and move their leaderships (session expiry, shutdown)."""
    fenced = {
        broker_id
        for broker_id in broker_ids
        if (broker := image.brokers.get(broker_id)) is not None and not broker.fenced
    }
    records = [
        m.MetadataRecord(
            fence_broker=m.FenceBrokerRecord(
                broker_id=broker_id, broker_epoch=image.brokers[broker_id].broker_epoch
            )
        )
        for broker_id in sorted(fenced)
    ]
    records += _leadership_moves(image, fenced)
    return ControlResult(records, None)


def _live(image: MetadataImage, excluded: set[int]) -> set[int]:
    return {
        broker_id
        for broker_id, broker in image.brokers.items()
        if not broker.fenced and broker_id not in excluded
    }


def _partitions(image: MetadataImage) -> Iterable[tuple[bytes, PartitionState]]:
    for _, topic in sorted(image.topics.items()):
        for _, state in sorted(topic.partitions.items()):
            yield topic.topic_id, state


def _leadership_moves(image: MetadataImage, leaving: set[int]) -> list[m.MetadataRecord]:
    """PartitionChanges taking `leaving` out of leaderships and ISRs (never emptying an ISR)."""
    live = _live(image, leaving)
    records = []
    for topic_id, state in _partitions(image):
        if state.leader not in leaving and not leaving.intersection(state.isr):
            continue
        isr = [replica for replica in state.isr if replica not in leaving]
        if not isr:
            isr = list(state.isr)  # KIP-966: keep the last members; they may come back
        change = m.PartitionChangeRecord(topic_id=topic_id, partition=state.partition)
        if tuple(isr) != state.isr:
            change.isr.ids.extend(isr)
        if state.leader in leaving:
            change.leader = next((r for r in state.replicas if r in isr and r in live), NO_LEADER)
            if change.leader == NO_LEADER and _unclean_allowed(image, topic_id):
                # No live ISR member: an out-of-sync replica leads and may have lost records
                # (the operator chose availability); the ISR restarts from it alone.
                unclean = next((r for r in state.replicas if r in live), NO_LEADER)
                if unclean != NO_LEADER:
                    change.leader = unclean
                    change.ClearField("isr")
                    change.isr.ids.append(unclean)
        if change.HasField("isr") or change.HasField("leader"):
            records.append(m.MetadataRecord(partition_change=change))
    return records


def _unclean_allowed(image: MetadataImage, topic_id: bytes) -> bool:
    topic = image.topic_by_id(topic_id)
    return topic is not None and (
        image.topic_configs(topic.name).get("unclean.leader.election.enable") == "true"
    )


def preferred_leader_elections(image: MetadataImage) -> ControlResult[None]:
    """Give leadership back to preferred replicas (the first of each replica list) that are
    live and in sync (auto.leader.rebalance.enable), so leadership spreads evenly again after
    a broker returns."""
    live = _live(image, set())
    records = [
        m.MetadataRecord(
            partition_change=m.PartitionChangeRecord(
                topic_id=topic_id, partition=state.partition, leader=state.replicas[0]
            )
        )
        for topic_id, state in _partitions(image)
        if state.leader not in (state.replicas[0], NO_LEADER)
        and state.replicas[0] in live
        and state.replicas[0] in state.isr
    ]
    return ControlResult(records, None)


def alter_partition(
    image: MetadataImage, request: c.AlterPartitionRequest
) -> ControlResult[c.AlterPartitionResponse]:
    """A leader's ISR proposal, checked against the broker, leader and partition epochs."""
    response = c.AlterPartitionResponse()
    topic = image.topics.get(request.topic)
    state = None if topic is None else topic.partitions.get(request.partition)
    where = f"{request.topic}-{request.partition}"
    if topic is None or state is None:
        return _alter_refused(
            response, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{where} does not exist"
        )
    broker = image.brokers.get(request.broker_id)
    problem: tuple[ErrorCode, str] | None = None
    if broker is None or broker.broker_epoch != request.broker_epoch:
        problem = (
            ErrorCode.STALE_BROKER_EPOCH,
            f"broker {request.broker_id} epoch {request.broker_epoch} is not current",
        )
    elif state.leader != request.broker_id:
        problem = (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {request.broker_id} does not lead {where}",
        )
    elif state.leader_epoch != request.leader_epoch:
        problem = (
            ErrorCode.FENCED_LEADER_EPOCH,
            f"leader epoch {request.leader_epoch} of {where} is not the current "
            f"{state.leader_epoch}",
        )
    elif state.partition_epoch != request.partition_epoch:
        problem = (
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition epoch {request.partition_epoch} of {where} is not the current "
            f"{state.partition_epoch}",
        )
    if problem is not None:
        return _alter_refused(response, state, *problem)
    new_isr = list(request.new_isr)
    ineligible = [
        r
        for r in new_isr
        if r not in state.replicas
        or (registered := image.brokers.get(r)) is None
        or (registered.fenced and r not in state.isr)
    ]
    if request.broker_id not in new_isr or len(set(new_isr)) != len(new_isr) or ineligible:
        return _alter_refused(
            response,
            state,
            ErrorCode.INELIGIBLE_REPLICA,
            f"proposed ISR {new_isr} of {where} must be distinct replicas, include the leader "
            f"and add no fenced broker (ineligible: {ineligible})",
        )
    response.leader = state.leader
    response.leader_epoch = state.leader_epoch
    if tuple(new_isr) == state.isr:
        response.partition_epoch = state.partition_epoch
        response.isr.extend(state.isr)
        return ControlResult([], response)
    change = m.PartitionChangeRecord(topic_id=topic.topic_id, partition=state.partition)
    change.isr.ids.extend(new_isr)
    response.partition_epoch = state.partition_epoch + 1
    response.isr.extend(new_isr)
    return ControlResult([m.MetadataRecord(partition_change=change)], response)


def _alter_refused(
    response: c.AlterPartitionResponse, state: PartitionState | None, code: int, message: str
) -> ControlResult[c.AlterPartitionResponse]:
    response.error_code = code  # type: ignore[assignment]
    response.error_message = message
    if state is not None:
        response.leader = state.leader
        response.leader_epoch = state.leader_epoch
        response.partition_epoch = state.partition_epoch
        response.isr.extend(state.isr)
    return ControlResult([], response)


def _elections_on_return(image: MetadataImage, broker_id: int) -> list[m.MetadataRecord]:
    """Offline partitions whose ISR holds the returning broker get it as leader."""
    return [
        m.MetadataRecord(
            partition_change=m.PartitionChangeRecord(
                topic_id=topic_id, partition=state.partition, leader=broker_id
            )
        )
        for topic_id, state in _partitions(image)
        if state.leader == NO_LEADER and broker_id in state.isr
    ]


# --- topics ----------------------------------------------------------------------------------


def topic_name_problem(name: str) -> str | None:
    """Why `name` is not a valid topic name, or None."""
    if not name:
        return "a topic name must not be empty"
    if len(name) > limits.topic_name_length_max:
        return f"a topic name has at most {limits.topic_name_length_max} characters"
    if name in (".", ".."):
        return 'a topic name must not be "." or ".."'
    if not TOPIC_NAME.match(name):
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


def _placement_start(rng: RandomSource, brokers: Sequence[int]) -> tuple[int, int]:
    return rng.randrange(len(brokers)), rng.randrange(len(brokers))


def create_topics(
    image: MetadataImage,
    request: c.CreateTopicsRequest,
    *,
    rng: RandomSource,
    defaults: ClusterDefaults,
    new_topic_id: Callable[[], bytes],
) -> ControlResult[c.CreateTopicsResponse]:
    response = c.CreateTopicsResponse()
    records: list[m.MetadataRecord] = []
    live = [b.broker_id for b in image.live_brokers()]
    racks = {b.broker_id: b.rack for b in image.live_brokers()}
    taken = set(image.topics)
    for topic in request.topics:
        result = response.topics.add(name=topic.name)
        partitions = defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        factor = (
            defaults.default_replication_factor
            if topic.replication_factor in (-1, 0)
            else topic.replication_factor
        )
        problem = _topic_problem(topic.name, taken, partitions, factor, dict(topic.configs))
        if problem is None and factor > len(live):
            problem = (
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {factor} is larger than the {len(live)} unfenced brokers",
            )
        if problem is not None:
            result.error_code, result.error_message = problem  # type: ignore[assignment]
            continue
        start, shift = _placement_start(rng, live)
        assignment = assign_replicas(
            partitions, factor, live, start_index=start, first_shift=shift, racks=racks
        )
        topic_id = new_topic_id()
        taken.add(topic.name)
        result.topic_id = topic_id
        result.num_partitions = partitions
        result.replication_factor = factor
        if request.validate_only:
            continue
        records.append(m.MetadataRecord(topic=m.TopicRecord(name=topic.name, topic_id=topic_id)))
        records += _partition_records(topic_id, assignment)
        records += [
            m.MetadataRecord(
                config=m.ConfigRecord(
                    resource_type=TOPIC_RESOURCE,  # type: ignore[arg-type]
                    resource_name=topic.name,
                    name=key,
                    value=value,
                )
            )
            for key, value in sorted(topic.configs.items())
        ]
    return ControlResult(records, response)


def _topic_problem(
    name: str, taken: set[str], partitions: int, factor: int, configs: dict[str, str]
) -> tuple[int, str] | None:
    if (problem := topic_name_problem(name)) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, problem
    if name in taken:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
    if not 1 <= partitions <= limits.topic_partitions_max:
        return (
            ErrorCode.INVALID_PARTITIONS,
            f"num_partitions={partitions}: use 1 to {limits.topic_partitions_max} (or -1 for "
            "the cluster default)",
        )
    if factor < 1:
        return ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {factor} is below 1"
    try:
        validate_topic_configs(configs, factor)
    except InvalidConfigError as error:
        return ErrorCode.INVALID_CONFIG, str(error)
    return None


def _partition_records(topic_id: bytes, assignment: dict[int, list[int]]) -> list[m.MetadataRecord]:
    return [
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


def delete_topics(
    image: MetadataImage, request: c.DeleteTopicsRequest
) -> ControlResult[c.DeleteTopicsResponse]:
    response = c.DeleteTopicsResponse()
    records = []
    removed: set[str] = set()
    for name in request.names:
        result = response.topics.add(name=name)
        topic = image.topics.get(name)
        if topic is None or name in removed:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {name!r} does not exist"
            continue
        removed.add(name)
        records.append(m.MetadataRecord(remove_topic=m.RemoveTopicRecord(topic_id=topic.topic_id)))
    return ControlResult(records, response)


def create_partitions(
    image: MetadataImage, request: c.CreatePartitionsRequest, *, rng: RandomSource
) -> ControlResult[c.CreatePartitionsResponse]:
    response = c.CreatePartitionsResponse()
    records: list[m.MetadataRecord] = []
    live = sorted(b.broker_id for b in image.live_brokers())
    racks = {b.broker_id: b.rack for b in image.live_brokers()}
    for wanted in request.topics:
        result = response.topics.add(name=wanted.name)
        topic = image.topics.get(wanted.name)
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {wanted.name!r} does not exist"
            continue
        current = len(topic.partitions)
        if not current < wanted.count <= limits.topic_partitions_max:
            result.error_code = ErrorCode.INVALID_PARTITIONS  # type: ignore[assignment]
            result.error_message = (
                f"topic {wanted.name!r} has {current} partitions; the new count must be larger "
                f"(partitions can only be added) and at most {limits.topic_partitions_max}"
            )
            continue
        factor = len(topic.partitions[0].replicas)
        first_leader = topic.partitions[0].replicas[0]
        try:
            start = live.index(first_leader) if first_leader in live else rng.randrange(len(live))
            assignment = assign_replicas(
                wanted.count - current,
                factor,
                live,
                start_index=start,
                first_shift=rng.randrange(len(live)),
                first_partition=current,
                racks=racks,
            )
        except (PlacementError, ValueError) as error:
            result.error_code = ErrorCode.INVALID_REPLICATION_FACTOR  # type: ignore[assignment]
            result.error_message = str(error)
            continue
        if not request.validate_only:
            records += _partition_records(topic.topic_id, assignment)
    return ControlResult(records, response)


# --- configs ---------------------------------------------------------------------------------


def incremental_alter_configs(
    image: MetadataImage, request: c.IncrementalAlterConfigsRequest
) -> ControlResult[c.IncrementalAlterConfigsResponse]:
    response = c.IncrementalAlterConfigsResponse()
    records: list[m.MetadataRecord] = []
    for resource in request.resources:
        result = response.results.add()
        result.resource.CopyFrom(resource.resource)
        outcome = _alter_topic(image, resource)
        if isinstance(outcome, tuple):
            result.error_code, result.error_message = outcome  # type: ignore[assignment]
        elif not request.validate_only:
            records += outcome
    return ControlResult(records, response)


def _alter_topic(
    image: MetadataImage, resource: c.IncrementalAlterConfigsRequest.Resource
) -> list[m.MetadataRecord] | tuple[int, str]:
    target = resource.resource
    if target.type != TOPIC_RESOURCE:
        return (
            ErrorCode.INVALID_REQUEST,
            "only topic configs are dynamic in this version; broker settings are given on the "
            "broker's command line",
        )
    topic = image.topics.get(target.name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {target.name!r} does not exist"
    current = dict(image.topic_configs(target.name))
    updated = dict(current)
    for alteration in resource.alterations:
        name, value = alteration.name, alteration.value
        if name not in TOPIC_KEYS:
            return ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}"
        if alteration.op == c.ALTER_CONFIG_OP_SET:
            updated[name] = value
        elif alteration.op == c.ALTER_CONFIG_OP_DELETE:
            updated.pop(name, None)
        elif alteration.op in (c.ALTER_CONFIG_OP_APPEND, c.ALTER_CONFIG_OP_SUBTRACT):
            if name not in LIST_CONFIGS:
                return ErrorCode.INVALID_CONFIG, f"{name} is not a list; use SET or DELETE"
            items = updated.get(name, TOPIC_KEYS[name].default).split(",")
            if alteration.op == c.ALTER_CONFIG_OP_APPEND:
                items += [value] if value not in items else []
            else:
                items = [item for item in items if item != value]
            updated[name] = ",".join(items)
        else:
            return ErrorCode.INVALID_REQUEST, f"alteration of {name} has no op (SET, DELETE, …)"
    factor = min((len(p.replicas) for p in topic.partitions.values()), default=1)
    try:
        validate_topic_configs(updated, factor)
    except InvalidConfigError as error:
        return ErrorCode.INVALID_CONFIG, str(error)
    records = []
    for name in sorted(current.keys() | updated.keys()):
        if current.get(name) == updated.get(name):
            continue
        record = m.ConfigRecord(
            resource_type=TOPIC_RESOURCE,  # type: ignore[arg-type]
            resource_name=target.name,
            name=name,
        )
        if name in updated:
            record.value = updated[name]
        records.append(m.MetadataRecord(config=record))
    return records


# --- reads -----------------------------------------------------------------------------------


def describe_cluster(image: MetadataImage) -> c.DescribeClusterResponse:
    response = c.DescribeClusterResponse()
    for broker_id, broker in sorted(image.brokers.items()):
        response.brokers.add(
            broker_id=broker_id,
            endpoint=broker.endpoint,
            rack=broker.rack,
            broker_epoch=broker.broker_epoch,
            is_fenced=broker.fenced,
        )
    return response


def describe_topics(
    image: MetadataImage, request: c.DescribeTopicsRequest
) -> c.DescribeTopicsResponse:
    response = c.DescribeTopicsResponse()
    for name in list(request.names) or sorted(image.topics):
        result = response.topics.add(name=name)
        topic = image.topics.get(name)
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {name!r} does not exist"
            continue
        result.topic_id = topic.topic_id
        for _, state in sorted(topic.partitions.items()):
            result.partitions.add(
                partition=state.partition,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                replicas=state.replicas,
                isr=state.isr,
            )
    for broker_id, broker in image.brokers.items():
        response.broker_endpoints[broker_id] = broker.endpoint
    return response


def describe_configs(
    image: MetadataImage, request: c.DescribeConfigsRequest
) -> c.DescribeConfigsResponse:
    response = c.DescribeConfigsResponse()
    for wanted in request.resources:
        result = response.results.add()
        result.resource.CopyFrom(wanted.resource)
        if wanted.resource.type == BROKER_RESOURCE:
            result.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
            result.error_message = "broker configs are static in this version (command line)"
            continue
        if wanted.resource.name not in image.topics:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {wanted.resource.name!r} does not exist"
            continue
        unknown = [name for name in wanted.names if name not in TOPIC_KEYS]
        if unknown:
            result.error_code = ErrorCode.INVALID_CONFIG  # type: ignore[assignment]
            result.error_message = f"unknown topic configs: {', '.join(unknown)}"
            continue
        dynamic = image.topic_configs(wanted.resource.name)
        for name in list(wanted.names) or sorted(TOPIC_KEYS):
            key = TOPIC_KEYS[name]
            result.entries.add(
                name=name,
                value=dynamic.get(name, key.default),
                source=c.CONFIG_SOURCE_DYNAMIC if name in dynamic else c.CONFIG_SOURCE_DEFAULT,
                documentation=key.documentation,
            )
    return response
