"""The cluster benchmark: Samsa next to NATS JetStream and Redis Streams, every figure measured in
the same run on the same machine (it is shared and noisy), one table per scenario.

python -m bench cluster            every scenario (or: python -m bench.cluster_bench)
python -m bench cluster --quick    a fifth of the records, for a smoke run

Scenarios: 100-byte and 1 KiB records, 1 and 6 partitions, acks=1, from one Python process.
Samsa runs twice, with compression none and zstd; the peers have no compression, so both Samsa
columns are compared with the same peer figures. Throughput rows: produce records/s and MB/s,
consume records/s and MB/s (the consumer reads back what the producer wrote). Latency (1
partition): one synchronous produce-and-ack at a time, p50/p99, and produce→consume at low load.

Each ratio is Samsa over the best peer of that row: the higher rate, or the lower latency (for a
latency, a ratio below 1 means Samsa is faster). The targets (issue 4 §6): produce ≥ 2× the best
peer, consume ≥ 1× the best peer, sync p99 no worse than JetStream's.

Samsa's measurements live in bench/client_bench.py (samsa_produce, samsa_consume,
samsa_sync_latency, samsa_end_to_end_latency); until that module exists the Samsa columns read
"n/a (not built)" and no Samsa cluster is started. The peers: see bench/peers.py (what each
promises when it acknowledges) and bench/peer_clients.py (how each is driven).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import platform
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samsa.cli.launcher import LocalCluster

# --- the pure core: cells, best peer, ratios, tables -----------------------------------------

Cell = float | str  # a measured figure, or why there is none ("n/a (not built)")

NOT_BUILT = "n/a (not built)"
SAMSA_COLUMNS = ("samsa", "samsa+zstd")
PEER_COLUMNS = ("jetstream", "redis")
COLUMNS = SAMSA_COLUMNS + PEER_COLUMNS
COLUMN_WIDTH = 17
RATIO_WIDTH = 21
LABEL_WIDTH = 25
TARGET_WIDTH = 33


@dataclass(frozen=True)
class Metric:
    """One row of a table: how its figures are shown and which way is better."""

    key: str  # the measurement's dict key: records_per_s, mb_per_s, p50_us, p99_us
    label: str
    higher_is_better: bool
    decimals: int = 0


@dataclass(frozen=True)
class Scenario:
    size: int  # bytes per record value
    partitions: int

    @property
    def title(self) -> str:
        size = f"{self.size // 1024} KiB" if self.size % 1024 == 0 else f"{self.size}-byte"
        noun = "partition" if self.partitions == 1 else "partitions"
        return f"{size} records, {self.partitions} {noun}, acks=1"

    @property
    def topic(self) -> str:
        return f"bench-{self.size}b-{self.partitions}p"


PRODUCE_RATE = Metric("records_per_s", "produce records/s", True)
PRODUCE_MB = Metric("mb_per_s", "produce MB/s", True, 1)
CONSUME_RATE = Metric("records_per_s", "consume records/s", True)
CONSUME_MB = Metric("mb_per_s", "consume MB/s", True, 1)
P50 = Metric("p50_us", "p50 µs", False)
P99 = Metric("p99_us", "p99 µs", False)


def is_figure(cell: Cell | None) -> bool:
    return isinstance(cell, int | float) and not isinstance(cell, bool)


def best_peer(
    row: dict[str, Cell], higher_is_better: bool, peer_columns: tuple[str, ...] = PEER_COLUMNS
) -> tuple[str, float] | None:
    """The peer column with the best figure of the row, or None when no peer has one."""
    figures = [(name, row[name]) for name in peer_columns if is_figure(row.get(name))]
    if not figures:
        return None
    choose = max if higher_is_better else min
    return choose(figures, key=lambda item: item[1])  # type: ignore[return-value]


def ratio(value: Cell | None, best: float | None) -> float | None:
    """Samsa's figure over the best peer's; None when either is missing or the peer's is 0."""
    if not is_figure(value) or best is None or best == 0:
        return None
    return float(value) / best  # type: ignore[arg-type]


def format_cell(cell: Cell | None, decimals: int = 0) -> str:
    """A figure with thousands separators, or the reason there is none."""
    if cell is None:
        return "n/a"
    if isinstance(cell, str):
        return cell
    return f"{cell:,.{decimals}f}"


