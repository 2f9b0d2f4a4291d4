"""Topic, config and cluster administration, the pure half: answers into dataclasses.

Admin (admin.py) builds the requests and sends them to the controllers (controller_calls.py);
everything it makes of an answer lives here, without gRPC, so it is tested with protobuf messages
built by hand:

- `raise_first` turns the first failed per-topic or per-resource result into a TopicError (an
  AuthorizationError for a topic the ACLs refused), whose
  `errors` names every failed one (the others were applied: Kafka's admin calls are not atomic
  across topics);
- `topic_descriptions_of`, `cluster_description_of`, `config_entries_of` turn answers into the
  Kafka-named dataclasses below, which admin.py exports;
- `check_config_strings` and `config_alterations` check the configs a request carries, before
  anything is sent, and build IncrementalAlterConfigs' alterations; `create_topics_request`
  checks and builds CreateTopics' (with `replica_assignments_of`, the replicas placed by hand),
  `create_partitions_request` CreatePartitions', and `unregister_broker_request`
  UnregisterBroker's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.client.errors import (
    CLUSTER_RESOURCE,
    AuthorizationError,
    KafkaError,
    TopicError,
    first_of,
)
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

INT32_MAX = 2**31 - 1
# How DescribeConfigs says where a value comes from, in the words ConfigEntry.source uses.
BROKER = 2  # ConfigResourceType.CONFIG_RESOURCE_TYPE_BROKER

CONFIG_SOURCE_NAMES = {
    c.CONFIG_SOURCE_DYNAMIC: "dynamic",
    c.CONFIG_SOURCE_DEFAULT: "default",
    c.CONFIG_SOURCE_DYNAMIC_DEFAULT: "dynamic default",
}


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # the cluster's num.partitions
    replication_factor: int = -1  # the cluster's default.replication.factor
    configs: Mapping[str, str] = field(default_factory=dict)
    # Replicas placed by hand (Kafka's NewTopic(name, replicasAssignments)): partition -> broker
    # ids, the first the preferred leader; partitions 0..n-1, every list as long. With it,
    # num_partitions and replication_factor stay -1: the map sets both.
    replica_assignments: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # A reassignment in progress (KIP-455; Kafka's describe shows "Adding Replicas" and
    # "Removing Replicas"): the replicas it adds, members of `replicas` catching up, and those
    # it removes once they have. Both empty when none is in progress.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: bytes
    partitions: tuple[PartitionInfo, ...]


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    endpoint: str
    rack: str
    broker_epoch: int
    fenced: bool


@dataclass(frozen=True)
class ControllerInfo:
    node_id: int
    endpoint: str
    active: bool


@dataclass(frozen=True)
class CoordinatorInfo:
    coordinator_id: int
    endpoint: str
    coordinator_epoch: int
    fenced: bool
    owned_partitions: int  # of __consumer_offsets


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controllers: tuple[ControllerInfo, ...]
    brokers: tuple[BrokerInfo, ...]
    metadata_offset: int
    coordinators: tuple[CoordinatorInfo, ...] = ()


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str
    source: str  # "dynamic", "default", ...
    documentation: str


def check_config_strings(topic: str, configs: Mapping[Any, Any], names: Iterable[Any] = ()) -> None:
    """TopicError (INVALID_CONFIG) for a config name or value that is not a string: configs
    are strings on the wire, as Kafka's are, and protobuf's TypeError for an int named neither
    the topic nor the key."""
    for name in [*configs, *names]:
        if not isinstance(name, str):
            raise TopicError(
                f"topic {topic!r}: config name {name!r} is a {type(name).__name__}, not a string",
                ErrorCode.INVALID_CONFIG,
            )
    for name, value in configs.items():
        if not isinstance(value, str):
            text = str(value).lower() if isinstance(value, bool) else str(value)
            raise TopicError(
                f"topic {topic!r}: config {name}={value!r} is a {type(value).__name__}: config "
                f"values are strings, as in Kafka ({text!r})",
                ErrorCode.INVALID_CONFIG,
            )


def create_topics_request(topics: Iterable[NewTopic], validate_only: bool) -> c.CreateTopicsRequest:
    """CreateTopics for `topics`, a name given twice asked for once, as first given (Kafka's
    admin too); TopicError, before anything is sent, for a config that is not a string or a
    replication factor of 0 (on the wire it would read as unset, the cluster's default)."""
    unique: dict[str, NewTopic] = {}
    for topic in topics:
        unique.setdefault(topic.name, topic)
    for topic in unique.values():
        check_config_strings(topic.name, topic.configs)
        if topic.replication_factor == 0:
            raise TopicError(
                f"topic {topic.name!r}: replication factor 0: use 1 or more, or -1 for the "
                "cluster's default.replication.factor",
                ErrorCode.INVALID_REPLICATION_FACTOR,
            )
    return c.CreateTopicsRequest(
        topics=[
            c.CreateTopicsRequest.Topic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=dict(t.configs),
                assignments=replica_assignments_of(t),
            )
            for t in unique.values()
        ],
        validate_only=validate_only,
    )


