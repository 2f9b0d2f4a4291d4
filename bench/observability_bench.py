"""The observability benchmark: what the Prometheus metrics endpoint and OpenTelemetry tracing
cost produce and consume throughput, beside the same run with both off, measured in one run.

python -m bench observability            (not part of `all`)
python -m bench observability --quick    a tenth of the records, for a smoke run

Five configurations, every other setting identical:
- off: no metrics endpoint, no tracing (the default);
- metrics: every service started with SAMSA_METRICS_LISTEN=127.0.0.1:<free port>
  (services/runtime/metrics.py); each endpoint is scraped once at the end and must answer 200,
  else the run counts as failed (metrics were not really on);
- tracing 1 % and tracing 100 %: what Samsa's tracing costs. Every service is started with
  OTEL_TRACES_EXPORTER=file, SAMSA_TRACES_FILE=<the run's span file>,
  OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=<ratio> and
  OTEL_BSP_MAX_QUEUE_SIZE=65536 (the SDK's 2,048 would drop spans at 100 %); the client process
  samples ParentBased(TraceIdRatioBased(ratio)) into the same file (a batch span processor with
  the same queue) and wraps each run of 1,000 sends in one application span, a unit of work as a
  batch job's chunk (bench/observability_client.py). Every record carries its chunk's
  traceparent, 1 % / 100 % of the chunks are sampled, and the SDK and the services do the rest:
  the producer hands a request's sampled traceparent to the broker, the broker records the
  journey of the sampled records' batches, the consumer makes a poll span per sampled record;
- 1 % span per send ("tracing 1 %, span per send"): tracing 1 %, but the application wraps
  every send() in a span of its own. OpenTelemetry Python spends ~20-30 µs creating a span even
  when the sampler drops it, several times Samsa's whole cost of a send, so this column shows
  what per-record application spans cost, not Samsa's tracing; it has no target.
The spans the file holds after a traced run are counted, per service, in the notes.

A run: a fresh cluster (1 controller, 1 broker, from the launcher, in a temporary directory), a
1-partition topic, then one client process that produces 200,000 records of 100 B (--quick
20,000) with acks=all and reads them back from offset 0 with a fresh assign()ed consumer
(bench/observability_client.py has the settings and the clocks). Every process is stopped by PID
when the run ends, also on failure. The machine is shared: the five configurations run in order,
then in reverse order, and each row keeps the better of the two runs of each configuration.

Targets: metrics cost at most 5 % (records/s at least 0.95x off's), 1 % tracing (chunked) at
most 10 % (at least 0.90x off's), for produce and consume alike. Tracing 100 % and 1 % span per
send have none: the figures what tracing every record, and a span per send, come to.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness import create_topic, measure_or_reason, print_tables
from bench.observability_client import (
    CHUNK_RECORDS,
    SPAN_QUEUE_SIZE_MAX,
    SPANS_CHUNK,
    SPANS_SEND,
)
from bench.tables import (
    CONSUME_MB,
    CONSUME_RATE,
    PRODUCE_MB,
    PRODUCE_RATE,
    Table,
    Target,
    cell_of,
    format_cell,
    format_targets,
)
from samsa.cli.launcher import (
    ClusterSpec,
    LocalCluster,
    free_ports,
    load_or_create,
    running,
    wait_healthy,
)
from samsa.common.span_file import read_spans

REPO = Path(__file__).resolve().parents[1]
SIZE = 100
TOPIC = "observability"
CLIENT_TIMEOUT_S = 600.0  # the client process of one run, produce and consume
SCRAPE_TIMEOUT_S = 10.0

OFF, METRICS, TRACING_1, TRACING_100 = "off", "metrics", "tracing 1%", "tracing 100%"
# "tracing 1%, span per send", short enough for a column of the table (bench/tables.py).
TRACING_1_PER_SEND = "1% span per send"


@dataclass(frozen=True)
class Configuration:
    name: str
    metrics: bool
    sampling_ratio: float | None  # None: no tracing
    span_per_send: bool = False  # the application's spans: per send, else per CHUNK_RECORDS


CONFIGURATIONS = (
    Configuration(OFF, False, None),
    Configuration(METRICS, True, None),
    Configuration(TRACING_1, False, 0.01),
    Configuration(TRACING_100, False, 1.0),
    Configuration(TRACING_1_PER_SEND, False, 0.01, span_per_send=True),
)
MEASURED = tuple(c.name for c in CONFIGURATIONS if c.name != OFF)

TARGETS = {
    METRICS: (
        Target("metrics: produce >= 0.95x off", PRODUCE_RATE.label, True, 0.95, OFF),
        Target("metrics: consume >= 0.95x off", CONSUME_RATE.label, True, 0.95, OFF),
    ),
    TRACING_1: (
        Target("tracing 1%: produce >= 0.90x off", PRODUCE_RATE.label, True, 0.90, OFF),
        Target("tracing 1%: consume >= 0.90x off", CONSUME_RATE.label, True, 0.90, OFF),
    ),
}

# What the services read (services/runtime/metrics.py, services/runtime/telemetry.py); each is
# set or removed for every run, so that the shell's environment cannot turn either on in "off".
METRICS_VARIABLE = "SAMSA_METRICS_LISTEN"
TRACING_VARIABLES = (
    "OTEL_TRACES_EXPORTER",
    "SAMSA_TRACES_FILE",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_BSP_MAX_QUEUE_SIZE",  # the SDK's own variable, which the services' span processor reads
)


@dataclass(frozen=True)
class Plan:
    records: int  # produced, then read back, per run
    rounds: int  # runs of each configuration: in order, then reversed, ...

    @classmethod
    def for_run(cls, quick: bool) -> Plan:
        return cls(records=20_000 if quick else 200_000, rounds=2)

    def order(self, round_: int) -> tuple[Configuration, ...]:
        return CONFIGURATIONS if round_ % 2 == 0 else CONFIGURATIONS[::-1]


# --- the table (pure) ------------------------------------------------------------------------

# A run's result: {"produce": {...}, "consume": {...}, "spans": {service: count}}, or the
# reason it has none.
Run = dict | str


def best_of(runs: Sequence[Run], kind: str) -> dict | str:
    """The `kind` ("produce" or "consume") figures of the run with the highest records/s, or the
    first reason when no run has them."""
    measured = [run[kind] for run in runs if isinstance(run, dict)]
    if not measured:
        return runs[0] if runs else "n/a (no run)"
    return max(measured, key=lambda figures: figures["records_per_s"])


def figures_of(run: Run, kind: str) -> dict | str:
    return run if isinstance(run, str) else run[kind]


def every_run(runs: Mapping[str, Sequence[Run]], kind: str) -> str:
    return "; ".join(
        f"{name} "
        + " / ".join(
            format_cell(cell_of(figures_of(run, kind), "records_per_s")) for run in results
        )
        for name, results in runs.items()
    )


def spans_note(runs: Sequence[Run]) -> str:
    """Each run's span count, total and per service, e.g. "1,234 (bench-client 1,200, …)"."""
    texts = []
    for run in runs:
        if isinstance(run, str):
            texts.append("n/a")
            continue
        spans: dict[str, int] = run.get("spans", {})
        services = ", ".join(f"{name} {count:,}" for name, count in sorted(spans.items()))
        texts.append(f"{sum(spans.values()):,}" + (f" ({services})" if services else ""))
    return " / ".join(texts)


