"""The partition-scale benchmark (issue 10): what an idle partition costs a cluster.

python -m bench scale                  steps of 0, 1,000 and 3,000 idle partitions
python -m bench scale --quick          0 and 1,000 only
python -m bench scale --scale-max N    every default step up to N, and N (a multiple of 100)

One local cluster (1 controller, 3 brokers) for the whole run. Each step creates its idle
partitions as topics of 100 partitions at RF 3 (nothing is ever written to them), waits until
each has a leader and a full ISR and until the metadata log has stopped moving (no more ISR or
leader churn), then measures, one table row per step: how long the CreateTopics request took,
how long until every new partition had a full ISR and until the metadata log was quiet,
synchronous produce p50/p99 (linger.ms=0, acks=all) to a separate 1-partition RF 3 topic, the
idle CPU (% of one core, from /proc/<pid>/stat utime+stime over a few seconds) and RSS
(/proc/<pid>/status VmRSS) of every process, the wall time of `samsa cluster`, and a broker's
restart: broker-1 is stopped cleanly (SIGTERM, waited for), started again, and timed until it is
serving (registered and unfenced, which it is only once every partition log is open and the
metadata applied) and until every partition has its full ISR again.

The targets (issue 10) are printed beside the figures: sync p50 at the largest step ≤ 1.5× the
empty cluster's, idle CPU ≤ 5 % of a core per process, broker RSS growth ≤ 50 KiB per partition
replica. Every process started is stopped by PID on the way out (bench/harness.running_samsa).
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bench.harness import failure_reason, print_tables, running_samsa

BROKERS = 3
REPLICAS = 3
TOPIC_PARTITIONS = 100  # idle partitions per created topic
DEFAULT_STEPS = (0, 1_000, 3_000)
QUICK_STEPS = (0, 1_000)
SYNC_CALLS = 200
CPU_WINDOW_S = 3.0  # how long each idle-CPU sample lasts
SYNC_TOPIC = "scale-sync"  # the 1-partition RF 3 topic the sync produces go to
# After a step's creation the cluster is measured once its metadata log has not moved for
# QUIET_S: opening thousands of logs can stall brokers long enough to be fenced, and the ISR
# churn that follows is not idleness. A step still churning after QUIET_TIMEOUT_S is measured
# anyway, with a note.
QUIET_S = 15.0  # longer than broker.session.timeout.ms (9 s): a stalled broker gets fenced first
QUIET_TIMEOUT_S = 240.0
READY_TIMEOUT_S = 300.0  # a step whose partitions never reach full ISR fails its row, not the run

T = TypeVar("T")

# Issue 10's targets.
P50_RATIO_TARGET = 1.5
IDLE_CPU_TARGET_PERCENT = 5.0
RSS_PER_REPLICA_TARGET_KIB = 50.0


# --- pure helpers --------------------------------------------------------------------------


def steps_for(quick: bool, scale_max: int | None) -> tuple[int, ...]:
    """The run's partition counts: --quick's two, or the defaults capped at and ending with
    --scale-max, a multiple of TOPIC_PARTITIONS (a step creates whole topics of that many)."""
    if quick:
        return QUICK_STEPS
    if scale_max is None:
        return DEFAULT_STEPS
    if scale_max < 0 or scale_max % TOPIC_PARTITIONS:  # 1,250 would create 1,200
        raise ValueError(f"--scale-max must be a multiple of {TOPIC_PARTITIONS}, not {scale_max}")
    return (*(step for step in DEFAULT_STEPS if step < scale_max), scale_max)


def cpu_ticks(stat_line: str) -> int:
    """utime + stime (clock ticks) from one /proc/<pid>/stat line; the command name in
    parentheses may hold spaces, so fields are counted after its closing parenthesis."""
    fields = stat_line[stat_line.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def cpu_percent(ticks_before: int, ticks_after: int, seconds: float, hertz: int) -> float:
    """CPU used over `seconds`, as a percentage of one core."""
    if seconds <= 0:
        return 0.0
    return 100.0 * (ticks_after - ticks_before) / hertz / seconds


def rss_kib(status_text: str) -> int:
    """VmRSS in KiB from /proc/<pid>/status (0 when absent, e.g. a zombie)."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def rss_growth_per_replica_kib(rss_before_kib: int, rss_after_kib: int, replicas: int) -> float:
    """A broker's RSS growth per partition replica it hosts."""
    return (rss_after_kib - rss_before_kib) / replicas if replicas else 0.0


