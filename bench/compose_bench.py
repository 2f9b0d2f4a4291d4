"""The compose benchmark: deploy/docker-compose.yml on a real Docker engine beside the same
cluster started on loopback by the launcher (`samsa up`'s code), in one run on one machine (it
is shared and noisy: read the ratios, not the absolute figures).

python -m bench compose            every figure (a few minutes, most of it building the image)
python -m bench compose --quick    a tenth of the records

1. Start, cold, twice: `docker-compose up -d` after `down -v` (fresh named volumes; the image is
   built beforehand) to when `up -d` returns (it waits for the controllers' health checks: the
   other services depend on them), to every service's health check passing, and to the cluster
   healthy (an active controller, 3 brokers unfenced, 2 coordinators registered: seen by a client
   container started as soon as `up -d` returned). Beside them, the launcher's 3 controllers, 3
   brokers and 2 coordinators in a new data directory, to the same cluster health
   (launcher.wait_healthy). Then the CPU the idle cluster uses over 10 s: the containers' cgroups
   (health checks included: a `stat` of the file each service keeps fresh, every 2 s per
   service), or the launcher's 8 processes.
2. Throughput: records of 100 bytes, acks=all, 3 partitions, RF=3, min.insync.replicas=2,
   produced then consumed by one client process running bench/client_bench.py's samsa_produce
   and samsa_consume (the cluster bench's code): from a container on the compose network, from
   the host through the published ports (docker-proxy; the advertised names resolve to 127.0.0.1
   in a private mount namespace), and against the loopback cluster. Ratios are over loopback.

Docker is driven by tests/docker/compose_helpers.py, the compose test's own code (dockerd started
when none answers, the image on the local base samsa-base:bookworm, the compose project). The
client is bench/compose_client.py, with bench/ mounted read-only into the container (which has
no health check of its own). Everything is removed at the end — client containers, the project's
containers, network and volumes (`down -v`), the image — and the dockerd started here is stopped
by its PID, also on failure or Ctrl-C; the loopback cluster's processes too. Without root or the
Docker tools, the compose cells say why and loopback is still measured.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import cluster_bench
from bench.compose_client import (
    BROKERS,
    CLUSTER_TIMEOUT_S,
    COORDINATORS,
    PARTITIONS,
    RECORD_BYTES,
    REPLICAS,
)
from bench.harness import failure_reason, measure_or_reason, print_tables
from bench.tables import CONSUME_MB, CONSUME_RATE, PRODUCE_MB, PRODUCE_RATE, Metric, Table, cell_of

REPO = Path(__file__).resolve().parents[1]
HELPERS = REPO / "tests/docker/compose_helpers.py"
NETWORK, HOST, LOOPBACK = "compose network", "host via ports", "loopback"
COLD_RUNS = 2
COMPOSE_RUNS = tuple(f"compose run {run}" for run in range(1, COLD_RUNS + 1))
START_COLUMNS = (*COMPOSE_RUNS, LOOPBACK)
TOPICS = {NETWORK: "compose-network", HOST: "compose-host", LOOPBACK: "loopback"}
METRICS_PORT = 9100  # SAMSA_METRICS_LISTEN in deploy/docker-compose.yml
SERVICE_NAMES = ("controller-1", "controller-2", "controller-3", "broker-1", "broker-2",
                 "broker-3", "coordinator-1", "coordinator-2")  # fmt: skip
CLIENT_TIMEOUT_S = 600.0

UP_RETURNED = Metric("up_s", "`up -d` returned s", False, 1)
CONTAINERS_HEALTHY = Metric("containers_s", "every health check passed s", False, 1)
CLUSTER_HEALTHY = Metric("cluster_s", "cluster healthy s", False, 1)
IDLE_CPU = Metric("idle_cores", "then idle, CPU cores", False, 2)
IDLE_S = 10.0


@dataclass(frozen=True)
class Plan:
    records: int

    @classmethod
    def for_run(cls, quick: bool) -> Plan:
        return cls(records=10_000 if quick else 100_000)


@dataclass
class Figures:
    """What the run measured, by column: a result dict or the reason there is none."""

    start: dict[str, dict | str] = field(default_factory=dict)
    produced: dict[str, dict | str] = field(default_factory=dict)
    consumed: dict[str, dict | str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


# --- the compose side ------------------------------------------------------------------------


def load_helpers() -> ModuleType:
    """tests/docker/compose_helpers.py, by path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("compose_helpers", HELPERS)
    assert spec is not None and spec.loader is not None, HELPERS
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("compose_helpers", module)
    spec.loader.exec_module(module)
    return module


def docker_missing() -> str:
    """Why the compose side cannot run here, or "" when it can."""
    tools = ("docker", "dockerd", "docker-compose", "debootstrap", "unshare")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        return f"n/a (not installed: {' '.join(missing)})"
    return "" if os.geteuid() == 0 else "n/a (needs root)"