def format_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def format_table(
    title: str,
    rows: list[tuple[Metric, dict[str, Cell]]],
    samsa_columns: tuple[str, ...] = SAMSA_COLUMNS,
    peer_columns: tuple[str, ...] = PEER_COLUMNS,
) -> str:
    """One fixed-width table: a column per system, then Samsa over the best peer, per Samsa run.

    The best peer's name is shown beside each ratio so that a reader knows what it is against
    (with a single peer, the header names it instead; with none, there is no ratio). A reason
    too long for its column (a failure's message) becomes "see note N", and the notes follow the
    table, one per distinct reason. Long row labels widen the label column."""
    single_peer = len(peer_columns) == 1
    against = peer_columns[0] if single_peer else "best"
    ratio_headers = [f"{name}/{against}" for name in samsa_columns] if peer_columns else []
    ratio_width = max([RATIO_WIDTH, *(len(name) + 2 for name in ratio_headers)])
    label_width = max([LABEL_WIDTH, *(len(metric.label) + 2 for metric, _ in rows)])
    columns = samsa_columns + peer_columns
    header = f"{'':<{label_width}}" + "".join(f"{name:>{COLUMN_WIDTH}}" for name in columns)
    header += "".join(f"{name:>{ratio_width}}" for name in ratio_headers)
    lines = [title, header.rstrip()]
    notes: list[str] = []
    for metric, row in rows:
        line = f"{metric.label:<{label_width}}"
        for name in columns:
            text = format_cell(row.get(name), metric.decimals)
            if len(text) >= COLUMN_WIDTH:
                if text not in notes:
                    notes.append(text)
                text = f"see note {notes.index(text) + 1}"
            line += f"{text:>{COLUMN_WIDTH}}"
        best = best_peer(row, metric.higher_is_better, peer_columns)
        for name in samsa_columns if peer_columns else ():
            text = format_ratio(ratio(row.get(name), best[1] if best else None))
            if best and text != "n/a" and not single_peer:
                text += f" ({best[0]})"
            line += f"{text:>{ratio_width}}"
        lines.append(line.rstrip())
    lines += [f"  note {number}: {text}" for number, text in enumerate(notes, 1)]
    return "\n".join(lines)


Rows = list[tuple[Metric, dict[str, Cell]]]


@dataclass(frozen=True)
class Table:
    title: str
    rows: Rows
    samsa_columns: tuple[str, ...] = SAMSA_COLUMNS
    peer_columns: tuple[str, ...] = PEER_COLUMNS

    @property
    def text(self) -> str:
        return format_table(self.title, self.rows, self.samsa_columns, self.peer_columns)

    def row(self, label: str) -> dict[str, Cell]:
        return next((row for metric, row in self.rows if metric.label == label), {})


@dataclass(frozen=True)
class Target:
    """One of issue 4's targets: Samsa's figure over a reference's, at least (or at most) a
    factor. `against` is a peer column, or "best" for the best peer of the row."""

    label: str
    row_label: str
    higher_is_better: bool
    factor: float
    against: str = "best"


TARGETS = (
    Target("produce >= 2x best peer", "produce records/s", True, 2.0),
    Target("consume >= 1x best peer", "consume records/s", True, 1.0),
    Target("sync produce p99 <= JetStream's", "sync produce p99 µs", False, 1.0, "jetstream"),
)


def verdict(target: Target, row: dict[str, Cell], column: str) -> str:
    """ "met (2.96x)", "missed (1.20x)", or "n/a" when either figure is missing."""
    if target.against == "best":
        best = best_peer(row, target.higher_is_better)
        reference = best[1] if best else None
    else:
        reference = row.get(target.against)
        reference = float(reference) if is_figure(reference) else None  # type: ignore[arg-type]
    value = ratio(row.get(column), reference)
    if value is None:
        return "n/a"
    met = value >= target.factor if target.higher_is_better else value <= target.factor
    return f"{'met' if met else 'missed'} ({value:.2f}x)"


