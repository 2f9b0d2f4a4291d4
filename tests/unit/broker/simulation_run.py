"""Running a replication simulation (replication_sim.py) to its end and judging the healed
cluster: the steps with the invariants checked after each, healing, and the convergence checks
(identical replicas, or under compaction the same newest record per key; nothing acknowledged
lost; every idempotent batch once and in order). Also the modes' options and the slow loop both
simulation tests run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.unit.broker.replication_checks import SafetyViolation, compaction_key
from tests.unit.broker.replication_cluster import BROKERS
from tests.unit.broker.replication_sim import Simulation


def run_to_end(simulation: Simulation, seed: int, steps: int) -> Counter[str]:
    """Take `steps` steps, checking after each, then heal and assert the cluster converged:
    identical replicas, nothing acknowledged lost, every idempotent batch stored once and in
    order. Returns the simulation's counts (the caller closes it)."""
    for number in range(steps):
        kind = simulation.step()
        try:
            simulation.check()
        except SafetyViolation as violation:
            raise SafetyViolation(f"seed {seed}, step {number} ({kind}): {violation}") from None
    simulation.heal()
    assert simulation.settled(), f"seed {seed}: the cluster did not settle after healing"
    logs = simulation.replica_logs()
    # DeleteRecords and retention move each replica's log start on its own (a new leader that
    # had not yet deleted keeps its records), so the replicas agree from the latest start on: a
    # replica whose retention took every record (the active segment too) starts at its log end.
    common = max(
        log[0][0] if log else replica_log_start(simulation, broker_id)
        for broker_id, log in logs.items()
    )
    first = [record for record in logs[BROKERS[0]] if record[0] >= common]
    kept = {o: v for o, v in simulation.acked.items() if o >= simulation.deleted_below}
    if simulation.compaction:
        check_compacted(simulation, logs, common, kept, seed)
        # The idempotent producer's records: each its own key, so compaction keeps them all.
        first = [record for record in first if record[1].startswith(b"p")]
    else:
        for broker_id in BROKERS[1:]:
            tail = [record for record in logs[broker_id] if record[0] >= common]
            assert tail == first, f"seed {seed}: replica {broker_id} differs"
        stored = {offset: value for offset, value, _ in first}
        lost = {o: v for o, v in kept.items() if stored.get(o) != v}
        assert not lost, f"seed {seed}: acknowledged records lost: {sorted(lost)[:10]}"
    # Every batch of the idempotent producer, retried or not, is stored once and in order (from
    # where DeleteRecords left the log).
    sequences = [int(value[1:]) for _, value, _ in first if value.startswith(b"p")]
    since = simulation.next_sequence if not sequences else sequences[0]
    expected = list(range(0 if not simulation.deleted_below else since, simulation.next_sequence))
    assert sequences == expected, f"seed {seed}: {sequences}"
    simulation.counts["records stored"] = len(first)
    return simulation.counts


def replica_log_start(simulation: Simulation, broker_id: int) -> int:
    hosted = simulation.brokers[broker_id].hosted()
    assert hosted is not None
    return hosted.log.log_start_offset


def check_compacted(
    simulation: Simulation,
    logs: dict[int, list[tuple[int, bytes, int]]],
    common: int,
    acknowledged: dict[int, bytes],
    seed: int,
) -> None:
    """Compaction runs on each replica at its own pace, so replicas need not hold the same
    records; they must agree on each key's newest record (and on every other record but those
    compaction may remove in any case: aborted transactions' and markers), no acknowledged
    record may be gone unless a newer record of its key is there, and no data record is keyless
    (the leader refuses one on a compacted topic)."""
    views = []
    for broker_id in BROKERS:
        newest, others = compacted_view(
            [
                (offset, value)
                for offset, value, _ in logs[broker_id]
                if offset >= common and not simulation.cleanable(value)
            ]
        )
        views.append((newest, others))
        assert not others, f"seed {seed}: broker {broker_id} holds keyless records {others[:5]}"
        for offset, value in acknowledged.items():
            if not value.startswith(b"v") or offset < common:
                continue
            kept = newest.get(compaction_key(value))
            assert kept is not None and kept[0] >= offset, (
                f"seed {seed}: broker {broker_id} lost acknowledged {value!r} at {offset} "
                f"(its key's newest record: {kept})"
            )
    assert all(view == views[0] for view in views), f"seed {seed}: replicas disagree"
    simulation.counts["keys compared"] += len(views[0][0])


def compacted_view(
    records: list[tuple[int, bytes | None]],
) -> tuple[dict[bytes, tuple[int, bytes]], list[tuple[int, bytes | None]]]:
    """The newest keyed record of each key, and every keyless record: what replicas compacted
    at their own pace must agree on (pass no record compaction may remove in any case)."""
    newest: dict[bytes, tuple[int, bytes]] = {}
    others = []
    for offset, value in records:
        key = compaction_key(value)
        if key is not None:
            newest[key] = (offset, value)  # type: ignore[assignment]
        else:
            others.append((offset, value))
    return newest, others


# The options of each mode besides the default schedules.
MODES: dict[str, dict[str, bool]] = {
    "power": {"flush_each_append": True, "power_loss": True},
    "broker_power": {"broker_power_loss": True},
    "delete": {"delete_records": True},
    "retention": {"retention": True},
    "compaction": {"compaction": True},
}


def run_mode(
    run: Callable[..., Counter[str]], root: Path, mode: str, seeds: Iterable[int]
) -> Counter[str]:
    """`run(directory, seed, **options)` of `mode` (a MODES key, or "default") for each seed:
    the summed counts."""
    totals: Counter[str] = Counter()
    for seed in seeds:
        totals.update(run(root / f"{mode}-{seed}", seed, **MODES.get(mode, {})))
    return totals


def slow_loop(
    run: Callable[..., Counter[str]], root: Path, ci_seeds: dict[str, int], slow_seeds: int
) -> Counter[str]:
    """`run_mode` over the seeds after those CI runs: `slow_seeds` of the default schedules, a
    quarter as many in each mode `ci_seeds` names besides "default". Returns (and prints) the
    summed counts."""
    totals: Counter[str] = Counter()
    for mode, first in ci_seeds.items():
        count = slow_seeds if mode == "default" else slow_seeds // 4
        totals.update(run_mode(run, root, mode, range(first, first + count)))
    print(dict(totals))
    return totals