def client_spans_expected(configuration: Configuration, records: int) -> float:
    """The spans a run's client should write: per sampled send, its span and its record's poll
    span; per sampled chunk, its span and its records' poll spans."""
    ratio = configuration.sampling_ratio or 0.0
    if configuration.span_per_send:
        return 2 * records * ratio
    chunks = -(-records // CHUNK_RECORDS)
    return chunks * ratio + records * ratio


def observability_table(runs: Mapping[str, Sequence[Run]], plan: Plan) -> str:
    """The best run of each configuration per row, each over off's; every run's records/s and
    span counts in notes; then the targets' verdicts."""
    best = {
        name: {"produce": best_of(results, "produce"), "consume": best_of(results, "consume")}
        for name, results in runs.items()
    }
    rows = [
        (metric, {name: cell_of(best[name][kind], metric.key) for name in runs})
        for metric, kind in (
            (PRODUCE_RATE, "produce"),
            (PRODUCE_MB, "produce"),
            (CONSUME_RATE, "consume"),
            (CONSUME_MB, "consume"),
        )
    ]
    title = (
        f"Observability cost: {plan.records:,} records of {SIZE} B, 1 partition, acks=all, "
        "produced then read back from offset 0 (fresh assign()ed consumer); 1 controller + 1 "
        f"broker, a fresh cluster per run; best of {plan.rounds} runs per configuration and row "
        "(in order, then reversed)\n"
        "targets: metrics cost <= 5 %, 1 % tracing (a span per chunk of "
        f"{CHUNK_RECORDS:,} sends) cost <= 10 % (records/s over off's)"
    )
    table = Table(title, rows, MEASURED, (OFF,))
    notes = [
        f"  every run, produce records/s: {every_run(runs, 'produce')}",
        f"  every run, consume records/s: {every_run(runs, 'consume')}",
    ]
    traced = [c for c in CONFIGURATIONS if c.sampling_ratio is not None and c.name in runs]
    notes += [f"  spans written, {c.name}, per run: {spans_note(runs[c.name])}" for c in traced]
    expected = ", ".join(
        f"~{client_spans_expected(c, plan.records):,.0f} at {c.name}" for c in traced
    )
    notes += [
        "  off and metrics send() bare; in tracing 1% and 100% (services and client sampling) "
        f"the application wraps each run of {CHUNK_RECORDS:,} sends in one span, whose "
        "traceparent its records carry: 1 % / 100 % of the chunks are sampled, and the columns "
        "show what Samsa's tracing costs (MB/s counts values only)",
        f"  {TRACING_1_PER_SEND} is tracing 1% with an application span around every send() "
        "instead: the application's own spans (~20-30 µs each in OpenTelemetry Python, even "
        "when dropped), not Samsa's tracing; no target",
        f"  client spans expected (a sampled chunk: the chunk's and {CHUNK_RECORDS:,} polls'; a "
        f"sampled send: send and poll): {expected}; fewer in the file means the client's "
        f"BatchSpanProcessor (queue {SPAN_QUEUE_SIZE_MAX:,}, the services' too) dropped some",
    ]
    rate_rows = {label: table.row(label) for label in (PRODUCE_RATE.label, CONSUME_RATE.label)}
    targets = "\n".join(
        format_targets(f"target ({name} over off)", rate_rows, TARGETS[name], (name,))
        for name in TARGETS
    )
    return f"{table.text}\n" + "\n".join(notes) + f"\n\n{targets}"


# --- one run ----------------------------------------------------------------------------------


@contextlib.contextmanager
def environment(variables: Mapping[str, str | None]) -> Iterator[None]:
    """os.environ with `variables` set (None: removed) inside the block, restored after."""
    saved = {name: os.environ.get(name) for name in variables}
    try:
        for name, value in variables.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def service_environments(
    names: Sequence[str],
    configuration: Configuration,
    metrics_ports: Sequence[int],
    traces_file: str,
) -> dict[str, dict[str, str | None]]:
    """Each service's observability variables, by process name ("controller-1", "broker-1")."""
    environments: dict[str, dict[str, str | None]] = {}
    for index, name in enumerate(names):
        variables: dict[str, str | None] = dict.fromkeys((METRICS_VARIABLE, *TRACING_VARIABLES))
        if configuration.metrics:
            variables[METRICS_VARIABLE] = f"127.0.0.1:{metrics_ports[index]}"
        if configuration.sampling_ratio is not None:
            variables |= {
                "OTEL_TRACES_EXPORTER": "file",
                "SAMSA_TRACES_FILE": traces_file,
                "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": f"{configuration.sampling_ratio:g}",
                "OTEL_BSP_MAX_QUEUE_SIZE": str(SPAN_QUEUE_SIZE_MAX),
            }
        environments[name] = variables
    return environments


class ObservedCluster(LocalCluster):
    """A LocalCluster whose every process starts with its own observability variables (the
    launcher hands its own environment on to the processes it spawns)."""

    def __init__(
        self,
        spec: ClusterSpec,
        data_dir: Path,
        environments: Mapping[str, Mapping[str, str | None]],
    ) -> None:
        super().__init__(spec, data_dir)
        assert sorted(environments) == sorted(self.commands()), "one environment per process"
        self.environments = environments

    def start(self, name: str) -> subprocess.Popen[bytes]:
        with environment(self.environments[name]):
            return super().start(name)


def scrape(ports: Sequence[int]) -> None:
    """Every metrics endpoint must answer 200, or metrics were not on."""
    for port in ports:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as answer:
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"{url} answered {answer.status}")