def format_targets(
    title: str,
    rows_by_label: dict[str, dict[str, Cell]],
    targets: tuple[Target, ...] = TARGETS,
    samsa_columns: tuple[str, ...] = SAMSA_COLUMNS,
) -> str:
    """The targets, one line each, a verdict per Samsa column."""
    width = max([TARGET_WIDTH, *(len(target.label) + 2 for target in targets)])
    lines = [
        title,
        f"{'':<{width}}" + "".join(f"{c:>{COLUMN_WIDTH}}" for c in samsa_columns),
    ]
    for target in targets:
        row = rows_by_label.get(target.row_label, {})
        verdicts = "".join(f"{verdict(target, row, c):>{COLUMN_WIDTH}}" for c in samsa_columns)
        lines.append(f"{target.label:<{width}}{verdicts}")
    return "\n".join(lines)


def cell_of(result: dict | str, key: str) -> Cell:
    """A measurement's figure under `key`, or the reason carried instead of a result."""
    if isinstance(result, str):
        return result
    value = result.get(key)
    return value if is_figure(value) else f"n/a (no {key})"


def rows_of(
    measured: Iterable[tuple[Metric, dict[str, dict | str]]], columns: tuple[str, ...] = COLUMNS
) -> Rows:
    """A table's rows from (metric, results by column): each column's figure under the metric's
    key, or the reason its result carries instead."""
    return [
        (metric, {column: cell_of(results[column], metric.key) for column in columns})
        for metric, results in measured
    ]


def failure_reason(error: BaseException, limit: int = 200) -> str:
    """What goes in a cell when a measurement failed (the table moves it to a note)."""
    text = f"failed: {type(error).__name__}: {error}".strip().rstrip(":")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- Samsa's side: bench/client_bench.py, when it exists ---------------------------------------

SAMSA_FUNCTIONS = {
    "produce": "samsa_produce",
    "consume": "samsa_consume",
    "sync_latency": "samsa_sync_latency",
    "end_to_end_latency": "samsa_end_to_end_latency",
}


def load_samsa_functions() -> tuple[dict[str, Callable[..., dict]], str]:
    """Samsa's measurement functions by kind, and why any are missing ("" when none are)."""
    try:
        module = importlib.import_module("bench.client_bench")
    except ModuleNotFoundError as error:
        if error.name == "bench.client_bench":
            return {}, NOT_BUILT
        raise
    functions = {
        kind: getattr(module, name)
        for kind, name in SAMSA_FUNCTIONS.items()
        if callable(getattr(module, name, None))
    }
    return functions, "" if len(functions) == len(SAMSA_FUNCTIONS) else NOT_BUILT


def call_with_available(function: Callable[..., dict], available: dict[str, object]) -> dict:
    """Call `function` with those of `available` that it names, so that the harness does not
    break when client_bench's signatures gain or lose an optional parameter; a required
    parameter the harness cannot supply is an error that names it."""
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    arguments = {
        name: value for name, value in available.items() if takes_any or name in parameters
    }
    missing = [
        name
        for name, parameter in parameters.items()
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and name not in arguments
    ]
    if missing:
        raise TypeError(f"{function.__name__} needs {missing}, which the harness does not supply")
    return function(**arguments)


@contextlib.contextmanager
def running_samsa(
    controllers: int = 1, brokers: int = 1, settings: dict[str, str] | None = None
) -> Iterator[LocalCluster]:
    """A healthy local Samsa cluster in a temporary directory for the run; every process is
    stopped by PID on the way out (the launcher's `running`), whatever happens in between."""
    from samsa.cli.launcher import LocalCluster, load_or_create, running, wait_healthy

    with tempfile.TemporaryDirectory(prefix="samsa-bench-cluster-") as root:
        spec = load_or_create(Path(root), controllers, brokers, settings)
        with running(LocalCluster(spec, Path(root))) as cluster:
            wait_healthy(cluster)
            yield cluster


