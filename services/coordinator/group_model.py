"""The coordinator's in-memory picture of the groups of one partition of `__consumer_offsets`.

Theory of operation. `GroupShard` holds every group of one partition; it is exactly the replay of
that partition's records (group_replay.replay is its only mutator, and the handlers write through
it too). Everything here is persistent except the timers (`Member.session_deadline_ms` and
`revocation_deadline_ms`, fields with compare=False): they live in memory only, and a
coordinator that loads a partition restarts them (`group_shard.GroupCoordinatorShard.start_timers`),
which also starts `ConsumerGroup.empty_since_ms` of an empty group whose log does not say.

Partition sets are `Partitions` = topic -> frozenset of partition numbers with no empty entry, so
two equal sets are equal dicts; the helpers below keep that normal form.

Invariant (KIP-848's "never two owners"): every partition is in the `assigned` ∪
`pending_revocation` of at most one member of its group; `ConsumerGroup.owners` is that map, kept
by replay, which refuses a record that would break it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g

# topic -> partitions, normal form: no topic maps to an empty set.
Partitions = dict[str, frozenset[int]]
TopicPartition = tuple[str, int]

STABLE = g.MEMBER_RECONCILE_STATE_STABLE
UNREVOKED_PARTITIONS = g.MEMBER_RECONCILE_STATE_UNREVOKED_PARTITIONS
UNRELEASED_PARTITIONS = g.MEMBER_RECONCILE_STATE_UNRELEASED_PARTITIONS

# The position of an offset-commit record applied live but not yet durable: it will land after
# every record already in the log, so it is newer than any of them (group_txn_offsets.py).
IN_FLIGHT = 2**63

# Member epochs with a meaning of their own (coordinator.proto).
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
JOIN_EPOCH = 0


@dataclass(frozen=True)
class GroupConfig:
    """The coordinator's group settings (Kafka's names: group.consumer.*, offsets.retention.*)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int | None = None  # the most members a group may have; None: unbounded
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    default_assignor: str = "uniform"

    def __post_init__(self) -> None:
        assert self.heartbeat_interval_ms > 0
        assert self.session_timeout_ms > self.heartbeat_interval_ms, "heartbeat within session"
        assert self.max_size is None or self.max_size > 0
        assert self.offsets_retention_ms > 0


@dataclass
class Member:
    """One member: its metadata (member_metadata record) and its current assignment
    (current_assignment record)."""

    member_id: str
    instance_id: str = ""
    client_id: str = ""
    topic_names: frozenset[str] = frozenset()
    topic_regex: str = ""
    rebalance_timeout_ms: int = 0
    server_assignor: str = ""
    # Who its heartbeats come from, for what its regex resolves to ("": not judged).
    principal: str = ""
    host: str = ""
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # Timers: in memory only.
    session_deadline_ms: int = field(default=0, compare=False)
    revocation_deadline_ms: int | None = field(default=None, compare=False)

    def subscription(self) -> c.ConsumerGroupSubscription:
        return c.ConsumerGroupSubscription(
            topic_names=sorted(self.topic_names), topic_regex=self.topic_regex
        )

    def metadata_value(self) -> g.MemberMetadataValue:
        return g.MemberMetadataValue(
            group_instance_id=self.instance_id,
            client_id=self.client_id,
            subscription=self.subscription(),
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            principal=self.principal,
            host=self.host,
        )

    def current_value(self) -> g.CurrentAssignmentValue:
        return g.CurrentAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=self.state,  # type: ignore[arg-type]
            assigned_partitions=to_topic_partitions(self.assigned),
            partitions_pending_revocation=to_topic_partitions(self.pending_revocation),
        )


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    subscription_digest: bytes = b""
    assignment_epoch: int = 0
    # The target assignment; a member without an entry has an empty target.
    target: dict[str, Partitions] = field(default_factory=dict)
    # In the order of each member's last member_metadata record (see group_replay).
    members: dict[str, Member] = field(default_factory=dict)
    offsets: dict[TopicPartition, g.OffsetCommitValue] = field(default_factory=dict)
    # Per partition, the log offset of the offset-commit record, a value or a tombstone, that
    # last set it (IN_FLIGHT until it is durable): a transaction's pending offset applies only
    # when it is newer (group_txn_offsets.py). Bookkeeping, not state: left out of ==.
    offset_positions: dict[TopicPartition, int] = field(default_factory=dict, compare=False)
    # Derived: partition -> the member whose assigned ∪ pending_revocation holds it.
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    # When the group was last left without members; offset retention counts from it. Replayed
    # from the group_metadata record written then (GroupMetadataValue.empty_since_ms); a load
    # whose log does not say starts it at the load (never expire early). Left out of ==.
    empty_since_ms: int | None = field(default=None, compare=False)
    # Members the last target computation gave nothing because their target would not fit one
    # record (group_assignment.bounded_target) -> the bytes it would take: their heartbeats are
    # answered MESSAGE_TOO_LARGE. In memory only: a load forgets it until the next computation.
    oversized: dict[str, int] = field(default_factory=dict, compare=False)

    def metadata_value(self) -> g.GroupMetadataValue:
        return g.GroupMetadataValue(
            group_epoch=self.group_epoch, subscription_digest=self.subscription_digest
        )

    def member_with_instance(self, instance_id: str) -> Member | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None