class Clients:
    """The client, run on the compose network (containers named and labelled after the project,
    so that cleanup finds one a Ctrl-C left behind) and on the host through the published ports."""

    def __init__(self, helpers: ModuleType, compose: Any, hosts: Path) -> None:
        self.helpers, self.compose, self.hosts = helpers, compose, hosts
        self.label = f"samsa.bench={compose.project}"
        self.count = 0

    def network_command(self, *args: str) -> list[str]:
        self.count += 1
        compose = self.compose
        return [
            "docker", "run", "--rm", "--name", f"{compose.project}-client-{self.count}",
            "--label", self.label, "--no-healthcheck", "--network", compose.network,
            "-v", f"{REPO / 'bench'}:/opt/samsa-bench/bench:ro",
            "-e", "PYTHONPATH=/opt/samsa-bench", "-e", "PYTHONDONTWRITEBYTECODE=1",
            compose.image, "python", "-m", "bench.compose_client", *args,
        ]  # fmt: skip

    def network(self, *args: str) -> dict:
        command = self.network_command(*args)
        return last_json(self.helpers.run(*command, timeout_s=CLIENT_TIMEOUT_S))

    def host(self, *args: str) -> dict:
        command = [sys.executable, "-m", "bench.compose_client", *args]
        out = self.helpers.on_host(self.hosts, *command, timeout_s=CLIENT_TIMEOUT_S, cwd=REPO)
        return last_json(out)

    def remove_containers(self) -> None:
        listed = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label={self.label}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if ids := listed.stdout.split():
            subprocess.run(["docker", "rm", "-f", "-v", *ids], capture_output=True, timeout=60)


def cold_start(helpers: ModuleType, compose: Any, clients: Clients) -> dict[str, float]:
    """One `up -d` on a project just brought `down -v`: the three start figures."""
    compose.down()
    wall_started, started = time.time(), time.monotonic()
    compose("up", "-d")
    up_s = time.monotonic() - started
    waiter = subprocess.Popen(
        clients.network_command(helpers.NETWORK_BOOTSTRAP, "wait-cluster"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        compose.wait_healthy(started)
        containers_s = time.monotonic() - started
        out, err = waiter.communicate(timeout=CLUSTER_TIMEOUT_S)
        if waiter.returncode != 0:
            raise RuntimeError(f"cluster not healthy: {err.strip()[-300:]}")
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    cluster_s = last_json(out)["healthy_at"] - wall_started
    containers = compose.containers()
    idle = idle_cores(lambda: sum(helpers.container_cpu_s(c) for c in containers))
    return {"up_s": up_s, "containers_s": containers_s, "cluster_s": cluster_s, "idle_cores": idle}


def idle_cores(cpu_s: Callable[[], float]) -> float:
    """CPU seconds used per second over IDLE_S with no client (`cpu_s`: the total so far)."""
    before, started = cpu_s(), time.monotonic()
    time.sleep(IDLE_S)
    return (cpu_s() - before) / (time.monotonic() - started)


def processes_cpu_s(pids: list[int]) -> float:
    """User and system CPU seconds of `pids` so far (/proc/PID/stat fields 14 and 15)."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def measure_throughput(
    figures: Figures, column: str, run_client: Callable[..., dict], records: int
) -> None:
    """Produce then consume the column's topic through `run_client`."""
    topic = TOPICS[column]
    figures.produced[column] = measure_or_reason(lambda: run_client("produce", topic, str(records)))
    if isinstance(figures.produced[column], str):
        figures.consumed[column] = "n/a (no produce)"
        return
    figures.consumed[column] = measure_or_reason(lambda: run_client("consume", topic, str(records)))


def compose_side(figures: Figures, plan: Plan, stack: contextlib.ExitStack) -> None:
    """Build, start cold COLD_RUNS times, then measure throughput on the last cluster; every
    cleanup is registered on `stack` before the thing it undoes is created."""
    helpers = load_helpers()
    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="samsa-bench-compose-")))
    stack.enter_context(helpers.docker_engine(scratch, new_session=True))
    run_id = uuid.uuid4().hex[:8]
    image = f"samsa:compose-bench-{run_id}"
    stack.callback(subprocess.run, ["docker", "rmi", "-f", image], capture_output=True)
    setup_started = time.monotonic()
    helpers.build_base_and_wheels()
    helpers.build_image(image)
    figures.notes.append(
        f"setup: base, wheels and image built in {time.monotonic() - setup_started:.0f} s"
    )
    secret = scratch / "cluster.secret"
    helpers.run("bash", str(helpers.DEPLOY / "generate-secret.sh"), str(secret))
    compose = helpers.Compose(f"samsabench{run_id}", image, secret)
    clients = Clients(helpers, compose, helpers.write_hosts(scratch / "hosts"))
    stack.callback(compose.down)
    stack.callback(clients.remove_containers)  # first: a client holds the network
    for column in COMPOSE_RUNS:
        figures.start[column] = measure_or_reason(lambda: cold_start(helpers, compose, clients))
    bootstrap = helpers.NETWORK_BOOTSTRAP
    clients.network(bootstrap, "create", TOPICS[NETWORK], TOPICS[HOST])
    targets = [f"{name}:{METRICS_PORT}" for name in SERVICE_NAMES]
    scraped = clients.network(bootstrap, "scrape", *targets)
    figures.notes.append(
        f"metrics on the compose network: {len(scraped['answered'])} of {len(targets)} services "
        f"answer http://SERVICE:{METRICS_PORT}/metrics ({scraped['series']} samsa_* series)"
    )
    measure_throughput(figures, NETWORK, lambda *a: clients.network(bootstrap, *a), plan.records)
    host_bootstrap = helpers.HOST_BOOTSTRAP
    measure_throughput(figures, HOST, lambda *a: clients.host(host_bootstrap, *a), plan.records)


