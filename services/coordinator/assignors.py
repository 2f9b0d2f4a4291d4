"""Server-side partition assignors for consumer groups (KIP-848 style, DESIGN §6).

Theory of operation. In a KIP-848 group the coordinator, not a client leader, decides who reads
what. Whenever the group epoch moves (a member joins or leaves, a subscription changes, a subscribed
topic gains partitions or disappears) the coordinator computes a new *target assignment*: a map
member -> topic -> partitions. Members then converge on it through heartbeats, each revoking what it
loses before anyone else is handed it (the hand-over is the group state machine's business, not
ours). An assignor is the pure function that produces the target from three inputs: the members and
their subscriptions (regular expressions already expanded by the caller), the partition count of
every existing topic, and the previous target. It does no I/O, reads no clock and draws no random
numbers; it sorts wherever order could leak in, so the same inputs give the same target on every
coordinator, whatever the order of the member list or of any dict.

Validity, required of every assignor: every partition of an existing topic that at least one member
subscribes to goes to exactly one member, and only to a member subscribed to its topic; nothing else
appears. Every input member appears in the output, possibly with nothing. Names in the subscriptions
or in the previous target that no longer exist (members, topics, partitions beyond a topic's count)
are ignored.

- `range` is the 2011 Kafka paper's algorithm (Kafka's RangeAssignor): topic by topic, the members
  subscribed to it, sorted by instance id (falling back to member id, so a static member that
  restarts under a new member id keeps its range), each take a run of consecutive partitions; the
  first n % m members take one more. It ignores the previous target. O(T * M log M).
- `roundrobin` is Kafka's RoundRobinAssignor: every subscribed partition, topic by topic in
  name order and partition by partition, goes to the next member round a circle sorted as range
  sorts it, skipping members not subscribed to its topic. With equal subscriptions the counts
  differ by at most one across all topics together, where range can give the first member one
  extra partition of every topic. It ignores the previous target. O(P * M) at worst.
- `uniform` (the default) is balanced and sticky. *Sticky*: it starts from the previous target and
  keeps every partition whose owner is still there and still subscribed. *Balanced*: when all
  members subscribe to the same topics, every member ends with floor(P/M) or ceil(P/M) of the P
  partitions, the ceil quotas going to the members that already hold the most, so the number of
  partitions that change owner is the least any balanced target allows. With different
  subscriptions an exact optimum is a flow problem; we settle for *local* balance: no partition is
  owned by a member a while another member b subscribed to its topic has count(b) + 1 < count(a).
  Unowned partitions are handed out most-constrained topic first (fewest subscribers) to the least
  loaded subscriber; then partitions move from loaded to light members (newly handed-out ones
  first) until no such move is left. Each move lowers the sum of squared member counts, so the loop
  ends. The homogeneous case costs O(P log M); the heterogeneous one O(P * M) per rebalance pass,
  with few passes in practice (1,000 partitions x 100 members: milliseconds).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# topic name -> partition count; the partitions are 0 .. count - 1.
TopicPartitionCounts = Mapping[str, int]
# member id -> topic -> partitions. Topics with no partitions for a member are left out.
Assignment = dict[str, dict[str, frozenset[int]]]
# The previous target, as read back: it may name members, topics and partitions that are gone.
CurrentAssignment = Mapping[str, Mapping[str, frozenset[int]]]
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as the assignor sees it: `topics` are already resolved (regexes expanded) and
    may name topics that do not exist."""

    member_id: str
    instance_id: str | None
    topics: frozenset[str]


class Assignor(Protocol):
    name: str

    def assign(
        self,
        members: Sequence[MemberSubscription],
        topics: TopicPartitionCounts,
        current: CurrentAssignment,
    ) -> Assignment: ...


def _subscriptions(
    members: Sequence[MemberSubscription], topics: TopicPartitionCounts
) -> dict[str, frozenset[str]]:
    """member id -> the subscribed topics that exist and have partitions."""
    subscriptions = {
        member.member_id: frozenset(t for t in member.topics if topics.get(t, 0) > 0)
        for member in members
    }
    assert len(subscriptions) == len(members), "member ids must be unique"
    return subscriptions


