"""The metadata image: the cluster's state after replaying the metadata log up to an offset.

Theory of operation (DESIGN §2). Every controller, broker and client holds a `MetadataImage` and
advances it with the pure `samsa.metadata.replay.replay`, so all of them agree on the cluster's
state at a given metadata offset. Images are immutable values: replay returns a new image that
shares every unchanged topic and broker with the old one, so a reader may keep an image as long
as it likes (a request handler answering from a consistent view while the log moves on), and
comparing an old and a new image is how a broker learns what changed for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from samsa.metadata.acls import Acls
from samsa.metadata.client_quotas import ClientQuotas
from samsa.metadata.scram_credentials import ScramCredentials

# The running hash before offset 0 (see proto/samsa/v1/metadata.proto).
INITIAL_HASH = bytes(16)

# Leader id of a partition without a leader (offline).
NO_LEADER = -1

# CoordinatorAssignment.retired_producer_id of a partition that never rotated its producer id.
NO_PRODUCER_ID = -1

# ConfigResourceType values, repeated here so that pure code need not import protobuf enums.
TOPIC_RESOURCE = 1
BROKER_RESOURCE = 2

ConfigKey = tuple[int, str]  # (resource type, resource name)
CoordinatorPartition = tuple[str, int]  # (coordinator topic, partition number)

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class BrokerRegistration:
    """A registered broker. Its epoch is the offset of its latest RegisterBrokerRecord.

    `in_controlled_shutdown` (KIP-841): it asked to shut down, so it is fenced and stays so
    until it registers again, whatever heartbeat of this epoch comes later (it implies `fenced`).
    """

    broker_id: int
    incarnation_id: str
    endpoint: str
    rack: str
    broker_epoch: int
    fenced: bool = True
    in_controlled_shutdown: bool = False
    # Its internal listener (services/runtime/listeners.py), or "" when it has none.
    internal_endpoint: str = ""

    @property
    def member_endpoint(self) -> str:
        """What the cluster's own members dial: the internal listener, else the public one."""
        return self.internal_endpoint or self.endpoint


@dataclass(frozen=True)
class PartitionState:
    """One partition's placement and leadership; `leader` is NO_LEADER when offline.

    `elr`: the eligible leader replicas (KIP-966), out of the ISR but holding every committed
    record: they left it by a change that took it below min.insync.replicas, after which the
    high watermark stands still (services/controller/eligible_leaders.py keeps it).

    `adding` and `removing`: a reassignment in progress (KIP-455), members of `replicas` and
    disjoint; the target replica list is `replicas` without `removing` (in order, so its first
    is the preferred leader). Both empty when none is in progress
    (services/controller/reassignment_control.py moves them)."""

    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    elr: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_offline(self) -> bool:
        return self.leader == NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment in progress completes (`replicas` when none is)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def problem(self) -> str | None:
        """Which invariant of a partition this state breaks, or None (replay refuses it)."""
        replicas = set(self.replicas)
        if not self.replicas or len(replicas) != len(self.replicas):
            return "replicas must be non-empty and distinct"
        if not set(self.isr) <= replicas or len(set(self.isr)) != len(self.isr):
            return "the ISR must be distinct replicas"
        elr = set(self.elr)
        if len(elr) != len(self.elr) or not elr <= replicas - set(self.isr):
            return "eligible leaders must be distinct non-ISR replicas"
        if self.leader != NO_LEADER and self.leader not in replicas:
            return f"leader {self.leader} is not a replica"
        adding, removing = set(self.adding), set(self.removing)
        if len(adding) != len(self.adding) or len(removing) != len(self.removing):
            return "adding and removing replicas must be distinct"
        if not adding <= replicas or not removing <= replicas or adding & removing:
            return "adding and removing replicas must be disjoint sets of replicas"
        if self.removing and not self.target_replicas:
            return "a reassignment must leave at least one replica"
        return None


