"""The replication benchmark: Samsa with three brokers and a replication factor of 3 next to a
three-server NATS JetStream cluster holding a stream of 3 replicas (R3), measured in one run on
the same machine (it is shared and noisy: read the ratios, not the absolute figures).

python -m bench replication            every scenario (a few minutes)
python -m bench replication --quick    a fifth of the records, for a smoke run

What an acknowledgement promises here:

- Samsa acks=1: the partition leader appended the batch (to the page cache; nothing is fsynced
  on the write path). acks=all: every in-sync replica has it (the high watermark passed it), and
  with the topic's min.insync.replicas=2 the write is refused while fewer than 2 replicas are in
  sync — with a full ISR, three copies.
- JetStream R3: a publish ack means the stream's Raft group stored the message on a quorum (2 of
  3) of its servers (file storage, written, fsynced in the background). JetStream has no weaker
  ack, so both Samsa columns are set against the same JetStream figures.

Scenarios, one partition (one stream), 100-byte and 1 KiB records, from one Python process:

1. produce throughput — Samsa: bench/client_bench.samsa_produce (SDK defaults but batch.size, as
   the cluster bench); JetStream: publish_async with at most 256 acks outstanding
   (bench/nats_clients.nats_produce). records/s and MB/s.
2. latency — one synchronous produce-and-ack at a time, p50/p99 (client_bench.samsa_sync_latency,
   nats_clients.nats_sync_latency). The JetStream client connects to the stream leader's server,
   as Samsa's producer talks to the partition leader.
3. rolling restart (Samsa only) — the longest pause between acks of a steady acks=all producer
   while each broker is restarted in turn, and a read-back that every acked record is stored
   (bench/rolling_restart.py).

Ratios are Samsa over JetStream R3 (for a latency, below 1 means Samsa is faster). Issue 5's
targets: acks=all produce throughput >= 2x JetStream R3, and acks=all sync produce p99 no worse
than JetStream R3's. Every process started (3 nats-servers, Samsa's controller and brokers) is
stopped by PID at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench import cluster_bench
from bench.harness import failure_reason, measure_or_reason, print_tables
from bench.tables import (
    P50,
    P99,
    PRODUCE_MB,
    PRODUCE_RATE,
    Cell,
    Metric,
    Rows,
    Table,
    Target,
    format_targets,
    rows_of,
)

if TYPE_CHECKING:
    from bench.rolling_restart import RollingRestartResult
    from samsa.cli.launcher import LocalCluster
    from samsa.client import Admin

SAMSA_ACKS = {"samsa acks=1": 1, "samsa acks=all": "all"}
SAMSA_COLUMNS = tuple(SAMSA_ACKS)
JETSTREAM = "jetstream R3"
PEER_COLUMNS = (JETSTREAM,)
COLUMNS = SAMSA_COLUMNS + PEER_COLUMNS
SIZES = (100, 1024)
REPLICAS = 3
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
ROLLING_TOPIC = "replication-rolling"

SYNC_P50 = Metric(P50.key, f"sync produce {P50.label}", False)
SYNC_P99 = Metric(P99.key, f"sync produce {P99.label}", False)

TARGETS = (
    Target("acks=all produce >= 2x JetStream R3", PRODUCE_RATE.label, True, 2.0, JETSTREAM),
    Target("acks=all sync p99 <= JetStream R3's", SYNC_P99.label, False, 1.0, JETSTREAM),
    Target("acks=all sync p99 <= 2x JetStream R3's", SYNC_P99.label, False, 2.0, JETSTREAM),
)


@dataclass(frozen=True)
class Plan:
    """How much each cell measures: the cluster bench's workload (the same records per size and
    synchronous produces, so that the two benches' figures compare), plus the rolling restart's
    pacing. The full run stays within ~4 minutes, --quick within ~1.5."""

    load: cluster_bench.Plan
    settle_s: float  # steady producing before the first restart and after each
    interval_s: float = 0.001  # the rolling-restart producer sends one record per interval

    @classmethod
    def for_run(cls, quick: bool) -> Plan:
        return cls(cluster_bench.Plan.for_run(quick), settle_s=1.0 if quick else 3.0)


def size_title(size: int) -> str:
    return f"{size // 1024} KiB records" if size % 1024 == 0 else f"{size}-byte records"


def topic_name(size: int, column: str) -> str:
    return f"replication-{size}b-acks-{SAMSA_ACKS[column]}"


# --- the tables (pure) -----------------------------------------------------------------------


def size_table(size: int, plan: Plan, produced: dict, synced: dict) -> Table:
    """Throughput and synchronous latency of one record size, a column per system."""
    rows = rows_of(
        [(PRODUCE_RATE, produced), (PRODUCE_MB, produced), (SYNC_P50, synced), (SYNC_P99, synced)],
        COLUMNS,
    )
    title = (
        f"{size_title(size)}, 1 partition, RF=3 (Samsa: 3 brokers, min.insync.replicas=2; "
        f"JetStream: 3 servers, R3 stream): {plan.load.records[size]:,} records produced, "
        f"{plan.load.sync_calls:,} synchronous produces (latency ratio < 1: Samsa faster)"
    )
    return Table(title, rows, SAMSA_COLUMNS, PEER_COLUMNS)


STALL_COLUMN = ("samsa acks=all",)


def stall_rows(result: RollingRestartResult | str) -> Rows:
    """The rolling restart's rows: the longest ack gap per window, time back in sync, counts."""
    if isinstance(result, str):  # the scenario failed or did not run
        labels = ("max ack gap ms", "records acked", "acked records lost")
        return [(Metric(label, label, False), {STALL_COLUMN[0]: result}) for label in labels]
    rows: Rows = []
    for label, gap in result.max_gaps_ms().items():
        name = "max ack gap ms" if label == "overall" else f"max ack gap, {label} ms"
        rows.append((Metric(name, name, False, 1), {STALL_COLUMN[0]: gap}))
    for broker, seconds in result.back_in_sync_s.items():
        name = f"{broker} SIGTERM to full ISR s"
        rows.append((Metric(name, name, False, 1), {STALL_COLUMN[0]: seconds}))
    read_back = result.read_back
    counts: list[tuple[str, Cell]] = [
        ("records sent", result.sent),
        ("records acked", result.acked),
        ("records failed (no ack)", result.failed),
        ("acked records lost", read_back.lost if read_back else result.read_back_error),
        ("records stored twice", read_back.duplicated if read_back else result.read_back_error),
    ]
    rows += [(Metric(label, label, False), {STALL_COLUMN[0]: cell}) for label, cell in counts]
    return rows


