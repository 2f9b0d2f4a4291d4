"""The consumer-group benchmark's shape and its tables (pure: no cluster, no clock): the run's
sizes and settings, the runs' figures, and the tables bench/group_bench.py prints. Kept apart
from the measurements so that tests/unit/bench/test_group_bench.py checks every figure's meaning
on hand-made runs."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.tables import (
    P50,
    P99,
    Cell,
    Metric,
    Table,
    Target,
    cell_of,
    format_cell,
    format_targets,
    is_figure,
)

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
BROKERS, COORDINATORS = 2, 2
ASSIGN, GROUP = "assign", "group"
SIZES = (100, 1024)
CONSUME_PARTITIONS, JOIN_MEMBERS, SHARED_PARTITIONS = 6, 4, 12
SETTLE_S = 1.5  # an assignment is final once unchanged this long (3 heartbeat intervals)
IDLE_S = 10.0  # a consumer that reads nothing this long has failed
GROUP_TARGET = Target("group >= 90% of assign()", "median records/s", True, 0.9, ASSIGN)


@dataclass(frozen=True)
class Plan:
    records: dict[int, int]  # record size -> records pre-produced and read per consume run
    rounds: int  # consume runs of each kind, alternating
    join_rounds: int
    end_to_end_records: int
    latency_rounds: int = 2  # latency runs of each kind, alternating
    interval_s: float = 0.001

    @classmethod
    def for_run(cls, quick: bool) -> Plan:
        scale = 0.2 if quick else 1.0
        return cls(
            # Runs of ~0.5 s: at 100,000 x 100 B and 50,000 x 1 KiB a run lasted 0.12-0.2 s (18
            # polls), so a 30 ms join and one slow poll were a quarter of the rate.
            records={100: int(400_000 * scale), 1024: int(200_000 * scale)},
            rounds=2 if quick else 5,
            join_rounds=2 if quick else 3,
            end_to_end_records=int(1_000 * scale),
            latency_rounds=2 if quick else 3,
        )


@dataclass(frozen=True)
class ConsumeRun:
    """One consumer reading a pre-produced topic to its end."""

    records: int
    size: int
    elapsed_s: float  # first poll() call -> last record
    first_record_s: float  # subscribe() or assign() -> first record
    first_batch: int = 0  # records the first poll() that returned any returned
    steady_s: float = 0.0  # first record -> last record

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s

    @property
    def steady_records_per_s(self) -> Cell:
        """The rate once records flow (the join and connecting left out): the records after
        the first batch over the time after it."""
        if self.steady_s <= 0:
            return "n/a (one batch)"
        return (self.records - self.first_batch) / self.steady_s


def median_cell(cells: Sequence[Cell]) -> Cell:
    """The median of the figures among `cells`, or the first reason when none is a figure."""
    figures = [float(cell) for cell in cells if is_figure(cell)]
    if figures:
        return statistics.median(figures)
    return next((cell for cell in cells if isinstance(cell, str)), "n/a (no run)")


def consume_cells(runs: Sequence[ConsumeRun | str]) -> dict[str, list[Cell]]:
    """records/s, MB/s and first-record ms of each run; a failed run's reason in each."""
    cells: dict[str, list[Cell]] = {"rate": [], "mb": [], "first": [], "steady": []}
    for run in runs:
        if isinstance(run, str):
            for figures in cells.values():
                figures.append(run)
            continue
        cells["rate"].append(run.records_per_s)
        cells["mb"].append(run.records_per_s * run.size / 1e6)
        cells["first"].append(run.first_record_s * 1000)
        cells["steady"].append(run.steady_records_per_s)
    return cells


def consumption_table(size: int, plan: Plan, runs: Mapping[str, Sequence[ConsumeRun | str]]) -> str:
    """A row per run, then the medians, group over assign(); then the target's verdict."""
    cells = {column: consume_cells(runs[column]) for column in (ASSIGN, GROUP)}
    rows = [
        (Metric(f"run {index + 1} records/s", f"run {index + 1} records/s", True), row)
        for index in range(plan.rounds)
        if (row := {c: cells[c]["rate"][index] for c in cells if index < len(cells[c]["rate"])})
    ]
    for key, label, higher, decimals in (
        ("rate", "median records/s", True, 0),
        ("mb", "median MB/s", True, 1),
        ("first", "median first record ms", False, 0),
        ("steady", "median steady records/s", True, 0),
    ):
        row = {column: median_cell(cells[column][key]) for column in cells}
        rows.append((Metric(label, label, higher, decimals), row))
    title = (
        f"Group consumption beside assign(): {plan.records[size]:,} records of {size:,} B, "
        f"{CONSUME_PARTITIONS} partitions, one consumer, {plan.rounds} alternating runs each "
        "(group: fresh group id, auto.offset.reset earliest, auto-commit on; rate from the "
        "first poll() to the last record, join included; first record: from subscribe()/assign(); "
        "steady: from the first record on)"
    )
    table = Table(title, rows, (GROUP,), (ASSIGN,))
    target = format_targets(
        "target (group over assign())", {"median records/s": table.row("median records/s")},
        (GROUP_TARGET,), (GROUP,),
    )  # fmt: skip
    return f"{table.text}\n\n{target}"