@contextlib.contextmanager
def samsa_cluster(brokers: int = 1) -> Iterator[str]:
    """A local Samsa cluster (1 controller, `brokers` brokers); yields its bootstrap servers."""
    with running_samsa(1, brokers) as cluster:
        yield cluster.spec.bootstrap_servers


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Create `topic` (replication factor 1) through whichever controller is active."""
    import grpc

    from samsa.v1 import controller_pb2, controller_pb2_grpc, errors_pb2

    request = controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreateTopicsRequest.Topic(
                name=topic, num_partitions=partitions, replication_factor=1
            )
        ]
    )
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        for endpoint in bootstrap.split(","):
            with grpc.insecure_channel(endpoint) as channel:
                stub = controller_pb2_grpc.ControllerServiceStub(channel)
                try:
                    answer = stub.CreateTopics(request, timeout=5)
                except grpc.RpcError as error:
                    last = f"{endpoint}: {error.code().name}"
                    continue
            if answer.status.error_code != errors_pb2.ERROR_CODE_UNSPECIFIED:  # e.g. NOT_CONTROLLER
                last = f"{endpoint}: {answer.status.error_message}"
                continue
            (result,) = answer.topics
            if result.error_code in (
                errors_pb2.ERROR_CODE_UNSPECIFIED,
                errors_pb2.ERROR_CODE_TOPIC_ALREADY_EXISTS,
            ):
                return
            last = f"{errors_pb2.ErrorCode.Name(result.error_code)}: {result.error_message}"
        time.sleep(0.2)
    raise RuntimeError(f"could not create {topic}: {last}")


# --- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How much each cell measures: a few seconds per cell, the whole run within ~3 minutes."""

    records: dict[int, int]  # record size -> records per throughput cell
    sync_calls: int
    end_to_end_records: int
    end_to_end_interval_s: float = 0.001

    @classmethod
    def for_run(cls, quick: bool) -> Plan:
        scale = 0.2 if quick else 1.0
        return cls(
            records={100: int(100_000 * scale), 1024: int(50_000 * scale)},
            sync_calls=int(2_000 * scale),
            end_to_end_records=int(1_000 * scale),
        )


SIZES = (100, 1024)
PARTITION_COUNTS = (1, 6)
TARGET_SCENARIO = (100, 1)  # (size, partitions) the targets are set for


def measure_or_reason(function: Callable[[], dict]) -> dict | str:
    """Run one measurement; a failure becomes the cell's text, with the traceback on stderr."""
    try:
        return function()
    except Exception as error:  # one failed cell must not lose the others
        traceback.print_exc()
        return failure_reason(error)


class Systems:
    """Every system's measurement functions, keyed by column; a column without them carries the
    reason instead (e.g. Samsa before bench/client_bench.py lands)."""

    def __init__(
        self,
        peers: dict[str, str],
        samsa: dict[str, Callable[..., dict]],
        samsa_reason: str,
        bootstrap: str,
    ) -> None:
        from bench.peer_clients import MEASUREMENTS

        self.peer_urls = {"jetstream": peers.get("nats", ""), "redis": peers.get("redis", "")}
        self.peer_functions = {"jetstream": MEASUREMENTS["nats"], "redis": MEASUREMENTS["redis"]}
        self.samsa = samsa
        self.samsa_reason = samsa_reason
        self.bootstrap = bootstrap

    def run(self, column: str, kind: str, scenario: Scenario, count: int, plan: Plan) -> dict | str:
        if column in PEER_COLUMNS:
            url = self.peer_urls[column]
            if not url:
                return "n/a (not started)"
            function = self.peer_functions[column][kind]
            if kind in ("produce", "consume"):
                return measure_or_reason(
                    lambda: function(url, count, scenario.size, scenario.partitions)
                )
            if kind == "end_to_end_latency":
                return measure_or_reason(
                    lambda: function(url, count, scenario.size, plan.end_to_end_interval_s)
                )
            return measure_or_reason(lambda: function(url, count, scenario.size))
        if kind not in self.samsa:
            return self.samsa_reason or NOT_BUILT
        compression = "zstd" if column == "samsa+zstd" else "none"
        topic = f"{scenario.topic}-{compression}"
        if kind not in ("produce", "consume"):
            topic += f"-{kind.replace('_', '-')}"
        available = {
            "bootstrap": self.bootstrap,
            "bootstrap_servers": self.bootstrap,
            "topic": topic,
            "n": count,
            "count": count,
            "size": scenario.size,
            "partitions": scenario.partitions,
            "compression": compression,
            "acks": 1,
            "interval_s": plan.end_to_end_interval_s,
        }

        def measure() -> dict:
            if kind in ("produce", "sync_latency", "end_to_end_latency"):
                create_topic(self.bootstrap, topic, scenario.partitions)
            return call_with_available(self.samsa[kind], available)

        return measure_or_reason(measure)