def stall_table(result: RollingRestartResult | str, plan: Plan) -> Table:
    title = (
        f"rolling restart of the 3 brokers, Samsa only (each in turn: SIGTERM, restart, wait for "
        f"a full ISR, {plan.settle_s:g} s steady) under an acks=all producer sending one 14-byte "
        f"record per {plan.interval_s * 1000:g} ms; lost = acked but not read back (at the offset "
        "its ack named, if it named one)"
    )
    return Table(title, stall_rows(result), STALL_COLUMN, ())


def targets_text(size: int, table: Table) -> str:
    rows_by_label = {metric.label: row for metric, row in table.rows}
    title = f"targets (issues 5 and 11), {size_title(size)}, Samsa acks=all over JetStream R3"
    return format_targets(title, rows_by_label, TARGETS, ("samsa acks=all",))


# --- the run ---------------------------------------------------------------------------------


class Systems:
    """Where each system is reachable, or why it is not (a reason that fills its cells)."""

    def __init__(self) -> None:
        self.nats_url = ""
        self.nats_reason = "n/a (not started)"
        self.cluster: LocalCluster | None = None
        self.admin: Admin | None = None
        self.samsa_reason = "n/a (not started)"

    def measure(self, column: str, kind: str, size: int, count: int) -> dict | str:
        from bench import client_bench, nats_clients

        if column == JETSTREAM:
            if not self.nats_url:
                return self.nats_reason
            function: Callable[..., dict] = {
                "produce": nats_clients.nats_produce,
                "sync_latency": nats_clients.nats_sync_latency,
            }[kind]
            return measure_or_reason(
                lambda: function(self.nats_url, count, size, replicas=REPLICAS)
            )
        if self.cluster is None:
            return self.samsa_reason
        bootstrap = self.cluster.spec.bootstrap_servers
        topic, acks = topic_name(size, column), SAMSA_ACKS[column]
        if kind == "produce":
            return measure_or_reason(
                lambda: client_bench.samsa_produce(bootstrap, topic, count, size, "none", acks)
            )
        return measure_or_reason(
            lambda: client_bench.samsa_sync_latency(bootstrap, topic, count, size, acks)
        )


