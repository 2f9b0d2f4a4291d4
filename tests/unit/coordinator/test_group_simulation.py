"""Goal: under any interleaving of protocol-following clients and faults (joins, leaves, static
leave and rejoin, crashes, stalls, lost answers, subscription changes, partition growth, new
topics, coordinator failover, from a compacted log too), the group coordinator core never lets
two members own a partition, never accepts a commit from anyone but the partition's one owner,
never moves a committed offset backwards, and once the faults stop, converges: every subscribed
partition owned by exactly one live client and every member STABLE at the assignment epoch.

Method: group_simulator.GroupSimulation, one random.Random(seed) per run (a failure names its
seed and step; rerun it with that seed). After every step: (1) no partition in two members'
assigned ∪ pending in the coordinator's state; (2) no partition owned client-side by two clients
the coordinator still counts as members; (3) at every accepted commit, the committer owns the
partition, no other client does, and the offset is not below the last accepted one; (5) no
client that heartbeats on time is removed by a deadline (a strict client never resends an
unchanged owned set); and a standby replaying the log as it grows equals the live shard. At
the end, a quiet period (`settle`) and (4) the liveness check. A few seeds run here;
SAMSA_SLOW=1 runs many more.
"""

from __future__ import annotations

from collections import Counter

import pytest
from group_harness import persistent_view
from group_simulator import CONFIG, EVENTS, GroupSimulation

from samsa.services.coordinator.group_records import decode
from samsa.services.coordinator.group_shard import GroupCoordinatorShard

STEPS = 1_000


def run(seed: int, steps: int = STEPS) -> GroupSimulation:
    simulation = GroupSimulation(seed)
    standby = GroupCoordinatorShard(CONFIG)  # replays the log as it grows
    replayed = 0
    for _ in range(steps):
        simulation.step()
        for offset in range(replayed, len(simulation.log)):
            standby.replay(decode(*simulation.log[offset]), offset)
        replayed = len(simulation.log)
        live = persistent_view(simulation.coordinator.state)
        assert persistent_view(standby.state) == live, (seed, simulation.steps)
    simulation.settle()
    simulation.check_liveness()
    return simulation


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 848])
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
