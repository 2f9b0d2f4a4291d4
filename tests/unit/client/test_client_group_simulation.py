"""Goal: the SDK's member logic, fuzzed against the coordinator, never lets two consumers of a
group hold a partition at once (DESIGN §6, KIP-848's "never two owners"), and once the faults
stop the group converges. The coordinator's own simulation (tests/unit/coordinator/
test_group_simulation.py) drives it with a simulated client; here the client is the SDK's:
a defect of GroupMember's reconciliation (754e210: owned partitions reported in the middle of a
reconciliation, so the coordinator handed a partition on while a listener step was taking it)
is what this catches, without anyone having to think of the interleaving.

Method: group_member_simulator.MemberSimulation, one random.Random(seed) per run. Three or four
consumers, each a real GroupMember (the table) with a real FetchState, whose application polls
as the facades' poll() does (rebalance.begin_step / end_step; a listener call may span steps,
and a poll may be cancelled mid-listener: abandon_step), against the real coordinator core
(GroupCoordinatorShard, via group_harness.py). Heartbeats are messages: delayed, delivered,
lost before the coordinator or applied with the answer lost (NETWORK_EXCEPTION). Events: polls,
joins, unsubscribes and subscribes again, subscription changes, crashes (no more heartbeats or
polls; the session timeout removes the member), stalls (the application stops polling:
max.poll.interval.ms makes the member STALE, or the rebalance timeout removes it while its
revocation waits for a poll), time jumps past those timeouts, partitions added, and coordinator
failover (a shard rebuilt from the encoded records, compared with the live one).

What is held: a consumer holds the partitions of its fetch state (what it fetches, hands out or
may commit: owned plus those of an on_partitions_assigned step begun). A crashed process holds
nothing, but the check keeps what it held at the crash until the coordinator removed its member:
until then the coordinator must not give those partitions to anyone. A *stalled* process, on the
other hand, really still holds its partitions until its own logic lets them go (its next poll:
on_partitions_lost), and it may be removed before that — by the rebalance timeout, the session
timeout while its heartbeats are lost, or its own leave when it went STALE. That window exists in
Kafka too (bounded by those timeouts; such a zombie's commits are fenced by the member epoch), so
the check asserts what Kafka promises instead of "never two fetchers": after every step,
(1) in the coordinator's state no partition is in two members' assigned ∪ pending revocation;
(2) no partition is held by two consumers whose member the coordinator still counts; (3) what such
a consumer holds the coordinator attributes to it (a member never takes or keeps a partition the
coordinator gave to someone else); and no member ever ends FATAL. After the run, a quiet period
(every application polls, every heartbeat is answered, crashed members expire) and the liveness
check: every partition of a subscribed topic held by exactly one live consumer, all STABLE, each
holding exactly its owned set and target. A failure names its seed and prints the last events;
rerun one seed with `run(seed)`. A few seeds run here; SAMSA_SLOW=1 runs many more.
"""

from __future__ import annotations

from collections import Counter

import pytest
from group_member_simulator import EVENTS, MemberSimulation

STEPS = 300
SEEDS = range(1, 31)


def run(seed: int, steps: int = STEPS) -> MemberSimulation:
    simulation = MemberSimulation(seed)
    try:
        for _ in range(steps):
            simulation.step()  # checks the invariants after each of its phases
        simulation.settle()
        simulation.check_liveness()
    except AssertionError as error:
        trace = "\n".join(simulation.trace)
        raise AssertionError(
            f"seed {seed}, step {simulation.steps} (drop rate {simulation.drop_rate}, slow "
            f"listener rate {simulation.slow_rate}): {error}\nthe last events:\n{trace}"
        ) from error
    return simulation


@pytest.mark.parametrize("seed", SEEDS)
def test_no_partition_has_two_owners_and_the_group_converges(seed: int) -> None:
    run(seed)


def test_every_event_kind_happens_across_the_seeds() -> None:
    """The simulation must not quietly stop exercising a fault."""
    total: Counter[str] = Counter()
    for seed in (101, 102, 103):
        total.update(run(seed).counts)
    missing = [event for event in EVENTS if total[event] == 0]
    assert not missing, missing


def test_the_same_seed_gives_the_same_run() -> None:
    one, other = run(7, 150), run(7, 150)
    assert one.harness.log == other.harness.log and list(one.trace) == list(other.trace)


@pytest.mark.slow
def test_simulation_many_seeds() -> None:
    for seed in range(1_000, 1_300):
        run(seed, 1_000)