def join_time_s(calls: Sequence[float], subscribed_at: Sequence[float], settled_at: float) -> float:
    """From the first subscribe() to the last listener call before the group was seen settled
    (the calls close() makes afterwards, revoking everything, are not part of the join)."""
    joined = [call for call in calls if call <= settled_at]
    if not joined:
        raise RuntimeError("the group settled, but no listener call was made")
    return max(joined) - min(subscribed_at)


def join_table(rounds_s: Sequence[Cell], warm_up_s: Cell) -> str:
    """Each round's join time in ms, their median, beside the heartbeat interval; a failed
    round carries its reason."""
    cells = [float(cell) * 1000 if is_figure(cell) else cell for cell in rounds_s]
    median = median_cell(cells)
    rows = [
        (Metric("ms", f"round {index + 1} join ms", False), {"join": cell})
        for index, cell in enumerate(cells)
    ]
    heartbeats = float(median) / HEARTBEAT_INTERVAL_MS if is_figure(median) else median
    rows += [
        (Metric("ms", "median join ms", False), {"join": median}),
        (Metric("ms", "heartbeat interval ms", False), {"join": float(HEARTBEAT_INTERVAL_MS)}),
        (Metric("x", "median in heartbeats", False, 1), {"join": heartbeats}),
    ]
    title = (
        f"Join time: {JOIN_MEMBERS} consumers subscribe at once to a {SHARED_PARTITIONS}-partition "
        "topic, a fresh group each round; from the first subscribe() to the last listener call, "
        f"once each owns its final {SHARED_PARTITIONS // JOIN_MEMBERS} (stable {SETTLE_S:g} s); "
        f"group.consumer.heartbeat.interval.ms {HEARTBEAT_INTERVAL_MS}"
    )
    warm = f"{float(warm_up_s) * 1000:,.0f} ms" if is_figure(warm_up_s) else warm_up_s
    note = f"  warm-up (not counted): the run's first group owned its partition after {warm}"
    return f"{Table(title, rows, ('join',), ()).text}\n{note}"


FAILOVER_ROWS = (
    ("partitions", "partitions moved", 0),
    ("assigned_ms", "-> all assigned ms", 0),
    ("consumed_ms", "-> all consumed ms", 0),
    ("close_ms", "close() took ms", 0),
    ("session_ms", "session timeout ms", 0),
)
KILL, LEAVE = "SIGKILL", "close() (leave)"


def failover_cell(result: dict | str, key: str) -> Cell:
    """A figure, the short reason the scenario put in its place ("n/a (killed)"), or the
    reason the whole scenario carries."""
    if isinstance(result, str):
        return result
    value = result.get(key, f"n/a (no {key})")
    return value if is_figure(value) or isinstance(value, str) else f"n/a ({value!r})"


def failover_table(results: Mapping[str, dict | str]) -> str:
    """`results`: group_member_proc.failover's, by "kill" and "leave"."""
    columns = {KILL: results.get("kill", "n/a"), LEAVE: results.get("leave", "n/a")}
    rows = [
        (
            Metric(key, label, False, decimals),
            {c: failover_cell(r, key) for c, r in columns.items()},
        )
        for key, label, decimals in FAILOVER_ROWS
    ]
    title = (
        f"Failover: 3 member processes on a {SHARED_PARTITIONS}-partition topic produced to "
        "steadily (1 record/ms, round robin); one close()s, later another is SIGKILLed; from the "
        "close() call (the kill) to every one of its partitions assigned to / first consumed by "
        f"a survivor; group.consumer.session.timeout.ms {SESSION_TIMEOUT_MS} (a killed member is "
        "removed when its session expires, counted from its last heartbeat: up to one interval "
        f"before the kill), heartbeat interval {HEARTBEAT_INTERVAL_MS} ms"
    )
    return Table(title, rows, (KILL, LEAVE), ()).text


def latency_table(results: Mapping[str, Sequence[dict | str]], plan: Plan) -> str:
    """p50 and p99 of each column: the median over its runs; every run's under the table."""
    rows = []
    for metric in (P50, P99):
        row = {
            column: median_cell([cell_of(run, metric.key) for run in runs])
            for column, runs in results.items()
        }
        rows.append((Metric(metric.key, f"produce->consume {metric.label}", False), row))
    title = (
        f"Produce->consume latency through a group consumer beside assign(): "
        f"{plan.end_to_end_records:,} records of 100 B per run, one per "
        f"{plan.interval_s * 1000:g} ms, 1 partition, acks=1, linger.ms 0, fetch.max.wait.ms 100, "
        f"median of {plan.latency_rounds} alternating runs each (ratio < 1: group faster)"
    )
    every_run = "; ".join(
        f"{column} "
        + " / ".join(
            "/".join(format_cell(cell_of(run, metric.key)) for metric in (P50, P99)) for run in runs
        )
        for column, runs in results.items()
    )
    table = Table(title, rows, (GROUP,), (ASSIGN,)).text
    return f"{table}\n  every run, p50/p99 µs: {every_run}"