def _start_nats(stack: contextlib.ExitStack, systems: Systems, install: bool) -> None:
    from bench.peers import running_nats_cluster

    try:
        peers = stack.enter_context(running_nats_cluster(REPLICAS, install=install))
        systems.nats_url = peers[0].url
    except Exception as error:  # Samsa's figures still count
        traceback.print_exc()
        systems.nats_reason = f"n/a (cluster: {failure_reason(error, 60)})"


def _start_samsa(stack: contextlib.ExitStack, systems: Systems, controllers: int) -> None:
    from bench.harness import running_samsa
    from bench.rolling_restart import create_replicated_topics, wait_full_isr
    from samsa.client import Admin

    try:
        cluster = stack.enter_context(running_samsa(controllers, REPLICAS))
        admin = stack.enter_context(Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}))
        topics = [topic_name(size, column) for size in SIZES for column in SAMSA_COLUMNS]
        create_replicated_topics(admin, [*topics, ROLLING_TOPIC], REPLICAS, TOPIC_CONFIGS)
        for topic in [*topics, ROLLING_TOPIC]:
            wait_full_isr(admin, topic, REPLICAS)
        systems.cluster, systems.admin = cluster, admin
    except Exception as error:  # JetStream's figures still count
        traceback.print_exc()
        systems.samsa_reason = f"n/a (cluster: {failure_reason(error, 60)})"


def _rolling_restart(systems: Systems, plan: Plan) -> RollingRestartResult | str:
    from bench.rolling_restart import run_rolling_restart

    if systems.cluster is None or systems.admin is None:
        return systems.samsa_reason
    try:
        return run_rolling_restart(
            systems.cluster, systems.admin, ROLLING_TOPIC, plan.interval_s, plan.settle_s
        )
    except Exception as error:  # the tables already printed stand
        traceback.print_exc()
        return failure_reason(error)


def run_replication_bench(
    quick: bool = False, install: bool = True, controllers: int = 1
) -> Iterator[str]:
    """Start both clusters, then yield each table as soon as it is measured; everything
    started is stopped by PID at the end (the ExitStack), whatever happens in between."""
    plan = Plan.for_run(quick)
    with contextlib.ExitStack() as stack:
        systems = Systems()
        _start_nats(stack, systems, install)
        _start_samsa(stack, systems, controllers)
        for size in SIZES:
            count = plan.load.records[size]
            produced = {
                column: systems.measure(column, "produce", size, count) for column in COLUMNS
            }
            synced = {
                column: systems.measure(column, "sync_latency", size, plan.load.sync_calls)
                for column in COLUMNS
            }
            table = size_table(size, plan, produced, synced)
            yield table.text
            yield targets_text(size, table)
        yield stall_table(_rolling_restart(systems, plan), plan).text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The replication bench's own options (--quick and --no-install come with the cluster
    bench's, see bench/__main__.py)."""
    parser.add_argument(
        "--controllers", type=int, default=1, help="controllers of the replication bench (1)"
    )


def run(args: argparse.Namespace) -> None:
    tables = run_replication_bench(args.quick, not args.no_install, args.controllers)
    print_tables("Samsa RF=3 vs NATS JetStream R3", tables, "replication benchmark")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench replication",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cluster_bench.add_arguments(parser)
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
