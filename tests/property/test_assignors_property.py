"""Goal: for any group — 1 to 12 members, 1 to 6 topics of 1 to 40 partitions, equal or differing
subscriptions, and a previous target full of garbage — every assignor returns a valid target
(every subscribed partition exactly once, to a subscriber), uniform's is balanced (counts within
one when subscriptions are equal, locally balanced otherwise), a fixed point of itself, and, from a
well-formed previous target with equal subscriptions, moves exactly the fewest partitions any
floor/ceil balance allows; range's runs are consecutive and sized by the paper's rule;
roundrobin, with equal subscriptions, deals the k-th subscribed partition to the k-th member of
the sorted circle (mod its size). None depends on the order of the member list.

Method: hypothesis draws the topics, the members (some with instance ids, some subscribed to a
topic that does not exist) and a previous target naming gone members, deleted topics, unsubscribed
topics, out-of-range partitions and partitions claimed twice. The checks below restate each rule
directly from the definitions, independently of the assignors' code.
"""

from __future__ import annotations

from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.services.coordinator.assignors import (
    Assignment,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    UniformAssignor,
)

RANGE = RangeAssignor()
ROUND_ROBIN = RoundRobinAssignor()
UNIFORM = UniformAssignor()
GHOST_TOPIC = "ghost"  # subscribed to, never created


@st.composite
def groups(draw: st.DrawFn, *, homogeneous: bool | None = None) -> tuple[list, dict, dict]:
    topic_count = draw(st.integers(1, 6))
    topics = {f"t{i}": draw(st.integers(1, 40)) for i in range(topic_count)}
    names = [*sorted(topics), GHOST_TOPIC]
    member_count = draw(st.integers(1, 12))
    equal = draw(st.booleans()) if homogeneous is None else homogeneous
    shared = frozenset(draw(st.lists(st.sampled_from(names), min_size=1)))
    members = []
    for i in range(member_count):
        subscribed = shared if equal else frozenset(draw(st.lists(st.sampled_from(names))))
        instance_id = draw(st.none() | st.sampled_from([f"i{j}" for j in range(12)]))
        if instance_id in {m.instance_id for m in members}:
            instance_id = None
        members.append(MemberSubscription(f"m{i:02d}", instance_id, subscribed))
    member_ids = [m.member_id for m in members] + ["gone-a", "gone-b"]
    current = draw(
        st.dictionaries(
            st.sampled_from(member_ids),
            st.dictionaries(
                st.sampled_from([*names, "deleted"]),
                st.frozensets(st.integers(-2, 45), max_size=12),
                max_size=4,
            ),
            max_size=len(member_ids),
        )
    )
    return members, topics, current


def owners(assignment: Assignment) -> dict[tuple[str, int], str]:
    found: dict[tuple[str, int], str] = {}
    for member_id, by_topic in assignment.items():
        for topic, partitions in by_topic.items():
            assert partitions
            for partition in partitions:
                assert (topic, partition) not in found
                found[(topic, partition)] = member_id
    return found


def assert_valid(members: list[MemberSubscription], topics: dict, assignment: Assignment) -> None:
    by_id = {m.member_id: m for m in members}
    assert set(assignment) == set(by_id)
    expected = {
        (topic, partition)
        for topic, count in topics.items()
        if any(topic in m.topics for m in members)
        for partition in range(count)
    }
    found = owners(assignment)
    assert set(found) == expected
    for (topic, _), member_id in found.items():
        assert topic in by_id[member_id].topics


def counts(assignment: Assignment) -> dict[str, int]:
    return {m: sum(len(p) for p in by_topic.values()) for m, by_topic in assignment.items()}


def assert_locally_balanced(members: list[MemberSubscription], assignment: Assignment) -> None:
    count = counts(assignment)
    for (topic, partition), owner in owners(assignment).items():
        for other in members:
            if topic in other.topics:
                assert count[other.member_id] + 1 >= count[owner], (topic, partition, owner, other)


