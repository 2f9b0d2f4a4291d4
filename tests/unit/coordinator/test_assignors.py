"""Goal: the range, uniform and roundrobin assignors hand out exactly the partitions the rules
define — range's consecutive runs by instance id, uniform's floor/ceil balance with the fewest
moves, roundrobin's partitions dealt in turn (Kafka's RoundRobinAssignor examples) — and all are
valid and deterministic whatever garbage the previous target holds.

Method: small hand-built groups with the expected targets written out in full, plus a few
join/leave/grow scenarios where the expected number of moved partitions is computed independently
here (the property file covers random inputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from samsa.services.coordinator.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    Assignment,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    UniformAssignor,
    assignor_named,
)

RANGE = RangeAssignor()
UNIFORM = UniformAssignor()


def member(member_id: str, *topics: str, instance_id: str | None = None) -> MemberSubscription:
    return MemberSubscription(
        member_id=member_id, instance_id=instance_id, topics=frozenset(topics)
    )


def owners(assignment: Assignment) -> dict[tuple[str, int], str]:
    """(topic, partition) -> owner; fails if a partition has two owners."""
    found: dict[tuple[str, int], str] = {}
    for member_id, by_topic in assignment.items():
        for topic, partitions in by_topic.items():
            assert partitions, f"{member_id} lists {topic} with no partitions"
            for partition in partitions:
                assert (topic, partition) not in found, f"{topic}-{partition} owned twice"
                found[(topic, partition)] = member_id
    return found


def assert_valid(
    members: Sequence[MemberSubscription], topics: Mapping[str, int], assignment: Assignment
) -> None:
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


def moved(before: Assignment, after: Assignment) -> int:
    """Partitions that had an owner still in the group and now belong to someone else."""
    old, new = owners(before), owners(after)
    return sum(1 for tp, m in old.items() if m in after and new.get(tp) != m)


def p(*partitions: int) -> frozenset[int]:
    return frozenset(partitions)


# --- names -----------------------------------------------------------------------------------


def test_assignors_by_name() -> None:
    assert set(ASSIGNORS) == {"uniform", "range", "roundrobin"}
    assert DEFAULT_ASSIGNOR == "uniform"
    assert assignor_named("nope") is None
    assert assignor_named("") is None
    assert isinstance(assignor_named("range"), RangeAssignor)
    assert isinstance(assignor_named("uniform"), UniformAssignor)
    assert isinstance(assignor_named("roundrobin"), RoundRobinAssignor)
    for name, assignor in ASSIGNORS.items():
        assert assignor.name == name


# --- roundrobin ------------------------------------------------------------------------------

ROUND_ROBIN = RoundRobinAssignor()


def test_roundrobin_deals_across_topics_where_range_does_not_balance() -> None:
    members = [member("c1", "t0", "t1"), member("c0", "t0", "t1")]
    topics = {"t0": 3, "t1": 3}
    result = ROUND_ROBIN.assign(members, topics, {})
    assert result == {"c0": {"t0": p(0, 2), "t1": p(1)}, "c1": {"t0": p(1), "t1": p(0, 2)}}
    assert counts(RANGE.assign(members, topics, {})) == {"c0": 4, "c1": 2}  # why roundrobin


def test_roundrobin_skips_members_not_subscribed() -> None:
    # Kafka's RoundRobinAssignor documentation: c0 reads t0, c1 t0 and t1, c2 all three.
    members = [member("c0", "t0"), member("c1", "t0", "t1"), member("c2", "t0", "t1", "t2")]
    result = ROUND_ROBIN.assign(members, {"t0": 1, "t1": 2, "t2": 3}, {})
    assert_valid(members, {"t0": 1, "t1": 2, "t2": 3}, result)
    assert result == {
        "c0": {"t0": p(0)},
        "c1": {"t1": p(0)},
        "c2": {"t1": p(1), "t2": p(0, 1, 2)},
    }


def test_roundrobin_orders_static_members_by_instance_id_and_ignores_the_past() -> None:
    members = [member("m-new", "t", instance_id="a"), member("m-old", "t", instance_id="b")]
    current = {"m-old": {"t": p(0, 1, 2)}}
    result = ROUND_ROBIN.assign(members, {"t": 3}, current)
    assert result == {"m-new": {"t": p(0, 2)}, "m-old": {"t": p(1)}}
    assert ROUND_ROBIN.assign([member("lonely", "nothing")], {"t": 3}, {}) == {"lonely": {}}


# --- range -----------------------------------------------------------------------------------


def test_range_paper_example() -> None:
    members = [member("c", "t"), member("a", "t"), member("b", "t")]
    result = RANGE.assign(members, {"t": 10}, {})
    assert result == {"a": {"t": p(0, 1, 2, 3)}, "b": {"t": p(4, 5, 6)}, "c": {"t": p(7, 8, 9)}}


def test_range_topics_with_different_subscribers() -> None:
    members = [member("a", "x", "y"), member("b", "x"), member("c", "x", "y", "z")]
    topics = {"x": 5, "y": 3, "z": 2}
    result = RANGE.assign(members, topics, {})
    assert result == {
        "a": {"x": p(0, 1), "y": p(0, 1)},
        "b": {"x": p(2, 3)},
        "c": {"x": p(4), "y": p(2), "z": p(0, 1)},
    }
    assert_valid(members, topics, result)


def test_range_more_members_than_partitions() -> None:
    members = [member(m, "t") for m in "abcd"]
    result = RANGE.assign(members, {"t": 2}, {})
    assert result == {"a": {"t": p(0)}, "b": {"t": p(1)}, "c": {}, "d": {}}


def test_range_sorts_by_instance_id_so_a_static_member_keeps_its_range() -> None:
    members = [
        member("m-1", "t", instance_id="zeta"),
        member("m-2", "t", instance_id="alpha"),
        member("m-3", "t"),  # dynamic: sorted by its member id among the instance ids
    ]
    result = RANGE.assign(members, {"t": 6}, {})
    assert result == {"m-2": {"t": p(0, 1)}, "m-3": {"t": p(2, 3)}, "m-1": {"t": p(4, 5)}}
    # "alpha" restarts under a new member id that would sort last: it keeps partitions 0 and 1.
    restarted = [members[0], member("z-9", "t", instance_id="alpha"), members[2]]
    again = RANGE.assign(restarted, {"t": 6}, result)
    assert again == {"z-9": {"t": p(0, 1)}, "m-3": {"t": p(2, 3)}, "m-1": {"t": p(4, 5)}}


def test_range_unsubscribed_member_and_missing_topics() -> None:
    members = [member("a", "t", "gone"), member("b"), member("c", "nowhere")]
    topics = {"t": 3, "unsubscribed": 4, "empty": 0}
    result = RANGE.assign(members, topics, {})
    assert result == {"a": {"t": p(0, 1, 2)}, "b": {}, "c": {}}
    assert RANGE.assign([], topics, {}) == {}


def test_range_ignores_current() -> None:
    members = [member("a", "t"), member("b", "t")]
    current = {"a": {"t": p(2, 3)}, "b": {"t": p(0, 1)}}
    assert RANGE.assign(members, {"t": 4}, current) == {"a": {"t": p(0, 1)}, "b": {"t": p(2, 3)}}


# --- uniform: fresh groups -------------------------------------------------------------------


def test_uniform_fresh_homogeneous_group() -> None:
    members = [member("b", "x", "y"), member("a", "x", "y"), member("c", "x", "y")]
    topics = {"x": 4, "y": 3}
    result = UNIFORM.assign(members, topics, {})
    # Fewest first, ties by member id, partitions in (topic, partition) order.
    assert result == {
        "a": {"x": p(0, 3), "y": p(2)},
        "b": {"x": p(1), "y": p(0)},
        "c": {"x": p(2), "y": p(1)},
    }
    assert_valid(members, topics, result)


def test_uniform_fresh_heterogeneous_group_most_constrained_topic_first() -> None:
    members = [member("a", "t1"), member("b", "t1", "t2")]
    topics = {"t1": 4, "t2": 2}
    result = UNIFORM.assign(members, topics, {})
    # t2 (one subscriber) goes first, to b; then t1 fills a up before b gets its last partition.
    assert result == {"a": {"t1": p(0, 1, 2)}, "b": {"t1": p(3), "t2": p(0, 1)}}


def test_uniform_heterogeneous_rebalances_a_loaded_current() -> None:
    members = [member("a", "t1"), member("b", "t1", "t2")]
    topics = {"t1": 4, "t2": 2}
    current = {"b": {"t1": p(0, 1, 2, 3), "t2": p(0, 1)}}
    result = UNIFORM.assign(members, topics, current)
    # b holds 6, a 0: three t1 partitions move (highest first), t2 can only stay on b.
    assert result == {"a": {"t1": p(1, 2, 3)}, "b": {"t1": p(0), "t2": p(0, 1)}}


def test_uniform_no_members_and_no_partitions() -> None:
    assert UNIFORM.assign([], {"t": 3}, {"gone": {"t": p(0)}}) == {}
    members = [member("a", "t"), member("b")]
    assert UNIFORM.assign(members, {}, {"a": {"t": p(0)}}) == {"a": {}, "b": {}}
    assert UNIFORM.assign(members, {"t": 0}, {}) == {"a": {}, "b": {}}


# --- uniform: stickiness ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "topics"),
    [
        ([member(m, "x", "y") for m in "abcd"], {"x": 7, "y": 5}),
        (
            [member("a", "x"), member("b", "x", "y"), member("c", "y", "z")],
            {"x": 5, "y": 4, "z": 3},
        ),
    ],
)
def test_uniform_unchanged_input_moves_nothing(
    members: list[MemberSubscription], topics: dict[str, int]
) -> None:
    first = UNIFORM.assign(members, topics, {})
    assert UNIFORM.assign(members, topics, first) == first


def test_uniform_keeps_a_balanced_current_it_did_not_compute() -> None:
    members = [member("a", "t"), member("b", "t"), member("c", "t")]
    current = {"a": {"t": p(7, 8, 9)}, "b": {"t": p(0, 2, 4, 6)}, "c": {"t": p(1, 3, 5)}}
    assert UNIFORM.assign(members, {"t": 10}, current) == current


def _minimum_moves(old_counts: list[int], partitions: int, members: int) -> int:
    """The fewest partitions old members must give up to reach a floor/ceil balance: the ceil
    quotas go to the largest holders."""
    quotient, remainder = divmod(partitions, members)
    ranked = sorted(old_counts, reverse=True) + [0] * (members - len(old_counts))
    quotas = [quotient + 1] * remainder + [quotient] * (members - remainder)
    return sum(max(0, count - quota) for count, quota in zip(ranked, quotas, strict=True))


@pytest.mark.parametrize(("old_members", "partitions"), [(3, 10), (4, 12), (5, 7), (2, 1), (6, 50)])
def test_uniform_join_moves_the_minimum(old_members: int, partitions: int) -> None:
    members = [member(f"m{i}", "t") for i in range(old_members)]
    before = UNIFORM.assign(members, {"t": partitions}, {})
    joined = [*members, member("new", "t")]
    after = UNIFORM.assign(joined, {"t": partitions}, before)
    assert_valid(joined, {"t": partitions}, after)
    new_counts = sorted(counts(after).values())
    assert new_counts[-1] - new_counts[0] <= 1
    expected = _minimum_moves(list(counts(before).values()), partitions, len(joined))
    assert moved(before, after) == expected
    # Everything that moved went to the newcomer.
    assert counts(after)["new"] == expected


def test_uniform_join_minimum_with_uneven_current() -> None:
    members = [member(m, "t") for m in "abc"]
    current = {"a": {"t": p(*range(6))}, "b": {"t": p(6, 7)}, "c": {"t": p(8, 9)}}
    joined = [*members, member("d", "t")]
    after = UNIFORM.assign(joined, {"t": 10}, current)
    # Quotas 3,3,2,2 with the 3s on a and (b by id): a gives up its three highest partitions,
    # which go fewest first: d takes 3 and 4 (up to its quota), then b takes 5.
    assert after == {
        "a": {"t": p(0, 1, 2)},
        "b": {"t": p(5, 6, 7)},
        "c": {"t": p(8, 9)},
        "d": {"t": p(3, 4)},
    }
    assert moved(current, after) == _minimum_moves([6, 2, 2], 10, 4) == 3


@pytest.mark.parametrize("leaver", ["m0", "m2", "m4"])
def test_uniform_leave_moves_only_the_leavers_partitions(leaver: str) -> None:
    members = [member(f"m{i}", "x", "y") for i in range(5)]
    topics = {"x": 9, "y": 8}
    before = UNIFORM.assign(members, topics, {})
    remaining = [m for m in members if m.member_id != leaver]
    after = UNIFORM.assign(remaining, topics, before)
    assert_valid(remaining, topics, after)
    for member_id, by_topic in before.items():
        if member_id == leaver:
            continue
        for topic, partitions in by_topic.items():
            assert partitions <= after[member_id][topic]
    new_counts = sorted(counts(after).values())
    assert new_counts[-1] - new_counts[0] <= 1


def test_uniform_new_topic_does_not_move_existing_partitions() -> None:
    members = [member(m, "x", "y") for m in "abc"]
    before = UNIFORM.assign(members, {"x": 6}, {})
    after = UNIFORM.assign(members, {"x": 6, "y": 3}, before)
    assert moved(before, after) == 0
    assert sorted(counts(after).values()) == [3, 3, 3]
    assert {m: by_topic["x"] for m, by_topic in after.items()} == {
        m: by_topic["x"] for m, by_topic in before.items()
    }


def test_uniform_partitions_added_move_only_if_balance_requires() -> None:
    members = [member(m, "x") for m in "abc"]
    before = UNIFORM.assign(members, {"x": 6}, {})
    assert moved(before, UNIFORM.assign(members, {"x": 9}, before)) == 0
    # Heterogeneous: a new topic only c subscribes to lands on c; nothing else moves...
    hetero = [member("a", "x"), member("b", "x"), member("c", "x", "z")]
    grown = UNIFORM.assign(hetero, {"x": 6, "z": 1}, before)
    assert moved(before, grown) == 0
    assert grown["c"] == {"x": before["c"]["x"], "z": p(0)}
    # ...until c is loaded enough (5 against 2 and 2) that its x partitions must go elsewhere:
    # only c can own z, so balance 3/3/3 takes exactly c's two x partitions, one to each.
    loaded = UNIFORM.assign(hetero, {"x": 6, "z": 3}, before)
    assert moved(before, loaded) == 2
    assert before == {"a": {"x": p(0, 3)}, "b": {"x": p(1, 4)}, "c": {"x": p(2, 5)}}
    assert loaded == {"a": {"x": p(0, 3, 5)}, "b": {"x": p(1, 2, 4)}, "c": {"z": p(0, 1, 2)}}


def test_uniform_ignores_garbage_in_current() -> None:
    members = [member("a", "t"), member("b", "t", "u")]
    topics = {"t": 4, "u": 2}
    current = {
        "gone": {"t": p(0, 1)},
        "a": {"t": p(0, 1, 17), "u": p(0), "deleted": p(0)},  # a does not subscribe to u
        "b": {"t": p(1, -1), "u": p(1, 5)},  # t-1 is also claimed by a, which sorts first
    }
    result = UNIFORM.assign(members, topics, current)
    assert_valid(members, topics, result)
    assert result == {"a": {"t": p(0, 1, 2)}, "b": {"t": p(3), "u": p(0, 1)}}


# --- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["uniform", "range", "roundrobin"])
def test_member_and_dict_order_do_not_matter(name: str) -> None:
    assignor = ASSIGNORS[name]
    members = [
        member("e", "x", "y", instance_id="i-1"),
        member("a", "x"),
        member("d", "y", "z"),
        member("b", "x", "z"),
        member("c", "x", "y", "z"),
    ]
    topics = {"x": 11, "y": 7, "z": 5}
    current = {"a": {"x": p(0, 1, 2, 3, 4, 5)}, "d": {"z": p(0, 1), "y": p(6)}, "zz": {"x": p(9)}}
    expected = assignor.assign(members, topics, current)
    assert_valid(members, topics, expected)
    reversed_topics = dict(reversed(list(topics.items())))
    reversed_current = {
        m: dict(reversed(list(by_topic.items()))) for m, by_topic in reversed(list(current.items()))
    }
    for order in ([4, 3, 2, 1, 0], [2, 0, 4, 1, 3], [1, 4, 0, 3, 2]):
        shuffled = [members[i] for i in order]
        assert assignor.assign(shuffled, reversed_topics, reversed_current) == expected