def loopback_side(figures: Figures, plan: Plan) -> None:
    """The same shape from the launcher, no Docker; its processes are stopped on the way out."""
    from bench.harness import running_samsa

    started = time.monotonic()
    with running_samsa(3, BROKERS, coordinators=COORDINATORS, name="compose-loopback") as cluster:
        cluster_s = time.monotonic() - started
        pids = [process.pid for process in cluster.processes.values()]
        idle = idle_cores(lambda: processes_cpu_s(pids))
        figures.start[LOOPBACK] = {"cluster_s": cluster_s, "idle_cores": idle}
        bootstrap = cluster.spec.bootstrap_servers

        def run_client(*args: str) -> dict:
            command = [sys.executable, "-m", "bench.compose_client", bootstrap, *args]
            completed = subprocess.run(
                command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, cwd=REPO
            )
            if completed.returncode != 0:
                raise RuntimeError(completed.stderr.strip()[-300:])
            return last_json(completed.stdout)

        run_client("create", TOPICS[LOOPBACK])
        measure_throughput(figures, LOOPBACK, run_client, plan.records)


# --- the tables (pure) -----------------------------------------------------------------------


def start_table(figures: Figures) -> Table:
    rows = []
    for metric in (UP_RETURNED, CONTAINERS_HEALTHY, CLUSTER_HEALTHY, IDLE_CPU):
        row = {}
        for column in START_COLUMNS:
            result = figures.start.get(column, "n/a")
            applies = isinstance(result, str) or metric.key in result
            row[column] = cell_of(result, metric.key) if applies else "n/a"
        rows.append((metric, row))
    title = (
        "start, cold (compose: `up -d` after `down -v`, image built beforehand; loopback: the "
        "launcher in a new data directory), 3 controllers, 3 brokers, 2 coordinators; cluster "
        "healthy = an active controller, every broker unfenced, every coordinator registered; "
        f"idle: CPU used per second over the {IDLE_S:g} s after, no client (compose: the "
        "containers' cgroups, health checks included; loopback: the 8 processes)"
    )
    return Table(title, rows, START_COLUMNS, ())


def throughput_table(figures: Figures, plan: Plan) -> Table:
    rows = []
    for metric, results in (
        (PRODUCE_RATE, figures.produced),
        (PRODUCE_MB, figures.produced),
        (CONSUME_RATE, figures.consumed),
        (CONSUME_MB, figures.consumed),
    ):
        row = {c: cell_of(results.get(c, "n/a"), metric.key) for c in (NETWORK, HOST, LOOPBACK)}
        rows.append((metric, row))
    title = (
        f"{plan.records:,} records of {RECORD_BYTES} bytes, acks=all, {PARTITIONS} partitions, "
        f"RF={REPLICAS}, min.insync.replicas=2, one client process (bench/client_bench.py): from a "
        "container on the compose network, from the host through the published ports, and on "
        "a loopback cluster without Docker (ratio < 1: slower than loopback)"
    )
    return Table(title, rows, (NETWORK, HOST), (LOOPBACK,))


# --- the run ---------------------------------------------------------------------------------


def run_compose_bench(quick: bool = False) -> Iterator[str]:
    """Measure the compose side, clean it up, then the loopback side; yield the tables."""
    plan = Plan.for_run(quick)
    figures = Figures()
    reason = docker_missing()
    if not reason:
        with contextlib.ExitStack() as stack:
            try:
                compose_side(figures, plan, stack)
            except Exception as error:  # loopback's figures still count
                traceback.print_exc()
                reason = failure_reason(error)
    if reason:
        for column in COMPOSE_RUNS:
            figures.start.setdefault(column, reason)
        for column in (NETWORK, HOST):
            figures.produced.setdefault(column, reason)
            figures.consumed.setdefault(column, reason)
    try:
        loopback_side(figures, plan)
    except Exception as error:  # the compose figures still count
        traceback.print_exc()
        figures.start.setdefault(LOOPBACK, failure_reason(error))
        figures.produced.setdefault(LOOPBACK, failure_reason(error))
        figures.consumed.setdefault(LOOPBACK, failure_reason(error))
    yield "\n".join(figures.notes) if figures.notes else "setup: compose side not run"
    yield start_table(figures).text
    yield throughput_table(figures, plan).text


def run(args: argparse.Namespace) -> None:
    print_tables(
        "Samsa in docker-compose vs on loopback", run_compose_bench(args.quick), "compose benchmark"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench compose",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cluster_bench.add_arguments(parser)  # --quick
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