@settings(max_examples=150, deadline=None)
@given(groups())
def test_uniform_valid_balanced_and_a_fixed_point(group: tuple) -> None:
    members, topics, current = group
    result = UNIFORM.assign(members, topics, current)
    assert_valid(members, topics, result)
    assert_locally_balanced(members, result)
    if len({m.topics for m in members}) == 1:
        values = counts(result).values()
        assert max(values) - min(values) <= 1
    assert UNIFORM.assign(members, topics, result) == result


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True), st.data())
def test_uniform_homogeneous_moves_the_fewest(group: tuple, data: st.DataObject) -> None:
    members, topics, _ = group
    subscribed = [t for t in sorted(topics) if t in members[0].topics]
    candidates = [None, "gone-a", *[m.member_id for m in members]]
    current: dict[str, dict[str, set[int]]] = {}
    for topic in subscribed:
        for partition in range(topics[topic]):
            owner = data.draw(st.sampled_from(candidates))
            if owner is not None:
                current.setdefault(owner, {}).setdefault(topic, set()).add(partition)
    frozen = {
        m: {t: frozenset(ps) for t, ps in by_topic.items()} for m, by_topic in current.items()
    }
    result = UNIFORM.assign(members, topics, frozen)
    assert_valid(members, topics, result)
    # The fewest moves: ceil quotas to the largest present holders, each gives up its excess.
    partition_total = sum(topics[t] for t in subscribed)
    quotient, remainder = divmod(partition_total, len(members))
    held = sorted(
        (sum(len(ps) for ps in current.get(m.member_id, {}).values()) for m in members),
        reverse=True,
    )
    quotas = [quotient + 1] * remainder + [quotient] * (len(members) - remainder)
    fewest = sum(max(0, h - q) for h, q in zip(held, quotas, strict=True))
    after = owners(result)
    moves = sum(
        1
        for member_id, by_topic in current.items()
        if member_id != "gone-a"
        for topic, partitions in by_topic.items()
        for partition in partitions
        if after[(topic, partition)] != member_id
    )
    assert moves == fewest


@settings(max_examples=100, deadline=None)
@given(groups())
def test_range_valid_consecutive_and_sized_by_rule(group: tuple) -> None:
    members, topics, current = group
    result = RANGE.assign(members, topics, current)
    assert_valid(members, topics, result)
    for topic, count in topics.items():
        subscribed = sorted(
            (m for m in members if topic in m.topics),
            key=lambda m: (m.instance_id or m.member_id, m.member_id),
        )
        start = 0
        for index, member in enumerate(subscribed):
            size = count // len(subscribed) + (1 if index < count % len(subscribed) else 0)
            assert result[member.member_id].get(topic, frozenset()) == set(
                range(start, start + size)
            )
            start += size


@settings(max_examples=100, deadline=None)
@given(groups())
def test_roundrobin_valid_and_dealt_in_turn(group: tuple) -> None:
    members, topics, current = group
    result = ROUND_ROBIN.assign(members, topics, current)
    assert_valid(members, topics, result)
    if len({m.topics for m in members}) != 1:
        return
    circle = sorted(members, key=lambda m: (m.instance_id or m.member_id, m.member_id))
    dealt = [(t, n) for t in sorted(topics) if t in members[0].topics for n in range(topics[t])]
    found = owners(result)
    for k, topic_partition in enumerate(dealt):
        assert found[topic_partition] == circle[k % len(circle)].member_id, (k, topic_partition)
    values = counts(result).values()
    assert max(values) - min(values) <= 1


@settings(max_examples=75, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_member_order_does_not_matter(group: tuple, random: Random) -> None:
    members, topics, current = group
    shuffled = list(members)
    random.shuffle(shuffled)
    for assignor in (UNIFORM, RANGE, ROUND_ROBIN):
        assert assignor.assign(shuffled, topics, current) == assignor.assign(
            members, topics, current
        )