def quiet_after_s(samples: Sequence[tuple[float, int]], quiet_s: float) -> float | None:
    """When the metadata log last moved (seconds, from the first sample), if it has not moved
    for `quiet_s` since; None while it still moves. `samples` are (seconds, metadata offset)."""
    if not samples:
        return None
    last_change = samples[0][0]
    for (_, before), (at, offset) in itertools.pairwise(samples):
        if offset != before:
            last_change = at
    if samples[-1][0] - last_change < quiet_s:
        return None
    return last_change - samples[0][0]


@dataclass
class StepFigures:
    """One step's row; a figure that could not be measured is None (its reason in `notes`)."""

    partitions: int
    create_s: float | None = None  # the CreateTopics request
    ready_s: float | None = None  # from the request until every new partition has a full ISR
    quiet_s: float | None = None  # from the request until the metadata log stopped moving
    p50_ms: float | None = None
    p99_ms: float | None = None
    cpu_percent: dict[str, float] = field(default_factory=dict)  # process name -> % of a core
    rss_kib: dict[str, int] = field(default_factory=dict)
    cluster_cmd_s: float | None = None
    restart_s: float | None = None  # broker-1 started until it is unfenced (serving)
    isr_back_s: float | None = None  # broker-1 started until every partition has a full ISR
    notes: list[str] = field(default_factory=list)


def _figure(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def format_table(steps: Sequence[StepFigures], names: Sequence[str]) -> str:
    """One row per step: create time, sync p50/p99, idle CPU and RSS per process, `samsa
    cluster` time."""
    header = ["partitions", "create s", "full ISR s", "quiet s", "sync p50 ms", "sync p99 ms"]
    header += [f"{name} CPU%" for name in names] + [f"{name} RSS MiB" for name in names]
    header += ["`samsa cluster` s", "restart s", "ISR back s"]
    rows = [header]
    for step in steps:
        row = [
            f"{step.partitions:,}",
            _figure(step.create_s, ".2f"),
            _figure(step.ready_s, ".2f"),
            _figure(step.quiet_s, ".1f"),
            _figure(step.p50_ms, ".2f"),
            _figure(step.p99_ms, ".2f"),
        ]
        row += [_figure(step.cpu_percent.get(name), ".1f") for name in names]
        rss = [step.rss_kib.get(name) for name in names]
        row += [_figure(None if kib is None else kib / 1024, ".0f") for kib in rss]
        row += [_figure(step.cluster_cmd_s, ".2f")]
        row += [_figure(step.restart_s, ".1f"), _figure(step.isr_back_s, ".1f")]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    for step in steps:
        lines += [f"  note ({step.partitions:,}): {note}" for note in step.notes]
    return "\n".join(lines)


def format_targets(steps: Sequence[StepFigures], names: Sequence[str]) -> str:
    """Issue 10's three targets against the run's figures: met, missed, or n/a."""

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "MISSED")

    first, last = steps[0], steps[-1]
    lines = [f"targets (issue 10), at {last.partitions:,} idle partitions:"]
    ratio = (
        last.p50_ms / first.p50_ms
        if first.p50_ms and last.p50_ms is not None and first.partitions == 0
        else None
    )
    lines.append(
        f"  sync p50 <= {P50_RATIO_TARGET}x empty cluster's: "
        f"{_figure(ratio, '.1f')}x  {verdict(None if ratio is None else ratio <= P50_RATIO_TARGET)}"
    )
    worst = max(last.cpu_percent.items(), key=lambda item: item[1], default=None)
    ok = None if worst is None else worst[1] <= IDLE_CPU_TARGET_PERCENT
    worst_text = "n/a" if worst is None else f"{worst[1]:.1f} % ({worst[0]})"
    lines.append(
        f"  idle CPU <= {IDLE_CPU_TARGET_PERCENT:g} % of a core per process: worst {worst_text}  "
        f"{verdict(ok)}"
    )
    brokers = [name for name in names if name.startswith("broker")]
    replicas_each = last.partitions * REPLICAS // max(len(brokers), 1)
    growths = [
        rss_growth_per_replica_kib(first.rss_kib[name], last.rss_kib[name], replicas_each)
        for name in brokers
        if name in first.rss_kib and name in last.rss_kib
    ]
    growth = max(growths) if growths and replicas_each and first.partitions == 0 else None
    lines.append(
        f"  broker RSS growth <= {RSS_PER_REPLICA_TARGET_KIB:g} KiB per partition replica: "
        f"worst {_figure(growth, '.1f')} KiB  "
        f"{verdict(None if growth is None else growth <= RSS_PER_REPLICA_TARGET_KIB)}"
    )
    lines.append(
        f"  broker restart-to-serving time: {_figure(last.restart_s, '.1f')} s "
        f"(full ISR again after {_figure(last.isr_back_s, '.1f')} s)"
    )
    return "\n".join(lines)


