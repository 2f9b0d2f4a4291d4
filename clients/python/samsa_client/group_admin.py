"""Consumer-group administration, the pure half: answers into dataclasses, and reset plans.

GroupAdminCalls (group_admin_calls.py, behind Admin) does the I/O: it finds each group's
coordinator with FindCoordinator, calls GroupCoordinatorService there, and retries the coordinator
errors (`coordinator_retriable`) until request.timeout.ms. Everything it decides from an answer
lives here, without gRPC, so it is tested with protobuf messages built by hand:

- `listings_of` merges ListGroups answers of every coordinator (a group whose partition is moving
  may be listed by two: the first wins) and sorts them;
- `description_of`, `offsets_of`, `lag_of` turn answers into Kafka-named dataclasses;
- `commit_error_of`, `offset_commit_request` build and judge the OffsetCommit an outside admin
  sends (member_id "" and member_epoch -1: allowed only while the group has no members);
- `plan_offset_resets` chooses the new committed offset of each partition for
  `samsa groups reset-offsets`, as Kafka's kafka-consumer-groups.sh does: from the committed
  offset, the log's earliest and latest offsets and the offsets found for a time, clamped to
  [earliest, latest].
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import SupportsInt

from samsa.client.errors import AuthorizationError, KafkaError, code_of, first_of
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

TopicPartition = tuple[str, int]

# The errors after which the request goes to the group's coordinator again, found anew: the
# group moved (NOT_COORDINATOR), its partition is still being read (LOAD_IN_PROGRESS), or no
# coordinator owns it yet (NOT_AVAILABLE).
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)

# Kafka's names for the states (GroupState.toString).
STATE_NAMES = {
    c.CONSUMER_GROUP_STATE_EMPTY: "Empty",
    c.CONSUMER_GROUP_STATE_ASSIGNING: "Assigning",
    c.CONSUMER_GROUP_STATE_RECONCILING: "Reconciling",
    c.CONSUMER_GROUP_STATE_STABLE: "Stable",
    c.CONSUMER_GROUP_STATE_DEAD: "Dead",
}


def group_state_filter(names: Iterable[str]) -> list[int]:
    """The proto states of Kafka's state names ("Stable", any case), for ListGroups' filter;
    ValueError naming the known ones for a name of none."""
    names = list(names)
    by_name = {name.lower(): state for state, name in STATE_NAMES.items()}
    unknown = [name for name in names if name.lower() not in by_name]
    if unknown:
        raise ValueError(
            f"no group state {', '.join(map(repr, unknown))}: the states are "
            f"{', '.join(STATE_NAMES.values())}"
        )
    return [by_name[name.lower()] for name in names]


# The reset strategies of `reset-offsets`, as Kafka's tool names them (--to-earliest, ...).
RESET_STRATEGIES = (
    "to-earliest",
    "to-latest",
    "to-offset",
    "to-datetime",
    "shift-by",
    "to-current",
    "from-file",
)


class GroupError(KafkaError):
    """An admin operation on a consumer group failed (unknown group, members present, …)."""


@dataclass(frozen=True)
class ConsumerGroupListing:
    group_id: str
    state: str  # "Empty", "Stable", ... (STATE_NAMES)
    member_count: int


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str  # empty for a dynamic member
    client_id: str
    member_epoch: int
    assignment: tuple[TopicPartition, ...]  # what it owns now, sorted
    target_assignment: tuple[TopicPartition, ...]  # what the target gives it, sorted


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[MemberDescription, ...]  # sorted by member id


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int  # the next offset the group reads
    leader_epoch: int = -1  # of the last record processed; -1 when not known
    metadata: str = ""

    @staticmethod
    def of(at: OffsetAndMetadata | SupportsInt) -> OffsetAndMetadata:
        """`at` itself, or a bare offset (any integer, numpy's too) with no leader epoch, as
        Kafka's OffsetAndMetadata(offset)."""
        return at if isinstance(at, OffsetAndMetadata) else OffsetAndMetadata(int(at))


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int  # -1 when nothing was committed
    log_end_offset: int  # -1 when it could not be read
    lag: int  # -1 when unknown
    member_id: str  # the owner now, or empty
    error_code: ErrorCode  # why log_end_offset could not be read, or NONE


@dataclass(frozen=True)
class OffsetReset:
    """One line of a reset plan: where the group is, and where it will be."""

    topic: str
    partition: int
    current_offset: int  # -1 when nothing is committed
    new_offset: int
    # The offset the strategy chose when it lay outside the log's [earliest, latest] and
    # new_offset is the end it was clamped to; None when it was taken as it was.
    clamped_from: int | None = None


def coordinator_retriable(code: int) -> bool:
    """True when the request should go to the group's coordinator again, found anew."""
    return code in COORDINATOR_ERRORS


def state_name(state: int) -> str:
    return STATE_NAMES.get(state, "Unknown")


def listings_of(answers: Iterable[c.ListGroupsResponse]) -> list[ConsumerGroupListing]:
    """Every coordinator's listing merged, one entry per group, sorted by group id."""
    listed: dict[str, ConsumerGroupListing] = {}
    for answer in answers:
        for group in answer.groups:
            listed.setdefault(
                group.group_id,
                ConsumerGroupListing(group.group_id, state_name(group.state), group.member_count),
            )
    return [listed[group_id] for group_id in sorted(listed)]


def _partitions(topics: Iterable[c.TopicPartitions]) -> tuple[TopicPartition, ...]:
    return tuple(sorted((t.topic, p) for t in topics for p in t.partitions))


def description_of(group: c.DescribedGroup) -> ConsumerGroupDescription:
    """A described group; GroupError when the answer is an error (e.g. GROUP_ID_NOT_FOUND)."""
    if group.error_code != ErrorCode.NONE:
        raise GroupError.of(group.error_code, group.error_message)
    return ConsumerGroupDescription(
        group.group_id,
        state_name(group.state),
        group.group_epoch,
        group.assignment_epoch,
        group.assignor_name,
        tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.member_epoch,
                _partitions(m.assignment),
                _partitions(m.target_assignment),
            )
            for m in group.members
        ),
    )