@dataclass
class GroupShard:
    """All groups of one partition of `__consumer_offsets`, and its writer epoch."""

    groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    writer_coordinator_id: int = -1
    writer_assignment_epoch: int = -1
    # (group id, partition) -> how many offset-commit records of it were applied live and are
    # not durable yet (group_replay.mark_durable). Bookkeeping, not state: left out of ==.
    offsets_in_flight: dict[tuple[str, TopicPartition], int] = field(
        default_factory=dict, compare=False
    )
    # Group id -> the log offset of the group_metadata tombstone that last deleted it (IN_FLIGHT
    # until durable), and how many such tombstones are in flight: a transaction's offset
    # written before a group's deletion must not bring it back at its COMMIT marker (Kafka's
    # deleteAllOffsets cancels them). Bookkeeping, dropped once no open transaction needs it
    # (group_shard.expire).
    deleted_positions: dict[str, int] = field(default_factory=dict, compare=False)
    deletions_in_flight: dict[str, int] = field(default_factory=dict, compare=False)

    def offset_position(self, group_id: str, topic_partition: TopicPartition) -> int:
        """The log offset of the newest record that set the partition's offset or deleted the
        group (0: none known)."""
        group = self.groups.get(group_id)
        position = 0 if group is None else group.offset_positions.get(topic_partition, 0)
        return max(position, self.deleted_positions.get(group_id, 0))


# --- partition sets ------------------------------------------------------------------------------


def normal(partitions: Mapping[str, Iterable[int]]) -> Partitions:
    """The normal form: frozensets, no empty topic."""
    result: Partitions = {}
    for topic, numbers in partitions.items():
        frozen = frozenset(numbers)
        if frozen:
            result[topic] = frozen
    return result


def union(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Partitions:
    result = dict(a)
    for topic, numbers in b.items():
        result[topic] = result.get(topic, frozenset()) | numbers
    return normal(result)


def difference(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Partitions:
    return normal({topic: numbers - b.get(topic, frozenset()) for topic, numbers in a.items()})


def intersection(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Partitions:
    return normal({topic: numbers & b.get(topic, frozenset()) for topic, numbers in a.items()})


def pairs(partitions: Mapping[str, frozenset[int]]) -> set[TopicPartition]:
    return {(topic, number) for topic, numbers in partitions.items() for number in numbers}


def from_pairs(topic_partitions: Iterable[TopicPartition]) -> Partitions:
    by_topic: dict[str, set[int]] = {}
    for topic, number in topic_partitions:
        by_topic.setdefault(topic, set()).add(number)
    return normal(by_topic)


def to_topic_partitions(partitions: Mapping[str, frozenset[int]]) -> list[c.TopicPartitions]:
    """Sorted by topic, partitions ascending (the proto's canonical order)."""
    return [
        c.TopicPartitions(topic=topic, partitions=sorted(partitions[topic]))
        for topic in sorted(partitions)
        if partitions[topic]
    ]


def from_topic_partitions(topic_partitions: Iterable[c.TopicPartitions]) -> Partitions:
    """Repeated topics are merged (a client may send them)."""
    by_topic: dict[str, set[int]] = {}
    for entry in topic_partitions:
        by_topic.setdefault(entry.topic, set()).update(entry.partitions)
    return normal(by_topic)


def members_counted(count: int) -> str:
    """Say "1 member" or "3 members", in the messages telling a user why a group refused."""
    return f"{count} member" if count == 1 else f"{count} members"
