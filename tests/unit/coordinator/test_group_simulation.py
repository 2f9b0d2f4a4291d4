"""Goal: under any interleaving of protocol-following clients and faults (joins, leaves, static
leave and rejoin, crashes, stalls, lost answers, subscription changes, partition growth, new
topics, coordinator failover), the group coordinator core never lets two members own a partition,
never accepts a commit from anyone but the partition's one owner, never moves a committed offset
backwards, and once the faults stop, converges: every subscribed partition owned by exactly one
live client and every member STABLE at the assignment epoch.

Method: group_simulator.GroupSimulation, one random.Random(seed) per run (a failure names its
seed and step; rerun it with that seed). After every step: (1) no partition in two members'
assigned ∪ pending in the coordinator's state; (2) no partition owned client-side by two clients
the coordinator still counts as members; (3) at every accepted commit, the committer owns the
partition, no other client does, and the offset is not below the last accepted one; every
failover event also checks that the rebuilt shard equals the live one. At the end, a quiet period
(`settle`) and (4) the liveness check. A few seeds run here; SAMSA_SLOW=1 runs many more.
"""

from __future__ import annotations

from collections import Counter

import pytest
from group_simulator import EVENTS, GroupSimulation

STEPS = 1_000


def run(seed: int, steps: int = STEPS) -> GroupSimulation:
    simulation = GroupSimulation(seed)
    for _ in range(steps):
        simulation.step()
    simulation.settle()
    simulation.check_liveness()
    return simulation


@pytest.mark.parametrize("seed", [1, 2, 3, 848])
def test_simulation_is_safe_and_converges(seed: int) -> None:
    simulation = run(seed)
    print(
        f"seed {seed}: {simulation.steps} steps, events {dict(sorted(simulation.counts.items()))}"
    )
    assert simulation.counts["commit accepted"] > 50
    assert simulation.counts["failover"] > 0


def test_every_event_kind_happens_across_the_seeds() -> None:
    """The simulation must not quietly stop exercising a fault."""
    total: Counter[str] = Counter()
    for seed in (11, 12):
        total.update(run(seed, 600).counts)
    missing = [event for event in EVENTS if total[event] == 0]
    assert not missing, missing
    assert total["commit refused"] > 0  # zombies and stale epochs were turned away


def test_the_same_seed_gives_the_same_run() -> None:
    one, other = run(7, 300), run(7, 300)
    assert one.log == other.log and one.counts == other.counts


@pytest.mark.slow
def test_simulation_many_seeds() -> None:
    for seed in range(100, 130):
        run(seed, 2_000)
