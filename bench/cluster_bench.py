"""The cluster benchmark: Samsa next to NATS JetStream and Redis Streams, every figure measured in
the same run on the same machine (it is shared and noisy), one table per scenario.

python -m bench cluster            every scenario (or: python -m bench.cluster_bench)
python -m bench cluster --quick    a fifth of the records, 2 idempotence rounds, for a smoke run

Scenarios: 100-byte and 1 KiB records, 1 and 6 partitions, acks=1, from one Python process.
Samsa runs twice, with compression none and zstd; the peers have no compression, so both Samsa
columns are compared with the same peer figures. Throughput rows: produce records/s and MB/s,
consume records/s and MB/s (the consumer reads back what the producer wrote). Latency (1
partition): one synchronous produce-and-ack at a time, p50/p99, and produce→consume at low load,
twice for Samsa: from the sync Producer and Consumer (a thread each beside the application's),
and from AsyncProducer and AsyncConsumer on one event loop ("asyncio" rows), the shape of the
peers' clients (nats-py and redis.asyncio), whose figures those rows repeat.
Then two Samsa-only tables (bench/idempotence_bench.py), against the same cluster: "Idempotent
produce (1 partition, 100 B, acks=all)", produce records/s with enable.idempotence true and false
in alternating runs and their ratio (target ≥ 90 %); and "Synchronous produce latency beside a
bare grpc.aio ping-pong", sync produce p50/p99 for Samsa acks=1 and acks=all idempotent beside a
raw-bytes echo over one grpc.aio bidi stream driven as the sync Producer drives its stream
(bench/ping_pong.py, its server in its own process) and JetStream's sync publish, each column
the run with the lowest p99 of alternating rounds (target: Samsa p99 ≤ 1.2× the ping-pong's).

Each ratio is Samsa over the best peer of that row: the higher rate, or the lower latency (for a
latency, a ratio below 1 means Samsa is faster). The targets (issue 4 §6): produce ≥ 2× the best
peer, consume ≥ 1× the best peer, sync p99 no worse than JetStream's.

Samsa's measurements live in bench/client_bench.py (samsa_produce, samsa_consume,
samsa_sync_latency, samsa_end_to_end_latency); until that module exists the Samsa columns read
"n/a (not built)" and no Samsa cluster is started. The peers: see bench/peers.py (what each
promises when it acknowledges), bench/nats_clients.py and bench/redis_clients.py (how each is
driven). The tables are bench/tables.py; starting Samsa and running a cell, bench/harness.py.
"""

from __future__ import annotations

import argparse
import contextlib
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bench.harness import (
    call_with_available,
    create_topic,
    load_samsa_functions,
    measure_or_reason,
    measurement_functions,
    print_tables,
    samsa_cluster,
)
from bench.idempotence_bench import run_idempotence_bench
from bench.tables import (
    COLUMNS,
    CONSUME_MB,
    CONSUME_RATE,
    NOT_BUILT,
    P50,
    P99,
    PEER_COLUMNS,
    PRODUCE_MB,
    PRODUCE_RATE,
    Cell,
    Metric,
    Table,
    Target,
    cell_of,
    format_targets,
    rows_of,
)

# --- the scenarios and their targets ---------------------------------------------------------


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


SIZES = (100, 1024)
PARTITION_COUNTS = (1, 6)
TARGET_SCENARIO = (100, 1)  # (size, partitions) the targets are set for

# Issue 4 §6, for TARGET_SCENARIO: each Samsa column over the best peer, or over JetStream.
TARGETS = (
    Target("produce >= 2x best peer", "produce records/s", True, 2.0),
    Target("consume >= 1x best peer", "consume records/s", True, 1.0),
    Target("sync produce p99 <= JetStream's", "sync produce p99 µs", False, 1.0, "jetstream"),
)


@dataclass(frozen=True)
class Plan:
    """How much each cell measures: a few seconds per cell, the whole run within ~3 minutes."""

    records: dict[int, int]  # record size -> records per throughput cell
    sync_calls: int
    end_to_end_records: int
    end_to_end_interval_s: float = 0.001
    idempotence_rounds: int = 3  # alternating runs: idempotent / plain produce; sync / ping-pong

    @classmethod
    def for_run(cls, quick: bool) -> Plan:
        scale = 0.2 if quick else 1.0
        return cls(
            records={100: int(100_000 * scale), 1024: int(50_000 * scale)},
            sync_calls=int(2_000 * scale),
            end_to_end_records=int(1_000 * scale),
            idempotence_rounds=2 if quick else 3,
        )


# --- the run ---------------------------------------------------------------------------------


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
        from bench import nats_clients, redis_clients

        self.peer_urls = {"jetstream": peers.get("nats", ""), "redis": peers.get("redis", "")}
        self.peer_functions = {
            "jetstream": measurement_functions(nats_clients, "nats"),
            "redis": measurement_functions(redis_clients, "redis"),
        }
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
            if kind != "consume":  # every other measurement writes to a fresh topic
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
    # The peers' clients are asyncio already: their row above is this measurement.
    end_to_end_asyncio = {
        column: end_to_end[column]
        if column in PEER_COLUMNS
        else systems.run(
            column, "end_to_end_latency_asyncio", scenario, plan.end_to_end_records, plan
        )
        for column in COLUMNS
    }
    rows = []
    for label, results in (
        ("sync produce", sync),
        ("produce->consume", end_to_end),
        ("produce->consume asyncio", end_to_end_asyncio),
    ):
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
        title = f"targets (issue 4 §6), {Scenario(*TARGET_SCENARIO).title}"
        yield format_targets(title, targeted, TARGETS)
        yield from run_idempotence_bench(systems, plan)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: less data and fewer runs, as the usage above says for each mode",
    )
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


def run(args: argparse.Namespace) -> None:
    tables = run_cluster_bench(args.quick, install=not args.no_install, brokers=args.brokers)
    print_tables("Samsa vs NATS JetStream and Redis Streams", tables, "cluster benchmark")


if __name__ == "__main__":
    main()