def run_client(bootstrap: str, plan: Plan, configuration: Configuration, traces_file: str) -> dict:
    """bench/observability_client.py in a process of its own; its JSON line."""
    command = [sys.executable, "-m", "bench.observability_client", bootstrap, TOPIC]
    command += [str(plan.records), str(SIZE)]
    if configuration.sampling_ratio is not None:
        command += ["--traces-file", traces_file, "--ratio", str(configuration.sampling_ratio)]
        command += ["--spans", SPANS_SEND if configuration.span_per_send else SPANS_CHUNK]
    clean = {name: None for name in (METRICS_VARIABLE, *TRACING_VARIABLES)}
    with environment(clean):
        # subprocess.run kills the client by its PID on a timeout or an interrupt.
        done = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S
        )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no stderr"]
        raise RuntimeError(f"client exited with {done.returncode}: {tail[0]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(configuration: Configuration, plan: Plan) -> dict:
    """One run of `configuration` on a fresh cluster; the cluster is stopped (by PID, the
    launcher's `running`) before the span file is read, so that the services flushed theirs."""
    slug = configuration.name.replace(" ", "-").replace("%", "pct")
    with tempfile.TemporaryDirectory(prefix=f"samsa-bench-observability-{slug}-") as root:
        data_dir = Path(root) / "cluster"
        traces_file = str(Path(root) / "spans.jsonl")
        spec = load_or_create(data_dir, 1, 1)
        names = ["controller-1", "broker-1"]
        ports = free_ports(len(names), spec.ports) if configuration.metrics else []
        environments = service_environments(names, configuration, ports, traces_file)
        with running(ObservedCluster(spec, data_dir, environments)) as cluster:
            wait_healthy(cluster)
            create_topic(spec.bootstrap_servers, TOPIC, 1)
            result = run_client(spec.bootstrap_servers, plan, configuration, traces_file)
            scrape(ports)
        if configuration.sampling_ratio is not None:
            result["spans"] = count_spans(traces_file)
    return result


def count_spans(traces_file: str) -> dict[str, int]:
    """The spans of the file, by service."""
    if not os.path.exists(traces_file):
        return {}
    return dict(Counter(span.get("service", "") for span in read_spans([traces_file])))


# --- the run ----------------------------------------------------------------------------------


def run_observability_bench(quick: bool = False) -> Iterator[str]:
    """Every configuration `plan.rounds` times, alternating the order; then the table."""
    plan = Plan.for_run(quick)
    runs: dict[str, list[Run]] = {c.name: [] for c in CONFIGURATIONS}
    for round_ in range(plan.rounds):
        for configuration in plan.order(round_):
            runs[configuration.name].append(
                measure_or_reason(lambda c=configuration: measure(c, plan))
            )
    yield observability_table(runs, plan)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The observability bench has no options of its own: --quick comes with the cluster
    bench's."""


def run(args: argparse.Namespace) -> None:
    tables = run_observability_bench(args.quick)
    print_tables("Samsa observability cost", tables, "observability benchmark")