def create_partitions_request(
    new_counts: Mapping[str, int],
    validate_only: bool,
    replica_assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
) -> c.CreatePartitionsRequest:
    """CreatePartitions for `new_counts`, with each topic's new partitions placed by hand when
    `replica_assignments` names it (Kafka's NewPartitions.increaseTo(count, assignments): one
    broker id list per new partition, in order); TopicError, before anything is sent, for
    lists the wire cannot carry as meant or a topic they name without a new count."""
    plans = dict(replica_assignments or {})
    unknown = sorted(set(plans) - set(new_counts), key=str)
    if unknown:
        raise TopicError(
            f"replica_assignments names {unknown} without a new partition count: give each "
            "topic's count in new_counts too",
            ErrorCode.INVALID_REQUEST,
        )
    topics = []
    for name, count in new_counts.items():
        wire = c.CreatePartitionsRequest.Topic(name=name, count=count)
        lists = plans.get(name, ())
        if isinstance(lists, (str, bytes)) or not isinstance(lists, Sequence):
            raise TopicError(
                f"topic {name!r}: replica_assignments must be a list of broker id lists, one "
                f"per new partition, such as [[1, 2], [2, 3]]; got {lists!r}",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        for number, brokers in enumerate(lists):
            wire.assignments.add(broker_ids=_broker_ids(name, f"new partition {number}", brokers))
        topics.append(wire)
    return c.CreatePartitionsRequest(topics=topics, validate_only=validate_only)


def replica_assignments_of(topic: NewTopic) -> list[c.CreateTopicsRequest.ReplicaAssignment]:
    """The wire form of `topic.replica_assignments`, by partition; TopicError for a map the wire
    cannot carry as meant (a key or id that is not an int, a str as a list, nothing in it) or
    given beside a count or factor. Whether it can be placed (partitions 0..n-1, registered
    brokers, lists of one length) is the controller's to say: it knows the brokers."""
    plan = topic.replica_assignments
    if plan is None:
        return []
    where = f"topic {topic.name!r}: replica_assignments"
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise TopicError(
            f"{where} sets the partition count and replication factor: leave num_partitions and "
            f"replication_factor at -1 (they are {topic.num_partitions} and "
            f"{topic.replication_factor})",
            ErrorCode.INVALID_REQUEST,
        )
    if not isinstance(plan, Mapping) or not plan:
        raise TopicError(
            f"{where} must be a non-empty mapping of partition -> broker ids, such as "
            f"{{0: [1, 2], 1: [2, 3]}}; got {plan!r}",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    wire = []
    for partition, brokers in plan.items():
        if not _is_int32(partition):
            raise TopicError(
                f"{where}: {partition!r} is not a partition number (such as 0: [1, 2], the "
                "first broker the preferred leader)",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        wire.append((partition, _broker_ids(topic.name, f"partition {partition}", brokers)))
    return [
        c.CreateTopicsRequest.ReplicaAssignment(partition_index=p, broker_ids=ids)
        for p, ids in sorted(wire)
    ]


def _broker_ids(topic: str, where: str, brokers: object) -> list[int]:
    """`brokers` as a list of broker ids, or TopicError: a str's letters or a set's order
    (the first replica is the preferred leader) cannot stand for one."""
    if isinstance(brokers, (str, bytes)) or not isinstance(brokers, Sequence):
        raise TopicError(
            f"topic {topic!r}: replica_assignments: {where}'s replicas {brokers!r} are not a "
            "list of broker ids (such as [1, 2], the first the preferred leader)",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    ids = list(brokers)
    if not all(_is_int32(broker) for broker in ids):
        raise TopicError(
            f"topic {topic!r}: replica_assignments: {where}'s replicas {ids!r} must be broker "
            "ids (ints)",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    return ids


def _is_int32(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= INT32_MAX


def config_alterations(
    topic: str, values: Mapping[str, str], delete: Iterable[str]
) -> list[c.IncrementalAlterConfigsRequest.Alteration]:
    """IncrementalAlterConfigs' alterations of `topic`: SET each of `values`, DELETE each of
    `delete` (back to its default)."""
    if isinstance(delete, str):  # its letters would go as names: "e, n, t is altered twice"
        raise TopicError(
            f"topic {topic!r}: delete takes a list of config names, such as [{delete!r}]",
            ErrorCode.INVALID_REQUEST,
        )
    deleted = list(delete)
    check_config_strings(topic, values, deleted)
    Alteration = c.IncrementalAlterConfigsRequest.Alteration
    return [Alteration(name=k, op=c.ALTER_CONFIG_OP_SET, value=v) for k, v in values.items()] + [
        Alteration(name=k, op=c.ALTER_CONFIG_OP_DELETE) for k in deleted
    ]


def unregister_broker_request(broker_id: object) -> c.UnregisterBrokerRequest:
    """UnregisterBroker's request, or KafkaError (INVALID_REQUEST) for an id that is not a
    broker id: a bool or a str would go on the wire as some other number, or not at all."""
    if isinstance(broker_id, bool) or not isinstance(broker_id, int):
        raise KafkaError(
            f"broker id {broker_id!r} is not a broker id (an int)", ErrorCode.INVALID_REQUEST
        )
    if not 0 <= broker_id <= INT32_MAX:
        raise KafkaError(
            f"broker id {broker_id} is out of range (0 to {INT32_MAX})", ErrorCode.INVALID_REQUEST
        )
    return c.UnregisterBrokerRequest(broker_id=broker_id)


def raise_first(results: Iterable[Any]) -> None:
    """TopicError for the first result (anything with error_code, error_message, and a topic's
    `name` or a config `resource`) that failed, naming its topic when the message does not: one
    call acts on many topics, and the caller must learn which one was refused. Its `errors`
    holds every failed topic's TopicError, by name, so no failure hides another. A topic the
    ACLs refused (TOPIC_AUTHORIZATION_FAILED: DescribeTopics answers per topic, as do the topic
    and config calls) is an AuthorizationError naming it instead, as a call refused whole raises;
    a broker's configs refused (CLUSTER_AUTHORIZATION_FAILED) an AuthorizationError on the
    cluster."""
    errors: dict[str, KafkaError] = {}
    for result in results:
        if result.error_code != ErrorCode.NONE:
            name = result.resource.name if hasattr(result, "resource") else result.name
            error = TopicError.of(result.error_code, result.error_message)
            message = str(error)
            if hasattr(result, "resource") and result.resource.type == BROKER:
                message = f"broker {name!r}: {message}" if name else f"broker defaults: {message}"
            elif repr(name) not in message:
                message = f"topic {name!r}: {message}"
            if error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                errors.setdefault(name, AuthorizationError(message, error.code, f"topic:{name}"))
            elif error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:  # a broker's configs
                errors.setdefault(name, AuthorizationError(message, error.code, CLUSTER_RESOURCE))
            errors.setdefault(name, TopicError(message, error.code))
    error = first_of(errors)
    if error is not None:
        raise error


def topic_descriptions_of(
    topics: Iterable[c.DescribeTopicsResponse.Topic],
) -> dict[str, TopicDescription]:
    """Described topics by name; all of them must have been answered without an error."""
    return {
        topic.name: TopicDescription(
            topic.name,
            topic.topic_id,
            tuple(
                PartitionInfo(
                    p.partition,
                    p.leader,
                    p.leader_epoch,
                    tuple(p.replicas),
                    tuple(p.isr),
                    tuple(p.adding_replicas),
                    tuple(p.removing_replicas),
                )
                for p in topic.partitions
            ),
        )
        for topic in topics
    }


def cluster_description_of(answer: c.DescribeClusterResponse) -> ClusterDescription:
    return ClusterDescription(
        answer.cluster_id,
        tuple(ControllerInfo(x.node_id, x.endpoint, x.is_active) for x in answer.controllers),
        tuple(
            BrokerInfo(b.broker_id, b.endpoint, b.rack, b.broker_epoch, b.is_fenced)
            for b in answer.brokers
        ),
        answer.status.metadata_offset,
        tuple(
            CoordinatorInfo(
                x.coordinator_id,
                x.endpoint,
                x.coordinator_epoch,
                x.is_fenced,
                x.owned_partitions,
            )
            for x in answer.coordinators
        ),
    )


def config_entries_of(result: c.DescribeConfigsResponse.Result) -> dict[str, ConfigEntry]:
    """One resource's configs by name (the result must not be an error)."""
    return {
        e.name: ConfigEntry(
            e.name, e.value, CONFIG_SOURCE_NAMES.get(e.source, "unknown"), e.documentation
        )
        for e in result.entries
    }