# --- the measurements (thin adapters over /proc, the SDK and the CLI) ----------------------


def _read(path: str) -> str:
    with open(path) as file:
        return file.read()


def idle_cpu(pids: dict[str, int], seconds: float = CPU_WINDOW_S) -> dict[str, float]:
    """Each process's CPU over `seconds`, % of one core."""
    hertz = os.sysconf("SC_CLK_TCK")
    before = {name: cpu_ticks(_read(f"/proc/{pid}/stat")) for name, pid in pids.items()}
    started = time.monotonic()
    time.sleep(seconds)
    after = {name: cpu_ticks(_read(f"/proc/{pid}/stat")) for name, pid in pids.items()}
    elapsed = time.monotonic() - started
    return {name: cpu_percent(before[name], after[name], elapsed, hertz) for name in pids}


def rss(pids: dict[str, int]) -> dict[str, int]:
    return {name: rss_kib(_read(f"/proc/{pid}/status")) for name, pid in pids.items()}


def create_idle_partitions(
    admin: object, first_topic: int, partitions: int, timeout_s: float = READY_TIMEOUT_S
) -> tuple[float, float]:
    """Create `partitions` more idle partitions (topics of TOPIC_PARTITIONS at RF 3) in one
    request; returns the request's wall time and the time until every new partition has a
    leader and a full ISR (the cluster is only idle from then on)."""
    from samsa.client import NewTopic

    names = [
        f"idle-{index:05d}"
        for index in range(first_topic, first_topic + partitions // TOPIC_PARTITIONS)
    ]
    started = time.monotonic()
    admin.create_topics([NewTopic(name, TOPIC_PARTITIONS, REPLICAS, {}) for name in names])  # type: ignore[attr-defined]
    created = time.monotonic() - started
    deadline = started + timeout_s
    waiting = set(names)
    while waiting:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(waiting)} topics without full ISR after {timeout_s:.0f} s")
        described = admin.describe_topics(sorted(waiting))  # type: ignore[attr-defined]
        waiting = {
            name
            for name, topic in described.items()
            if len(topic.partitions) < TOPIC_PARTITIONS
            or any(p.leader < 0 or len(p.isr) < REPLICAS for p in topic.partitions)
        }
        if waiting:
            time.sleep(0.2)
    return created, time.monotonic() - started


def wait_quiet(admin: object, started: float, timeout_s: float = QUIET_TIMEOUT_S) -> float:
    """Block until the metadata log has not moved for QUIET_S (no ISR changes, no leader
    moves: the cluster is idle); returns when it last moved, in seconds after `started`."""
    samples: list[tuple[float, int]] = []
    while time.monotonic() - started < timeout_s:
        offset = admin.describe_cluster().metadata_offset  # type: ignore[attr-defined]
        samples.append((time.monotonic() - started, offset))
        quiet = quiet_after_s(samples, QUIET_S)
        if quiet is not None:
            return quiet
        time.sleep(0.5)
    raise TimeoutError(f"metadata still moving after {timeout_s:.0f} s (ISR or leader churn)")


def samsa_cluster_time(bootstrap: str) -> float:
    """Wall time of `samsa cluster --partitions` (every partition listed, as the figures in the
    README were measured) against the run's controller (a failure raises)."""
    samsa = Path(sys.executable).with_name("samsa")
    started = time.monotonic()
    subprocess.run(
        [str(samsa), "cluster", "--partitions", "--bootstrap-server", bootstrap],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return time.monotonic() - started


RESTARTED = "broker-1"


def restart_broker(cluster: object, admin: object, topics: Sequence[str]) -> tuple[float, float]:
    """Stop RESTARTED cleanly and start it again; seconds from the start until it is unfenced
    (serving) and until every partition of `topics` has its full ISR."""
    import signal

    process = cluster.processes[RESTARTED]  # type: ignore[attr-defined]
    cluster.killed.add(RESTARTED)  # type: ignore[attr-defined]
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=READY_TIMEOUT_S)
    old_epoch = _broker_epoch(admin)
    started = time.monotonic()
    cluster.start(RESTARTED)  # type: ignore[attr-defined]
    deadline = started + READY_TIMEOUT_S
    while _broker_epoch(admin) in (None, old_epoch):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{RESTARTED} not serving after {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.1)
    serving = time.monotonic() - started
    waiting = set(topics)
    while waiting:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(waiting)} topics without full ISR after the restart")
        described = admin.describe_topics(sorted(waiting))  # type: ignore[attr-defined]
        waiting = {
            name
            for name, topic in described.items()
            if any(p.leader < 0 or len(p.isr) < REPLICAS for p in topic.partitions)
        }
        if waiting:
            time.sleep(0.2)
    return serving, time.monotonic() - started