def _subscribers(subscriptions: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    """topic -> its subscribers, sorted by member id; only topics somebody subscribes to."""
    subscribers: dict[str, list[str]] = {}
    for member_id in sorted(subscriptions):
        for topic in subscriptions[member_id]:
            subscribers.setdefault(topic, []).append(member_id)
    return subscribers


def _to_assignment(owned: Mapping[str, set[TopicPartition]]) -> Assignment:
    assignment: Assignment = {}
    for member_id in sorted(owned):
        by_topic: dict[str, set[int]] = {}
        for topic, partition in owned[member_id]:
            by_topic.setdefault(topic, set()).add(partition)
        assignment[member_id] = {t: frozenset(by_topic[t]) for t in sorted(by_topic)}
    return assignment


# --- range -----------------------------------------------------------------------------------


def _range_key(member: MemberSubscription) -> tuple[str, str]:
    # The member id breaks ties, should two members ever carry the same instance id.
    return (
        member.instance_id if member.instance_id is not None else member.member_id,
        member.member_id,
    )


class RangeAssignor:
    """Per topic, consecutive runs of partitions over the subscribers sorted by instance id."""

    name = "range"

    def assign(
        self,
        members: Sequence[MemberSubscription],
        topics: TopicPartitionCounts,
        current: CurrentAssignment,
    ) -> Assignment:
        del current  # Range is not sticky: the same members and topics always give the same target.
        subscriptions = _subscriptions(members, topics)
        assignment: Assignment = {member_id: {} for member_id in sorted(subscriptions)}
        ordered_members = sorted(members, key=_range_key)
        for topic in sorted(_subscribers(subscriptions)):
            subscribed = [m for m in ordered_members if topic in subscriptions[m.member_id]]
            partition_count = topics[topic]
            quotient, remainder = divmod(partition_count, len(subscribed))
            start = 0
            for index, member in enumerate(subscribed):
                size = quotient + (1 if index < remainder else 0)
                if size > 0:
                    assignment[member.member_id][topic] = frozenset(range(start, start + size))
                start += size
            assert start == partition_count
        return assignment


# --- roundrobin ------------------------------------------------------------------------------


class RoundRobinAssignor:
    """Every subscribed partition, by topic then partition, dealt round a circle of the members
    sorted by instance id: each goes to the next member in the circle subscribed to its topic."""

    name = "roundrobin"

    def assign(
        self,
        members: Sequence[MemberSubscription],
        topics: TopicPartitionCounts,
        current: CurrentAssignment,
    ) -> Assignment:
        del current  # Not sticky: the same members and topics always give the same target.
        subscriptions = _subscriptions(members, topics)
        circle = [m.member_id for m in sorted(members, key=_range_key)]
        owned: dict[str, set[TopicPartition]] = {member_id: set() for member_id in subscriptions}
        turn = 0
        for topic in sorted(_subscribers(subscriptions)):  # each has a subscriber: no endless skip
            for partition in range(topics[topic]):
                while topic not in subscriptions[circle[turn % len(circle)]]:
                    turn += 1
                owned[circle[turn % len(circle)]].add((topic, partition))
                turn += 1
        return _to_assignment(owned)


# --- uniform ---------------------------------------------------------------------------------


def _kept(
    subscriptions: Mapping[str, frozenset[str]],
    topics: TopicPartitionCounts,
    current: CurrentAssignment,
) -> dict[str, set[TopicPartition]]:
    """The still-valid part of the previous target. A partition claimed by two members (a
    corrupt input) stays with the smaller member id."""
    owned: dict[str, set[TopicPartition]] = {member_id: set() for member_id in subscriptions}
    claimed: set[TopicPartition] = set()
    for member_id in sorted(current):
        if member_id not in subscriptions:
            continue
        for topic in sorted(current[member_id]):
            if topic not in subscriptions[member_id]:
                continue
            for partition in sorted(current[member_id][topic]):
                topic_partition = (topic, partition)
                if 0 <= partition < topics[topic] and topic_partition not in claimed:
                    claimed.add(topic_partition)
                    owned[member_id].add(topic_partition)
    return owned


def _release_order(topic_partition: TopicPartition) -> tuple[int, str]:
    """Members over quota give up their highest-numbered partitions first."""
    topic, partition = topic_partition
    return (-partition, topic)


def _balance_homogeneous(
    owned: dict[str, set[TopicPartition]], unassigned: list[TopicPartition]
) -> None:
    """Everyone subscribes to the same topics: exact floor/ceil quotas, fewest moves."""
    member_ids = sorted(owned, key=lambda m: (-len(owned[m]), m))
    total = len(unassigned) + sum(len(partitions) for partitions in owned.values())
    quotient, remainder = divmod(total, len(member_ids))
    # The ceil quotas go to the members holding the most: that minimises what must be given up.
    quota = {m: quotient + (1 if index < remainder else 0) for index, m in enumerate(member_ids)}
    for member_id in member_ids:
        excess = len(owned[member_id]) - quota[member_id]
        if excess > 0:
            released = sorted(owned[member_id], key=_release_order)[:excess]
            owned[member_id].difference_update(released)
            unassigned.extend(released)
    unassigned.sort()
    below_quota = [(len(owned[m]), m) for m in member_ids if len(owned[m]) < quota[m]]
    heapq.heapify(below_quota)
    for topic_partition in unassigned:
        count, member_id = heapq.heappop(below_quota)
        owned[member_id].add(topic_partition)
        if count + 1 < quota[member_id]:
            heapq.heappush(below_quota, (count + 1, member_id))
    assert not below_quota, "the quotas add up to the partition count"


def _fill_heterogeneous(
    owned: dict[str, set[TopicPartition]],
    unassigned: list[TopicPartition],
    subscribers: Mapping[str, list[str]],
) -> None:
    """Unowned partitions, most-constrained topic first, each to its least loaded subscriber."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in unassigned:
        by_topic.setdefault(topic, []).append(partition)
    for topic in sorted(by_topic, key=lambda t: (len(subscribers[t]), t)):
        # Within one topic only its subscribers' counts change, so the heap stays exact.
        loads = [(len(owned[m]), m) for m in subscribers[topic]]
        heapq.heapify(loads)
        for partition in by_topic[topic]:
            count, member_id = loads[0]
            owned[member_id].add((topic, partition))
            heapq.heapreplace(loads, (count + 1, member_id))


def _rebalance_heterogeneous(
    owned: dict[str, set[TopicPartition]],
    kept: set[TopicPartition],
    subscribers: Mapping[str, list[str]],
) -> None:
    """Move partitions to lighter subscribers until no move would strictly improve balance."""
    moved = True
    while moved:
        moved = False
        # A move takes from a member above the minimum + 1, so the minimum never falls within a
        # pass: members at or below the stale bound cannot give anything. Any move means
        # another pass, so breaking out early never skips a member that changed.
        count_min = min(len(partitions) for partitions in owned.values())
        for member_id in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            if len(owned[member_id]) <= count_min + 1:
                break
            # Newly handed-out partitions move before kept ones, high partition numbers first.
            candidates = sorted(owned[member_id], key=lambda tp: (tp in kept, *_release_order(tp)))
            for topic_partition in candidates:
                target = min(subscribers[topic_partition[0]], key=lambda m: (len(owned[m]), m))
                if len(owned[target]) + 1 < len(owned[member_id]):
                    owned[member_id].remove(topic_partition)
                    owned[target].add(topic_partition)
                    kept.discard(topic_partition)
                    moved = True


class UniformAssignor:
    """Balanced and sticky: keep what is still valid, move as little as balance requires."""

    name = "uniform"

    def assign(
        self,
        members: Sequence[MemberSubscription],
        topics: TopicPartitionCounts,
        current: CurrentAssignment,
    ) -> Assignment:
        subscriptions = _subscriptions(members, topics)
        if not subscriptions:
            return {}
        subscribers = _subscribers(subscriptions)
        owned = _kept(subscriptions, topics, current)
        kept = {tp for partitions in owned.values() for tp in partitions}
        unassigned = [
            (topic, partition)
            for topic in sorted(subscribers)
            for partition in range(topics[topic])
            if (topic, partition) not in kept
        ]
        expected = len(kept) + len(unassigned)
        if len(set(subscriptions.values())) == 1:
            _balance_homogeneous(owned, unassigned)
        else:
            _fill_heterogeneous(owned, unassigned, subscribers)
            _rebalance_heterogeneous(owned, kept, subscribers)
        assert sum(len(partitions) for partitions in owned.values()) == expected
        return _to_assignment(owned)


ASSIGNORS: Mapping[str, Assignor] = {
    "uniform": UniformAssignor(),
    "range": RangeAssignor(),
    "roundrobin": RoundRobinAssignor(),
}
DEFAULT_ASSIGNOR = "uniform"
assert DEFAULT_ASSIGNOR in ASSIGNORS


def assignor_named(name: str) -> Assignor | None:
    """The assignor a group asked for by name, or None when there is no such assignor."""
    return ASSIGNORS.get(name)