def throughput_table(systems: Systems, scenario: Scenario, plan: Plan) -> Table:
    count = plan.records[scenario.size]
    produced: dict[str, dict | str] = {}
    consumed: dict[str, dict | str] = {}
    for column in COLUMNS:  # each system writes then reads its own records before the next
        produced[column] = systems.run(column, "produce", scenario, count, plan)
        if isinstance(produced[column], str):  # nothing to read back
            reason = produced[column]
            consumed[column] = reason if reason.startswith("n/a") else "n/a (produce failed)"
        else:
            consumed[column] = systems.run(column, "consume", scenario, count, plan)
    rows = rows_of(
        [
            (PRODUCE_RATE, produced),
            (PRODUCE_MB, produced),
            (CONSUME_RATE, consumed),
            (CONSUME_MB, consumed),
        ]
    )
    title = f"{scenario.title}: {count:,} records (peers: no compression)"
    return Table(title, rows)


def latency_table(systems: Systems, size: int, plan: Plan) -> Table:
    scenario = Scenario(size, 1)
    sync = {
        column: systems.run(column, "sync_latency", scenario, plan.sync_calls, plan)
        for column in COLUMNS
    }
    end_to_end = {
        column: systems.run(column, "end_to_end_latency", scenario, plan.end_to_end_records, plan)
        for column in COLUMNS
    }
    rows = []
    for label, results in (("sync produce", sync), ("produce->consume", end_to_end)):
        for metric in (P50, P99):
            labelled = Metric(metric.key, f"{label} {metric.label}", metric.higher_is_better)
            rows.append(
                (labelled, {column: cell_of(results[column], metric.key) for column in COLUMNS})
            )
    title = (
        f"latency, {scenario.title}: {plan.sync_calls:,} synchronous produces, "
        f"{plan.end_to_end_records:,} records produce->consume one per "
        f"{plan.end_to_end_interval_s * 1000:g} ms (lower is better; ratio < 1: Samsa faster)"
    )
    return Table(title, rows)


def run_cluster_bench(quick: bool = False, install: bool = True, brokers: int = 1) -> Iterator[str]:
    """Start the peers (and Samsa's cluster, when its client bench exists), then yield each
    table as soon as it is measured; everything started is stopped by PID at the end."""
    from bench.peers import running_peers

    plan = Plan.for_run(quick)
    samsa, samsa_reason = load_samsa_functions()
    with contextlib.ExitStack() as stack:
        peers = stack.enter_context(running_peers(("nats", "redis"), install=install))
        bootstrap = ""
        if samsa:
            try:
                bootstrap = stack.enter_context(samsa_cluster(brokers))
            except Exception as error:  # the peers' figures still count
                traceback.print_exc()
                samsa, samsa_reason = {}, f"n/a (cluster: {type(error).__name__})"
        systems = Systems(
            {name: peer.url for name, peer in peers.items()}, samsa, samsa_reason, bootstrap
        )
        targeted: dict[str, dict[str, Cell]] = {}
        for size in SIZES:
            for partitions in PARTITION_COUNTS:
                table = throughput_table(systems, Scenario(size, partitions), plan)
                if (size, partitions) == TARGET_SCENARIO:
                    targeted |= {metric.label: row for metric, row in table.rows}
                yield table.text
            table = latency_table(systems, size, plan)
            if size == TARGET_SCENARIO[0]:
                targeted |= {metric.label: row for metric, row in table.rows}
            yield table.text
        yield format_targets(f"targets (issue 4 §6), {Scenario(*TARGET_SCENARIO).title}", targeted)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a fifth of the records")
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="do not apt-get install missing peers (fail instead)",
    )
    parser.add_argument(
        "--brokers", type=int, default=1, help="brokers in Samsa's local cluster (default 1)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    run(parser.parse_args(argv))


def print_tables(heading: str, tables: Iterable[str], name: str) -> None:
    """The heading, each table as soon as it is measured (a run takes minutes), then how long
    the whole took."""
    started = time.monotonic()
    print(
        f"{heading} on {platform.python_implementation()} {platform.python_version()}, "
        "one Python process per client",
        flush=True,
    )
    for table in tables:
        print()
        print(table, flush=True)
    print(f"\n({name} took {time.monotonic() - started:.0f} s)")


def run(args: argparse.Namespace) -> None:
    tables = run_cluster_bench(args.quick, install=not args.no_install, brokers=args.brokers)
    print_tables("Samsa vs NATS JetStream and Redis Streams", tables, "cluster benchmark")


if __name__ == "__main__":
    main()
