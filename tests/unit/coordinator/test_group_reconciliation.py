"""Goal: the current-assignment builder follows KIP-848's rules exactly — revoke before the epoch
moves (unless the heartbeat's owned set shows the partitions already gone, as Kafka's
ownsRevokedPartitions), leave UNREVOKED only on proof that the pending partitions are gone,
take only free partitions (never two owners), finish UNRELEASED when partitions are freed, and
restart from the STABLE rule when the target moves on.

Method: a table of (member state, target, owners of other members, reported owned) -> expected
next state, each row written out by hand from the rules; plus a randomized check that whatever the
inputs, the result never holds a partition another member owns.
"""

from __future__ import annotations

import random

import pytest

from samsa.services.coordinator.group_model import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    pairs,
)
from samsa.services.coordinator.reconciliation import MemberAssignment, next_assignment


def p(*numbers: int) -> dict[str, frozenset[int]]:
    """Partitions of topic "t" (the normal form: no entry when empty)."""
    return {"t": frozenset(numbers)} if numbers else {}


def member(epoch: int, state: int, assigned=(), pending=(), previous: int = 0) -> MemberAssignment:
    return MemberAssignment(epoch, previous, state, p(*assigned), p(*pending))


ROWS = [
    # (name, current, target, assignment epoch, other owners, reported, expected)
    (
        "stable at the target's epoch: nothing to do",
        member(3, STABLE, (0, 1)),
        p(0, 1, 2),
        3,
        {},
        None,
        member(3, STABLE, (0, 1)),
    ),
    (
        "new member takes its whole free target",
        member(0, STABLE),
        p(0, 1),
        1,
        {},
        p(),
        member(1, STABLE, (0, 1), previous=0),
    ),
    (
        "stable, must revoke: assigned shrinks, epoch stays",
        member(1, STABLE, (0, 1, 2, 3), previous=0),
        p(0, 1),
        2,
        {},
        None,
        member(1, UNREVOKED_PARTITIONS, (0, 1), (2, 3), previous=0),
    ),
    (
        "stable, must revoke, owned still holds one of them: unrevoked",
        member(1, STABLE, (0, 1, 2, 3), previous=0),
        p(0, 1),
        2,
        {},
        p(0, 1, 3),
        member(1, UNREVOKED_PARTITIONS, (0, 1), (2, 3), previous=0),
    ),
    (
        "stable, must revoke what owned shows already gone (a lost answer): epoch moves at once",
        member(2, STABLE, (0, 1, 2), previous=1),
        p(0, 1, 3),
        3,
        {},
        p(0, 1),
        member(3, STABLE, (0, 1, 3), previous=2),
    ),
    (
        "stable, target grows, part of it owned elsewhere: unreleased at the new epoch",
        member(1, STABLE, (0,), previous=0),
        p(0, 1, 2),
        2,
        {("t", 2): "other"},
        None,
        member(2, UNRELEASED_PARTITIONS, (0, 1), previous=1),
    ),
    (
        "unrevoked without owned partitions: stays",
        member(1, UNREVOKED_PARTITIONS, (0,), (1,)),
        p(0),
        2,
        {},
        None,
        member(1, UNREVOKED_PARTITIONS, (0,), (1,)),
    ),
    (
        "unrevoked, still owns a pending partition: stays",
        member(1, UNREVOKED_PARTITIONS, (0,), (1, 2)),
        p(0),
        2,
        {},
        p(0, 2),
        member(1, UNREVOKED_PARTITIONS, (0,), (1, 2)),
    ),
    (
        "unrevoked, revocation confirmed: epoch moves, takes free target",
        member(1, UNREVOKED_PARTITIONS, (0,), (1,), previous=0),
        p(0, 3),
        2,
        {("t", 1): "other-not-yet"},
        p(0),
        member(2, STABLE, (0, 3), previous=1),
    ),
    (
        "unrevoked, confirmed, but the target moved on and takes more away: revoke again",
        member(1, UNREVOKED_PARTITIONS, (0, 1), (2,), previous=0),
        p(1),
        3,
        {},
        p(0, 1),
        member(1, UNREVOKED_PARTITIONS, (1,), (0,), previous=0),
    ),
    (
        "unrevoked, confirmed, the target moved on and takes away what owned lacks: epoch moves",
        member(1, UNREVOKED_PARTITIONS, (0, 1), (2,), previous=0),
        p(1),
        3,
        {},
        p(1),
        member(3, STABLE, (1,), previous=1),
    ),
    (
        "unreleased at the target epoch: partition freed, becomes stable",
        member(2, UNRELEASED_PARTITIONS, (0,), previous=1),
        p(0, 1),
        2,
        {},
        None,
        member(2, STABLE, (0, 1), previous=1),
    ),
    (
        "unreleased, still not free: unchanged",
        member(2, UNRELEASED_PARTITIONS, (0,), previous=1),
        p(0, 1),
        2,
        {("t", 1): "other"},
        None,
        member(2, UNRELEASED_PARTITIONS, (0,), previous=1),
    ),
    (
        "unreleased, target moved on and drops one of its partitions: revoke",
        member(2, UNRELEASED_PARTITIONS, (0, 1), previous=1),
        p(1, 2),
        3,
        {("t", 2): "other"},
        None,
        member(2, UNREVOKED_PARTITIONS, (1,), (0,), previous=1),
    ),
    (
        "pending partitions of another member are not free",
        member(0, STABLE),
        p(5, 6),
        4,
        {("t", 6): "revoker"},
        p(),
        member(4, UNRELEASED_PARTITIONS, (5,), previous=0),
    ),
]


@pytest.mark.parametrize(
    "current,target,assignment_epoch,others,reported,expected",
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_rule(current, target, assignment_epoch, others, reported, expected) -> None:
    owners = dict(others)
    for topic_partition in pairs(current.assigned) | pairs(current.pending_revocation):
        owners[topic_partition] = "me"
    assert next_assignment(current, target, assignment_epoch, owners, "me", reported) == expected


def test_never_takes_a_partition_another_member_owns() -> None:
    rng = random.Random(848)
    for _ in range(2000):
        universe = range(8)
        mine = set(rng.sample(universe, rng.randint(0, 4)))
        pending = set(rng.sample(sorted(set(universe) - mine), rng.randint(0, 2)))
        others = {("t", n): "x" for n in universe if n not in mine | pending and rng.random() < 0.4}
        state = rng.choice([STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS])
        if state != UNREVOKED_PARTITIONS:
            pending = set()
        current = member(rng.randint(0, 3), state, mine, pending)
        owners = {**others, **{("t", n): "me" for n in mine | pending}}
        target = p(*rng.sample(universe, rng.randint(0, 8)))
        reported = rng.choice([None, p(*mine), p(*(mine | pending)), p(*rng.sample(universe, 2))])
        result = next_assignment(current, target, 4, owners, "me", reported)
        taken = pairs(result.assigned) | pairs(result.pending_revocation)
        assert not taken & set(others), (current, target, others, result)
        assert not pairs(result.assigned) & pairs(result.pending_revocation)
        if result.state == UNREVOKED_PARTITIONS and result != current:
            # Revocation is asked only of partitions the member may still own.
            assert reported is None or pairs(reported) & pairs(result.pending_revocation)
        if result.state == STABLE:
            assert result.assigned == target and result.member_epoch == 4