@dataclass(frozen=True)
class TopicImage:
    """A topic and its partitions, by partition number."""

    name: str
    topic_id: bytes
    partitions: Mapping[int, PartitionState] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class CoordinatorRegistration:
    """A registered coordinator. Its epoch is the offset of its latest RegisterCoordinatorRecord;
    it is live from registration until fenced (it has no replicas to catch up)."""

    coordinator_id: int
    incarnation_id: str
    endpoint: str
    coordinator_epoch: int
    fenced: bool = False
    # Its internal listener (services/runtime/listeners.py), or "" when it has none.
    internal_endpoint: str = ""

    @property
    def member_endpoint(self) -> str:
        """What the cluster's own members dial: the internal listener, else the public one."""
        return self.internal_endpoint or self.endpoint


@dataclass(frozen=True)
class CoordinatorAssignment:
    """Which coordinator owns one partition of a coordinator topic (`__consumer_offsets` or
    `__transaction_state`; NO_COORDINATOR: none).

    `assignment_epoch` counts the partition's owner changes (0 at its first assignment): it is
    the producer epoch the owner writes the partition with, under `producer_id`. Before the epoch
    would reach limits.producer_epoch_max the partition takes a new producer id at epoch 0, and
    `retired_producer_id` names the old one (NO_PRODUCER_ID: none) until the next rotation: each
    owner fences it, at epoch producer_epoch_max, before writing. An assignment is *valid* only
    while its coordinator is registered with `coordinator_epoch` and unfenced; otherwise the
    partition has no coordinator until the controller reassigns it (see metadata/coordinators.py).
    """

    topic: str
    partition: int
    coordinator_id: int
    coordinator_epoch: int
    assignment_epoch: int
    producer_id: int
    retired_producer_id: int = NO_PRODUCER_ID


@dataclass(frozen=True)
class MetadataImage:
    """The state at `end_offset` (the offset the next record lands at) with the log's `hash`.

    `next_producer_id` is the first producer id no broker has been given yet (ProducerIdsRecord):
    every block handed out lies below it, so it only grows, and a new active controller continues
    from it (KIP-730). `coordinators` holds registered coordinators by id and
    `coordinator_assignments` the owner of each partition of the coordinator topics
    (`__consumer_offsets`, `__transaction_state`) by (topic, partition).
    """

    end_offset: int
    hash: bytes
    timestamp_ms: int
    brokers: Mapping[int, BrokerRegistration]
    topics: Mapping[str, TopicImage]
    topic_names: Mapping[bytes, str]
    configs: Mapping[ConfigKey, Mapping[str, str]]
    next_producer_id: int = 0
    coordinators: Mapping[int, CoordinatorRegistration] = field(default_factory=lambda: _EMPTY)
    coordinator_assignments: Mapping[CoordinatorPartition, CoordinatorAssignment] = field(
        default_factory=lambda: _EMPTY
    )
    # Client quotas (metadata/client_quotas.py): entity (a QuotaEntity: user and/or client.id)
    # -> {quota key: bytes per second}.
    client_quotas: ClientQuotas = field(default_factory=lambda: _EMPTY)
    # ACL bindings (metadata/acls.py; records: metadata/acl_replay.py).
    acls: Acls = field(default_factory=Acls.empty)
    # Users' SCRAM credentials by (user name, mechanism number) (metadata/scram_credentials.py).
    scram_credentials: ScramCredentials = field(default_factory=lambda: _EMPTY)

    @staticmethod
    def empty() -> MetadataImage:
        return MetadataImage(
            end_offset=0,
            hash=INITIAL_HASH,
            timestamp_ms=0,
            brokers=_EMPTY,
            topics=_EMPTY,
            topic_names=_EMPTY,
            configs=_EMPTY,
        )

    def topic_by_id(self, topic_id: bytes) -> TopicImage | None:
        name = self.topic_names.get(topic_id)
        return None if name is None else self.topics.get(name)

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        """The topic's dynamic configs (Kafka names → values); empty when none are set."""
        return self.configs.get((TOPIC_RESOURCE, topic), _EMPTY)

    def live_brokers(self) -> list[BrokerRegistration]:
        """Unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def live_coordinators(self) -> list[CoordinatorRegistration]:
        """Unfenced coordinators, by id."""
        return [c for _, c in sorted(self.coordinators.items()) if not c.fenced]