def offsets_of(answer: c.OffsetFetchResponse) -> dict[TopicPartition, OffsetAndMetadata]:
    """The committed offsets of an OffsetFetch answer; partitions with none are left out."""
    if answer.error_code != ErrorCode.NONE:
        raise GroupError.of(answer.error_code, answer.error_message)
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in answer.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.NONE:
                raise GroupError.of(p.error_code, f"{topic.name}-{p.partition}: {p.error_message}")
            if p.committed_offset >= 0:
                offsets[(topic.name, p.partition)] = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch, p.metadata
                )
    return offsets


def unstable(answer: c.OffsetFetchResponse) -> bool:
    """Whether an open transaction holds offsets of a partition asked with require_stable."""
    return any(
        p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT
        for topic in answer.topics
        for p in topic.partitions
    )


def by_topic(partitions: Iterable[TopicPartition]) -> list[c.TopicPartitions]:
    """(topic, partition) pairs as the requests name them: per topic, ascending, no duplicates."""
    grouped: dict[str, set[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, set()).add(partition)
    return [c.TopicPartitions(topic=t, partitions=sorted(ps)) for t, ps in grouped.items()]


def offset_fetch_request(
    group_id: str, partitions: Iterable[TopicPartition] | None
) -> c.OffsetFetchRequest:
    """Ask for `partitions` (None: every committed offset of the group)."""
    return c.OffsetFetchRequest(group_id=group_id, topics=by_topic(partitions or ()))


def offset_delete_request(
    group_id: str, partitions: Iterable[TopicPartition]
) -> c.OffsetDeleteRequest:
    return c.OffsetDeleteRequest(group_id=group_id, topics=by_topic(partitions))


def deleted_offsets_of(answer: c.OffsetDeleteResponse) -> dict[TopicPartition, GroupError | None]:
    """Each partition of an OffsetDelete answer: None (deleted, or nothing was committed) or why
    its offset stays (GROUP_SUBSCRIBED_TO_TOPIC); a whole-group error raises."""
    if answer.error_code != ErrorCode.NONE:
        raise GroupError.of(answer.error_code, answer.error_message)
    return {
        (p.topic, p.partition): group_error_of(p.error_code, p.error_message)
        for p in answer.partitions
    }


def offset_commit_request(
    group_id: str,
    offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
    member_id: str = "",
    member_epoch: int = -1,
) -> c.OffsetCommitRequest:
    """An OffsetCommit; by default from outside the group protocol (member_id "" and
    member_epoch -1), else from a member at its epoch."""
    request = c.OffsetCommitRequest(
        group_id=group_id, member_id=member_id, member_epoch=member_epoch
    )
    by_topic: dict[str, c.OffsetCommitTopic] = {}
    for (topic, partition), value in sorted(offsets.items()):
        value = OffsetAndMetadata.of(value)
        if topic not in by_topic:
            by_topic[topic] = request.topics.add(name=topic)
        by_topic[topic].partitions.add(
            partition=partition,
            committed_offset=value.offset,
            committed_leader_epoch=value.leader_epoch,
            metadata=value.metadata,
        )
    return request


def first_commit_error_of(answer: c.OffsetCommitResponse) -> tuple[int, str]:
    """An OffsetCommit's first partition error and its message naming that partition, or NONE:
    what the retry loop reads (coordinator errors come for every partition alike)."""
    for topic in answer.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.NONE:
                return p.error_code, f"{topic.name}-{p.partition}: {p.error_message}"
    return ErrorCode.NONE, ""


def commit_error_of(group_id: str, answer: c.OffsetCommitResponse) -> KafkaError | None:
    """The first partition's error of an admin OffsetCommit, in words a person acts on, whose
    `errors` names every refused partition (the others were stored); None when every offset
    was stored. A group with members refuses it with UNKNOWN_MEMBER_ID; a topic the caller may
    not READ is an AuthorizationError naming it (Kafka's OffsetCommit refuses it per topic)."""
    errors: dict[TopicPartition, KafkaError] = {}
    for topic in answer.topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.NONE:
                continue
            if p.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                error = GroupError(
                    f"{p.error_message or f'group {group_id!r} has members'}; "
                    "stop the group's consumers first",
                    ErrorCode.UNKNOWN_MEMBER_ID,
                )
            elif p.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:  # the others were stored
                code, resource = ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"topic:{topic.name}"
                error = AuthorizationError(p.error_message, code, resource)
            else:
                message = f"{topic.name}-{p.partition}: {p.error_message}"
                error = GroupError.of(p.error_code, message)
            errors.setdefault((topic.name, p.partition), error)
    return first_of(errors)


def lag_of(answer: c.DescribeGroupLagResponse) -> list[PartitionLag]:
    if answer.error_code != ErrorCode.NONE:
        raise GroupError.of(answer.error_code, answer.error_message)
    return [
        PartitionLag(
            row.topic,
            row.partition,
            row.committed_offset,
            row.log_end_offset,
            row.lag,
            row.member_id,
            code_of(row.error_code),
        )
        for row in answer.partitions
    ]


def group_error_of(code: int, message: str) -> GroupError | None:
    """A per-group answer's error (DescribeGroups, DeleteGroups), or None."""
    return None if code == ErrorCode.NONE else GroupError.of(code, message)


def plan_offset_resets(
    partitions: Iterable[TopicPartition],
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    strategy: str,
    value: int = 0,
    found: Mapping[TopicPartition, int | None] | None = None,
) -> list[OffsetReset]:
    """The new offset of each partition, clamped to [earliest, latest] (Kafka's tool does so;
    `clamped_from` keeps the offset chosen before, for the warning Kafka's tool prints).

    `strategy` is one of RESET_STRATEGIES; `value` is the offset of to-offset or the shift of
    shift-by; `found` holds, for to-datetime, the first offset at or after the time per partition
    (None: no record that late, so the log end, as Kafka's tool does), and for from-file each
    partition's offset read from the file. shift-by moves from the
    committed offset, so it refuses a partition without one (ValueError), as Kafka's tool does;
    to-current keeps the committed offset, and gives a partition without one the log end (Kafka's
    rule: it commits where a new consumer with auto.offset.reset=latest would start).
    """
    if strategy not in RESET_STRATEGIES:
        raise ValueError(f"unknown reset strategy {strategy!r}; one of {RESET_STRATEGIES}")
    plan = []
    for tp in sorted(partitions):
        low, high = earliest[tp], latest[tp]
        assert low <= high, f"{tp}: earliest {low} is past latest {high}"
        current = committed.get(tp, -1)
        if strategy == "to-earliest":
            target = low
        elif strategy == "to-latest":
            target = high
        elif strategy == "to-offset":
            target = value
        elif strategy == "to-datetime":
            at = (found or {}).get(tp)
            target = high if at is None else at
        elif strategy == "to-current":
            target = high if current < 0 else current
        elif strategy == "from-file":
            target = (found or {})[tp]
        else:
            if current < 0:
                raise ValueError(
                    f"cannot shift {tp[0]}-{tp[1]}: the group has no committed offset there "
                    "(use --to-earliest, --to-latest or --to-offset)"
                )
            target = current + value
        new = min(max(target, low), high)
        plan.append(OffsetReset(tp[0], tp[1], current, new, None if new == target else target))
    return plan
