"""The transactions benchmark (issue 13): what a transaction costs the producer beside the same
records produced without one, how long commit_transaction() takes, and what read_committed costs
a consumer beside read_uncommitted — every figure beside its baseline, measured in one run.

python -m bench transactions            every scenario (also part of `all`)
python -m bench transactions --quick    a fifth of the records and of the transactions timed
                                        (3. and 2.), for a smoke run

The cluster: 1 controller, 1 broker and 1 coordinator from the launcher, `__transaction_state`
and `__consumer_offsets` with 2 partitions each (the transaction tests' settings); every process
is stopped by PID at the end, also on failure. Records are 100 B values, keyless; every topic has
1 partition (replication factor 1); every producer has acks=all, idempotence on, linger.ms 5,
batch.size 256 KiB, compression none. Each run makes its own producer and warms it before the
clock starts: a transactional one (a fresh transactional.id) calls init_transactions() and
commits a one-record transaction; a plain one waits for one acknowledged record.

1. Transactional produce beside plain: the same N records (100,000; --quick 20,000) in
   transactions of 100 and of 1,000 records (begin_transaction(), send() each record,
   commit_transaction()), beside an idempotent non-transactional producer (send() each record,
   then flush()); the rate is from the first send() to the last commit (the flush) returning.
   3 rounds of the four kinds, alternating, the best run of each kept (the machine is shared:
   a burst of noise then lands on one run, not on one side). Targets: transactions of 100 at
   least 50 % of plain's records/s, transactions of 1,000 at least 85 %. The fourth kind is no
   target's: the same records in transactions committed every 100 ms, as Kafka's perf tool and
   streaming jobs commit by time (`samsa perf produce --transaction-duration-ms`), which spreads
   a transaction's fixed cost over however many records that time carries.
2. Where a transaction's time goes (bench/transaction_parts.py): 50 transactions (--quick 10)
   of 100 and of 1,000 records on one producer, with send(), flush() and commit_transaction()
   timed apart, and the ceiling that the flush and EndTxn leave one producer at each size
   (records a transaction / (flush + EndTxn)), beside plain's best rate from 1. and with the
   targets of 1. read against it.
3. Commit latency: 200 transactions (--quick 40) of 10 records each; the time commit_transaction()
   takes (it sends what is still lingering, then EndTxn: answered once the coordinator's
   PREPARE_COMMIT is durable, the markers follow), p50/p99. Beside it, alternating with each
   transaction, flush() after 10 records of a plain producer: what making the same records
   durable costs without a transaction. No target: the figure the issue asks to know.
4. read_committed beside read_uncommitted: 200,000 records (--quick 40,000) committed in
   transactions of 1,000, read from the start to the last record by one assign()ed consumer
   (auto.offset.reset earliest, max.poll.records 100,000); 3 runs each, alternating, after one
   untimed read_committed read (which also waits until the last marker is written); the rate is
   from the first poll() to the last record, best run of each. Target: read_committed at least
   90 % of read_uncommitted's records/s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.client_bench import failed_for_good, read_from_start
from bench.figures import percentile
from bench.harness import failure_reason, measure_or_reason, print_tables, running_samsa
from bench.tables import (
    CONSUME_MB,
    CONSUME_RATE,
    PRODUCE_MB,
    PRODUCE_RATE,
    Metric,
    Table,
    Target,
    cell_of,
    format_cell,
    format_targets,
)
from bench.transaction_parts import parts_runs, parts_table

SETTINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
}
BROKERS, COORDINATORS = 1, 1
SIZE = 100
BATCH_SIZE = 256 * 1024  # as the cluster bench's producers (bench/client_bench.py)
LINGER_MS = 5
TIMEOUT_S = 60.0
CONSUME_PER_TXN = 1_000

TXN_100, TXN_1000, PLAIN = "txn@100", "txn@1000", "plain"
PER_TXN = {TXN_100: 100, TXN_1000: 1_000, PLAIN: None}
TXN_100MS = "txn/100ms"
EVERY_MS = {TXN_100MS: 100.0}  # transactions committed by time, not by count
EVERY_MS_CHECK = 100  # records between two looks at the clock in such a run
COMMIT, FLUSH = "txn commit", "plain flush"
COMMITTED, UNCOMMITTED = "read_committed", "read_uncommitted"

PRODUCE_TARGETS = {
    TXN_100: Target("txn@100 >= 50% of plain", PRODUCE_RATE.label, True, 0.5, PLAIN),
    TXN_1000: Target("txn@1000 >= 85% of plain", PRODUCE_RATE.label, True, 0.85, PLAIN),
}
CONSUME_TARGET = Target(
    "read_committed >= 90% of uncommitted", CONSUME_RATE.label, True, 0.9, UNCOMMITTED
)
P50_MS = Metric("p50_ms", "p50 ms", False, 2)
P99_MS = Metric("p99_ms", "p99 ms", False, 2)


@dataclass(frozen=True)
class Plan:
    produce_records: int  # records per produce run, of each kind
    rounds: int  # produce and consume runs of each kind, alternating
    commits: int  # transactions timed for the commit latency
    commit_records: int  # records per such transaction
    consume_records: int  # records committed, then read per consume run
    parts_transactions: int  # transactions of each size timed step by step

    @classmethod
    def for_run(cls, quick: bool) -> Plan:
        scale = 0.2 if quick else 1.0
        return cls(
            produce_records=int(100_000 * scale),
            rounds=3,
            commits=int(200 * scale),
            commit_records=10,
            consume_records=int(200_000 * scale),
            parts_transactions=int(50 * scale),
        )


# --- the tables (pure) -------------------------------------------------------------------------


def best_run(results: Sequence[dict | str]) -> dict | str:
    """The run with the highest rate, or the first reason when no run has a figure."""
    measured = [result for result in results if isinstance(result, dict)]
    if not measured:
        return results[0] if results else "n/a (no run)"
    return max(measured, key=lambda result: result["records_per_s"])


def every_run(runs: Mapping[str, Sequence[dict | str]], key: str) -> str:
    return "; ".join(
        f"{column} " + " / ".join(format_cell(cell_of(run, key)) for run in results)
        for column, results in runs.items()
    )


def produce_table(runs: Mapping[str, Sequence[dict | str]], plan: Plan) -> str:
    """Best run of each kind, the transactional ones over plain; then the two targets."""
    best = {column: best_run(results) for column, results in runs.items()}
    rows = [
        (metric, {column: cell_of(best[column], metric.key) for column in runs})
        for metric in (PRODUCE_RATE, PRODUCE_MB)
    ]
    title = (
        f"Transactional produce beside plain (1 partition, {SIZE} B, acks=all, idempotent, "
        f"linger.ms {LINGER_MS}): {plan.produce_records:,} records per run in transactions of "
        f"100 and of 1,000 records (begin, send each, commit), and in transactions committed "
        f"every 100 ms (no target's: Kafka's perf tool's shape), beside no transaction (send "
        f"each, flush); best of {plan.rounds} alternating runs each"
    )
    samsa = tuple(column for column in runs if column != PLAIN)
    table = Table(title, rows, samsa, (PLAIN,))
    rate_row = {PRODUCE_RATE.label: table.row(PRODUCE_RATE.label)}
    targets = "\n".join(
        format_targets(f"target ({column} over plain)", rate_row, (target,), (column,))
        for column, target in PRODUCE_TARGETS.items()
    )
    note = f"  every run, records/s: {every_run(runs, PRODUCE_RATE.key)}"
    return f"{table.text}\n{note}\n\n{targets}"


def commit_latency_table(results: Mapping[str, dict | str], plan: Plan) -> str:
    rows = [
        (metric, {column: cell_of(result, metric.key) for column, result in results.items()})
        for metric in (P50_MS, P99_MS)
    ]
    title = (
        f"Commit latency: {plan.commits:,} transactions of {plan.commit_records} x {SIZE} B "
        "records, 1 partition, the time commit_transaction() takes; beside it, alternating, "
        f"flush() after {plan.commit_records} records of a plain idempotent producer (ratio > 1: "
        "what the transaction adds)"
    )
    return Table(title, rows, (COMMIT,), (FLUSH,)).text


def consume_table(runs: Mapping[str, Sequence[dict | str]], plan: Plan) -> str:
    best = {column: best_run(results) for column, results in runs.items()}
    rows = [
        (metric, {column: cell_of(best[column], metric.key) for column in runs})
        for metric in (CONSUME_RATE, CONSUME_MB)
    ]
    title = (
        f"read_committed beside read_uncommitted: {plan.consume_records:,} records of {SIZE} B "
        f"committed in transactions of {CONSUME_PER_TXN:,}, 1 partition, one assign()ed consumer "
        f"from the start to the last record; best of {plan.rounds} alternating runs each"
    )
    table = Table(title, rows, (COMMITTED,), (UNCOMMITTED,))
    targets = format_targets(
        "target (read_committed over read_uncommitted)",
        {CONSUME_RATE.label: table.row(CONSUME_RATE.label)},
        (CONSUME_TARGET,),
        (COMMITTED,),
    )
    note = f"  every run, records/s: {every_run(runs, CONSUME_RATE.key)}"
    return f"{table.text}\n{note}\n\n{targets}"


# --- the measurements ------------------------------------------------------------------------


def create_topics(bootstrap: str, names: Sequence[str]) -> None:
    from samsa.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, 1) for name in names])


def payloads(distinct: int = 1024) -> list[bytes]:
    return [os.urandom(SIZE) for _ in range(distinct)]


def new_producer(bootstrap: str, transactional: bool) -> Any:
    """A warmed producer: metadata and connections made, the transactional one initialized and
    through one committed transaction."""
    from samsa.client import Producer

    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": LINGER_MS,
        "batch.size": BATCH_SIZE,
        "compression.type": "none",
    }
    if transactional:
        config["transactional.id"] = f"bench-txn-{uuid.uuid4().hex[:12]}"
    return Producer(config)


def warm(producer: Any, topic: str, transactional: bool) -> None:
    if transactional:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.send(topic, bytes(SIZE), partition=0)
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.send(topic, bytes(SIZE), partition=0).result(timeout=TIMEOUT_S)


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    per_txn: int | None,
    values: Sequence[bytes],
    every_ms: float | None = None,
) -> dict:
    """`count` records to partition 0 of `topic`: in transactions of `per_txn` records, in
    transactions committed every `every_ms`, or with neither and a flush() at the end; records/s
    and MB/s."""
    transactional = per_txn is not None or every_ms is not None
    producer = new_producer(bootstrap, transactional)
    mask = len(values) - 1
    try:
        warm(producer, topic, transactional)
        send = producer.send
        started = time.perf_counter()
        if every_ms is not None:
            produce_by_time(producer, topic, count, values, every_ms / 1000)
        elif per_txn is None:
            for index in range(count):
                send(topic, values[index & mask], partition=0)
            producer.flush(TIMEOUT_S)
        else:
            for first in range(0, count, per_txn):
                producer.begin_transaction()
                for index in range(first, min(first + per_txn, count)):
                    send(topic, values[index & mask], partition=0)
                producer.commit_transaction(TIMEOUT_S)
        elapsed = time.perf_counter() - started
        failed_for_good(producer, count)
    finally:
        producer.close(TIMEOUT_S)
    return {"records_per_s": count / elapsed, "mb_per_s": count * SIZE / elapsed / 1e6}


def produce_by_time(
    producer: Any, topic: str, count: int, values: Sequence[bytes], every_s: float
) -> None:
    """Send `count` records in transactions, committing when one has been open `every_s`
    (the clock read every EVERY_MS_CHECK records), and the last at the end."""
    mask = len(values) - 1
    send = producer.send
    producer.begin_transaction()
    opened = time.perf_counter()
    for index in range(count):
        if index % EVERY_MS_CHECK == 0 and time.perf_counter() - opened >= every_s:
            producer.commit_transaction(TIMEOUT_S)
            producer.begin_transaction()
            opened = time.perf_counter()
        send(topic, values[index & mask], partition=0)
    producer.commit_transaction(TIMEOUT_S)


def produce_topic(column: str) -> str:
    return f"txn-produce-{column.replace('@', '-').replace('/', '-')}"


def produce_runs(bootstrap: str, plan: Plan) -> dict[str, list[dict | str]]:
    values = payloads()
    kinds = {column: (per_txn, None) for column, per_txn in PER_TXN.items()}
    kinds |= {column: (None, every_ms) for column, every_ms in EVERY_MS.items()}
    runs: dict[str, list[dict | str]] = {column: [] for column in kinds}
    for _ in range(plan.rounds):
        for column, (per_txn, every_ms) in kinds.items():
            topic = produce_topic(column)
            run = measure_or_reason(
                lambda t=topic, k=per_txn, e=every_ms: produce(
                    bootstrap, t, plan.produce_records, k, values, e
                )
            )
            runs[column].append(run)
    return runs


def transaction_parts(bootstrap: str, plan: Plan, plain: dict | str) -> str:
    """Where a transaction's time goes, beside plain's best rate `plain` (transaction_parts.py)."""

    def warmed() -> Any:
        producer = new_producer(bootstrap, True)
        warm(producer, "txn-parts", True)
        return producer

    sizes = {name: size for name, size in PER_TXN.items() if size is not None}
    measured = measure_or_reason(
        lambda: parts_runs(
            warmed, "txn-parts", sizes, plan.parts_transactions, payloads(), TIMEOUT_S
        )
    )
    results = dict.fromkeys(sizes, measured) if isinstance(measured, str) else measured
    return parts_table(results, plain, PRODUCE_TARGETS, plan.parts_transactions)


def commit_latency(bootstrap: str, plan: Plan) -> dict[str, dict | str]:
    """Each round: a transaction of `commit_records` on the transactional producer, its
    commit_transaction() timed; then as many records on the plain producer, its flush() timed."""
    values = payloads()
    transactional = new_producer(bootstrap, True)
    plain = new_producer(bootstrap, False)
    commits: list[float] = []
    flushes: list[float] = []
    try:
        warm(transactional, "txn-commit", True)
        warm(plain, "txn-flush", False)
        for round_ in range(plan.commits):
            transactional.begin_transaction()
            batch = [values[(round_ + index) % len(values)] for index in range(plan.commit_records)]
            for value in batch:
                transactional.send("txn-commit", value, partition=0)
            started = time.perf_counter()
            transactional.commit_transaction(TIMEOUT_S)
            commits.append(time.perf_counter() - started)
            for value in batch:
                plain.send("txn-flush", value, partition=0)
            started = time.perf_counter()
            plain.flush(TIMEOUT_S)
            flushes.append(time.perf_counter() - started)
    finally:
        transactional.close(TIMEOUT_S)
        plain.close(TIMEOUT_S)
    return {COMMIT: latency_ms(commits), FLUSH: latency_ms(flushes)}


def latency_ms(samples_s: Sequence[float]) -> dict:
    return {
        "p50_ms": percentile(samples_s, 0.5) * 1000,
        "p99_ms": percentile(samples_s, 0.99) * 1000,
    }


def consume(bootstrap: str, topic: str, count: int, isolation: str) -> dict:
    """Partition 0 of `topic` from the start until `count` records came."""
    return read_from_start(bootstrap, topic, count, SIZE, isolation)


def consume_runs(bootstrap: str, plan: Plan) -> dict[str, list[dict | str]]:
    """The data committed once (transactions of CONSUME_PER_TXN), one untimed read_committed
    read to the end, then the two isolation levels alternately."""
    topic, count = "txn-consume", plan.consume_records
    produced = measure_or_reason(
        lambda: produce(bootstrap, topic, count, CONSUME_PER_TXN, payloads())
    )
    count += 1  # the producer's warm-up transaction wrote one record first
    runs: dict[str, list[dict | str]] = {COMMITTED: [], UNCOMMITTED: []}
    if isinstance(produced, str):
        return {column: [produced] for column in runs}
    # Untimed: the first read connects, and waits until the last marker is written.
    measure_or_reason(lambda: consume(bootstrap, topic, count, COMMITTED))
    for _ in range(plan.rounds):
        for column in (COMMITTED, UNCOMMITTED):
            runs[column].append(
                measure_or_reason(lambda c=column: consume(bootstrap, topic, count, c))
            )
    return runs


# --- the run ----------------------------------------------------------------------------------


TOPICS = [produce_topic(column) for column in [*PER_TXN, *EVERY_MS]] + [
    "txn-parts",
    "txn-commit",
    "txn-flush",
    "txn-consume",
]


def run_transaction_bench(quick: bool = False) -> Iterator[str]:
    """Start the cluster, then yield each table as soon as it is measured; every process
    started is stopped by PID at the end (the ExitStack), whatever happens in between."""
    plan = Plan.for_run(quick)
    with contextlib.ExitStack() as stack:
        try:
            bootstrap = stack.enter_context(
                running_samsa(1, BROKERS, SETTINGS, coordinators=COORDINATORS, name="transactions")
            ).spec.bootstrap_servers
            create_topics(bootstrap, TOPICS)
        except Exception as error:  # nothing to measure against
            traceback.print_exc()
            yield f"no cluster, no figures: {failure_reason(error)}"
            return
        runs = produce_runs(bootstrap, plan)
        yield produce_table(runs, plan)
        yield transaction_parts(bootstrap, plan, best_run(runs[PLAIN]))
        latency: dict | str = measure_or_reason(lambda: commit_latency(bootstrap, plan))
        if isinstance(latency, str):
            latency = {COMMIT: latency, FLUSH: latency}
        yield commit_latency_table(latency, plan)
        yield consume_table(consume_runs(bootstrap, plan), plan)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The transactions bench has no options of its own: --quick comes with the cluster
    bench's."""


def run(args: argparse.Namespace) -> None:
    print_tables("Samsa transactions", run_transaction_bench(args.quick), "transactions benchmark")