def _broker_epoch(admin: object) -> int | None:
    """RESTARTED's broker epoch while it is registered and unfenced, else None."""
    broker_id = int(RESTARTED.split("-")[1])
    for broker in admin.describe_cluster().brokers:  # type: ignore[attr-defined]
        if broker.broker_id == broker_id and not broker.fenced:
            return broker.broker_epoch
    return None


def _attempt(step: StepFigures, what: str, function: Callable[[], T]) -> T | None:
    try:
        return function()
    except Exception as error:  # one failed figure must not lose the others
        traceback.print_exc()
        step.notes.append(f"{what}: {failure_reason(error, 120)}")
        return None


def measure_step(
    cluster: object, admin: object, step: StepFigures, first_topic: int, added: int
) -> None:
    from bench.client_bench import samsa_sync_latency

    bootstrap = cluster.spec.bootstrap_servers  # type: ignore[attr-defined]
    if added:
        started = time.monotonic()
        timings = _attempt(
            step, "create", lambda: create_idle_partitions(admin, first_topic, added)
        )
        if timings:
            step.create_s, step.ready_s = timings
        step.quiet_s = _attempt(step, "quiet", lambda: wait_quiet(admin, started))
    else:
        step.create_s = step.ready_s = 0.0
    pids = {name: p.pid for name, p in cluster.processes.items()}  # type: ignore[attr-defined]
    step.cpu_percent = _attempt(step, "idle CPU", lambda: idle_cpu(pids)) or {}
    step.rss_kib = _attempt(step, "RSS", lambda: rss(pids)) or {}
    latency = _attempt(
        step,
        "sync produce",
        lambda: samsa_sync_latency(bootstrap, SYNC_TOPIC, SYNC_CALLS, 100, "all"),
    )
    if latency:
        step.p50_ms, step.p99_ms = latency["p50_us"] / 1000, latency["p99_us"] / 1000
    step.cluster_cmd_s = _attempt(step, "samsa cluster", lambda: samsa_cluster_time(bootstrap))
    topics = [SYNC_TOPIC] + [
        f"idle-{index:05d}"
        for index in range((first_topic * TOPIC_PARTITIONS + added) // TOPIC_PARTITIONS)
    ]
    restart = _attempt(step, "restart", lambda: restart_broker(cluster, admin, topics))
    if restart:
        step.restart_s, step.isr_back_s = restart


def run_scale_bench(steps: Sequence[int]) -> Iterator[str]:
    """Start the cluster, then yield the table (growing) after each step and the targets at
    the end; every process is stopped by PID on the way out."""
    import contextlib

    from bench.rolling_restart import create_replicated_topics, wait_full_isr
    from samsa.client import Admin

    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(running_samsa(1, BROKERS))
        bootstrap = cluster.spec.bootstrap_servers
        admin = stack.enter_context(Admin({"bootstrap.servers": bootstrap}))
        create_replicated_topics(admin, [SYNC_TOPIC], REPLICAS, {})
        wait_full_isr(admin, SYNC_TOPIC, REPLICAS)
        names = sorted(cluster.processes)
        figures: list[StepFigures] = []
        existing = 0
        for partitions in steps:
            step = StepFigures(partitions)
            added = max(partitions - existing, 0)
            measure_step(cluster, admin, step, existing // TOPIC_PARTITIONS, added)
            existing = max(existing, partitions)
            figures.append(step)
            yield (
                f"step {partitions:,} idle partitions (RF {REPLICAS}, {BROKERS} brokers, "
                f"1 controller):\n" + format_table(figures, names)
            )
        yield format_targets(figures, names)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scale bench's own option (--quick comes with the cluster bench's)."""
    parser.add_argument(
        "--scale-max",
        type=int,
        default=None,
        help=f"scale bench: largest step of idle partitions, a multiple of {TOPIC_PARTITIONS}",
    )


def run(args: argparse.Namespace) -> None:
    steps = steps_for(args.quick, args.scale_max)
    print_tables("Samsa partition scale (issue 10)", run_scale_bench(steps), "scale benchmark")


def main(argv: list[str] | None = None) -> None:
    from bench import cluster_bench

    parser = argparse.ArgumentParser(
        prog="python -m bench scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cluster_bench.add_arguments(parser)
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
