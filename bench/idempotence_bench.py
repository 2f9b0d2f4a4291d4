"""What idempotence costs the producer, and how far a synchronous produce is from the bare
transport under it: two tables the cluster bench (bench/cluster_bench.py) prints after its own,
measured in the same run against the same Samsa cluster.

- "Idempotent produce (1 partition, 100 B, acks=all)": samsa_produce with enable.idempotence
  true, then false, same scenario otherwise (compression none, linger 5 ms, 256 KiB batches),
  each on its own topic; the two alternate for a few rounds and each keeps its best rate, so that
  a burst of noise on the shared machine does not land on one side only. Target: idempotent
  produce at least 90 % of the non-idempotent rate.
- "Synchronous produce latency beside a bare grpc.aio ping-pong": one send, wait for the ack,
  repeat (linger.ms=0), p50/p99, for Samsa acks=1 (idempotence off, the SDK's default there) and
  acks=all with idempotence on, beside a bare grpc.aio bidirectional-stream echo of the same
  100 bytes driven the way the sync Producer drives its stream (bench/ping_pong.py: server in its
  own process, sync caller over a loop thread), and beside JetStream's sync publish (the cluster
  bench's nats_sync_latency); the four alternate for a few rounds and each keeps its run with
  the lowest p99 — JetStream too: set against a single run of it, Samsa's best of three would
  read faster than an identical system. Target: Samsa p99 at most 1.2x the ping-pong's p99
  (and, issue 4's, no worse than JetStream's). The same ping-pong driven from an
  asyncio caller on the loop (no thread hand-off) is printed under the table for reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from bench.harness import call_with_available, create_topic, measure_or_reason
from bench.ping_pong import ping_pong_async_latency, ping_pong_server, ping_pong_sync_latency
from bench.tables import (
    NOT_BUILT,
    P50,
    P99,
    PRODUCE_MB,
    PRODUCE_RATE,
    Table,
    Target,
    cell_of,
    format_cell,
    format_targets,
)

if TYPE_CHECKING:
    from bench.cluster_bench import Plan, Systems

SIZE = 100
IDEMPOTENT, PLAIN = "idempotent", "non-idempotent"
SAMSA_ACKS_1, SAMSA_ALL_IDEMPOTENT, JETSTREAM, PING_PONG = (
    "samsa acks=1",
    "samsa all+idem",
    "jetstream",
    "ping-pong",
)

IDEMPOTENCE_TARGETS = (
    Target("idempotent >= 90% of non-idempotent", PRODUCE_RATE.label, True, 0.9, PLAIN),
)
LATENCY_TARGETS = (
    Target("sync p99 <= 1.2x bare ping-pong p99", P99.label, False, 1.2, PING_PONG),
    Target("sync p99 <= JetStream's", P99.label, False, 1.0, JETSTREAM),
)


def _samsa(systems: Systems, kind: str, topic: str, settings: dict[str, object]) -> dict | str:
    """One Samsa measurement on its own 1-partition topic, or the reason there is none."""
    if kind not in systems.samsa:
        return systems.samsa_reason or NOT_BUILT

    def measure() -> dict:
        create_topic(systems.bootstrap, topic, 1)
        available = {
            "bootstrap": systems.bootstrap,
            "topic": topic,
            "size": SIZE,
            "partitions": 1,
            "compression": "none",
        }
        return call_with_available(systems.samsa[kind], available | settings)

    return measure_or_reason(measure)


def _best(results: list[dict | str]) -> dict | str:
    """The run with the highest rate, or the first reason when no run has a figure."""
    measured = [result for result in results if isinstance(result, dict)]
    if not measured:
        return results[0]
    return max(measured, key=lambda result: result["records_per_s"])


def idempotence_table(systems: Systems, count: int, rounds: int) -> str:
    runs: dict[str, list[dict | str]] = {IDEMPOTENT: [], PLAIN: []}
    for _ in range(rounds):
        for column, idempotence in ((IDEMPOTENT, True), (PLAIN, False)):
            topic = f"bench-{SIZE}b-1p-acks-all-{column}"
            settings = {"n": count, "acks": "all", "idempotence": idempotence}
            runs[column].append(_samsa(systems, "produce", topic, settings))
    best = {column: _best(results) for column, results in runs.items()}
    rows = [
        (metric, {column: cell_of(best[column], metric.key) for column in runs})
        for metric in (PRODUCE_RATE, PRODUCE_MB)
    ]
    title = (
        f"Idempotent produce (1 partition, {SIZE} B, acks=all): {count:,} records per run, "
        f"compression none, best of {rounds} alternating runs each"
    )
    table = Table(title, rows, (IDEMPOTENT,), (PLAIN,))
    every_run = "; ".join(
        f"{column} " + " / ".join(format_cell(cell_of(run, PRODUCE_RATE.key)) for run in results)
        for column, results in runs.items()
    )
    targets = format_targets(
        "target (idempotent over non-idempotent)",
        {PRODUCE_RATE.label: table.row(PRODUCE_RATE.label)},
        IDEMPOTENCE_TARGETS,
        (IDEMPOTENT,),
    )
    return f"{table.text}\n  every run, records/s: {every_run}\n\n{targets}"


def _lowest_p99(results: list[dict | str]) -> dict | str:
    """The run with the lowest p99, or the first reason when no run has a figure."""
    measured = [result for result in results if isinstance(result, dict)]
    if not measured:
        return results[0]
    return min(measured, key=lambda result: result[P99.key])


def sync_latency_table(systems: Systems, plan: Plan) -> str:
    """The ping-pong, both Samsa columns and JetStream alternate for the plan's rounds and each
    keeps its run with the lowest p99: one slow tail on the shared machine, on either side, must
    not decide the ratio (a single run once put the ping-pong's p99 at 3.6x its p50), and every
    column is chosen alike, so that the selection favours none."""
    from bench.cluster_bench import Scenario

    calls, rounds = plan.sync_calls, plan.idempotence_rounds
    runs: dict[str, list[dict | str]] = {
        SAMSA_ACKS_1: [],
        SAMSA_ALL_IDEMPOTENT: [],
        JETSTREAM: [],
        PING_PONG: [],
    }
    async_runs: list[dict | str] = []
    with ping_pong_server() as target:
        for _ in range(rounds):
            runs[PING_PONG].append(
                measure_or_reason(lambda: ping_pong_sync_latency(target, calls, SIZE))
            )
            async_runs.append(
                measure_or_reason(lambda: ping_pong_async_latency(target, calls, SIZE))
            )
            runs[SAMSA_ACKS_1].append(
                _samsa(
                    systems,
                    "sync_latency",
                    f"bench-{SIZE}b-1p-sync-acks-1",
                    {"n": calls, "acks": 1},
                )
            )
            runs[SAMSA_ALL_IDEMPOTENT].append(
                _samsa(
                    systems,
                    "sync_latency",
                    f"bench-{SIZE}b-1p-sync-acks-all-idempotent",
                    {"n": calls, "acks": "all", "idempotence": True},
                )
            )
            runs[JETSTREAM].append(
                systems.run(JETSTREAM, "sync_latency", Scenario(SIZE, 1), calls, plan)
            )
    results = {column: _lowest_p99(column_runs) for column, column_runs in runs.items()}
    ping_pong_async = _lowest_p99(async_runs)
    rows = []
    for metric in (P50, P99):
        rows.append(
            (metric, {column: cell_of(result, metric.key) for column, result in results.items()})
        )
    title = (
        f"Synchronous produce latency beside a bare grpc.aio ping-pong: {calls:,} x {SIZE} B, "
        "one send then wait for the ack, linger.ms=0, 1 partition (ping-pong: raw-bytes echo "
        "over one grpc.aio bidi stream, sync caller over a loop thread; jetstream: its sync "
        f"publish, as in the latency table above; the run with the lowest p99 of {rounds} "
        "alternating runs each, JetStream's too; ratios over the ping-pong, lower is better)"
    )
    samsa_columns = (SAMSA_ACKS_1, SAMSA_ALL_IDEMPOTENT, JETSTREAM)
    table = Table(title, rows, samsa_columns, (PING_PONG,))
    if isinstance(ping_pong_async, dict):
        reference = ", ".join(
            f"{metric.label} {format_cell(ping_pong_async[metric.key])}" for metric in (P50, P99)
        )
    else:
        reference = ping_pong_async
    every_run = "; ".join(
        f"{column} "
        + " / ".join(
            f"{format_cell(cell_of(run, P50.key))}-{format_cell(cell_of(run, P99.key))}"
            for run in column_runs
        )
        for column, column_runs in runs.items()
    )
    targets = format_targets(
        "targets (Samsa sync produce p99)",
        {P99.label: table.row(P99.label)},
        LATENCY_TARGETS,
        (SAMSA_ACKS_1, SAMSA_ALL_IDEMPOTENT),
    )
    return (
        f"{table.text}\n  every run, p50-p99 µs: {every_run}\n  for reference, the same "
        f"ping-pong from an asyncio caller on the loop (no thread hand-off): {reference}\n\n"
        f"{targets}"
    )


def run_idempotence_bench(systems: Systems, plan: Plan) -> Iterator[str]:
    """Both tables, each yielded as soon as it is measured."""
    yield idempotence_table(systems, plan.records[SIZE], plan.idempotence_rounds)
    yield sync_latency_table(systems, plan)
