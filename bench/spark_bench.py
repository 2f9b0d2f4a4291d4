"""The Spark benchmark (issue 14): the `samsa` source and sink beside Spark's own ceiling and the
SDK, in one run.

python -m bench spark            every scenario (needs the [spark] extra and Java)
python -m bench spark --quick    a fifth of the records

The cluster: 1 controller, 1 broker, 1 coordinator from the launcher; one local Spark session
(`local[2]`, the workers on this interpreter); every process is stopped at the end, also on
failure. Records: 100 B values with 8 B keys, 4 partitions, produced once before the reads.

1. Batch read into Spark's noop sink (`df.write.format("noop")`), best of 3 after one untimed
   run: the `samsa` source (Arrow path) beside `spark.range` of the same row count into the same
   sink (the JVM's ceiling here), beside the ceiling of a Python data source of the same schema
   (bench/spark_ceiling.py: prebuilt Arrow batches, no I/O: what Spark itself costs per row of
   a Python source), and beside the SDK's own read of the same records
   (PartitionRangeReader.records, one process, no Spark). Target: ≥ 1 M rows/s. Every rate
   counts rows really there: the produce fails if a record failed, the source and the ceiling
   are counted once untimed (the noop sink counts nothing), the SDK's read counts its own.
2. Batch write: a DataFrame of the same shape (built once, cached) written with
   `df.write.format("samsa")`, best of 3. Target: ≥ 300 k rows/s.
3. The exactly-once streaming sink beside the at-least-once one (`exactlyOnce=false`), one run
   each on the same input: a streaming query reads the produced topic from the start
   (`readStream.format("samsa")`, read_uncommitted, `maxOffsetsPerTrigger` a twentieth of the
   records, so 20 micro-batches), selects key and value and writes them with
   `writeStream.format("samsa")` to a fresh 4-partition topic, Trigger.AvailableNow, checkpointed
   in a temporary directory removed afterwards, after an untimed streaming copy of the last
   1,000 records (the session's first streaming query is ~10 s slower to start, which would
   land in whichever sink ran first). Figures: the records over the query's wall time
   (start() to its end, start-up included), and the micro-batches' p50 and p99 of
   `durationMs["triggerExecution"]` from the query's progress (every batch is kept:
   spark.sql.streaming.numRecentProgressUpdates is raised; with 20 batches the p99 is the
   slowest). Each task of an exactly-once batch writes its part in a transaction and prepares
   it, and the driver completes them all; the at-least-once sink only flushes. Then a check: the
   exactly-once output, read back with `spark.read` at read_committed, holds exactly the input's
   record count (the at-least-once output's count at read_uncommitted is shown beside it); each
   run's transactional ids are counted (the at-least-once run must use none) and its
   micro-batches' durations listed.

Figures are rows/s (and ms for the micro-batches). The machine is shared: read the best of each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

from bench.figures import percentile
from bench.harness import measure_or_reason, print_tables, running_samsa
from bench.tables import Metric, Table, cell_of

SETTINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
}
PARTITIONS = 4
ROWS = Metric("rows_per_s", "rows/s", True, 0)
SAMSA, RANGE, SDK = "samsa source", "spark.range", "SDK read"
CEILING = "python source"  # bench/spark_ceiling.py: no I/O, prebuilt Arrow batches
WRITE = "samsa sink"
# the sinks' columns (tables.py's columns are 17 characters: "at-least-once sink" would not fit)
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly-once", "at-least-once"
BATCH_P50 = Metric("p50_ms", "batch p50 ms", False, 0)
BATCH_P99 = Metric("p99_ms", "batch p99 ms", False, 0)
STREAM_BATCHES = 20  # micro-batches per streaming run: maxOffsetsPerTrigger = count / 20
STREAM_TIMEOUT_S = 900.0


def best(runs: list[dict | str]) -> dict | str:
    measured = [r for r in runs if isinstance(r, dict)]
    return max(measured, key=lambda r: r["rows_per_s"]) if measured else runs[0]


def timed(count: int, work: Callable[[], object]) -> dict:
    """`count` rows over the time `work` took; a work that returns how many rows it read (an
    int) must have read `count`, else no rate (it would count rows never read)."""
    started = time.perf_counter()
    done = work()
    elapsed = time.perf_counter() - started
    if isinstance(done, int) and done != count:
        raise RuntimeError(f"read {done:,} rows of {count:,}")
    return {"rows_per_s": count / elapsed}


def checked_rows(frame, count: int) -> None:  # type: ignore[no-untyped-def]
    """The rows a DataFrame holds, counted untimed: the noop sink reports none, so the timed
    reads into it are set against a count checked once here."""
    if (rows := frame.count()) != count:
        raise RuntimeError(f"the read holds {rows:,} rows, {count:,} were produced")


def spark_session():  # type: ignore[no-untyped-def]
    from samsa.spark import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    # The workers import bench.spark_ceiling (Spark pickles its classes by reference).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return local_session(
        "samsa-bench",
        **{
            "spark.sql.shuffle.partitions": "4",
            # every micro-batch's progress, not the last 100 (scenario 3's percentiles)
            "spark.sql.streaming.numRecentProgressUpdates": "10000",
        },
    )


def create_topic(bootstrap: str, topic: str) -> None:
    from samsa.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])


def produce(bootstrap: str, topic: str, count: int) -> None:
    from bench.client_bench import failed_for_good
    from samsa.client import Producer

    create_topic(bootstrap, topic)
    value = os.urandom(100)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20}) as p:
        for i in range(count):
            p.send(topic, value, key=b"%08d" % i, partition=i % PARTITIONS)
        p.flush(120)
        failed_for_good(p, count)  # every read below counts `count` rows


def sdk_read(bootstrap: str, topic: str, per_partition: dict[int, int]) -> int:
    from samsa.client.partition_range import PartitionRangeReader

    read = 0
    with PartitionRangeReader({"bootstrap.servers": bootstrap}) as reader:
        for partition, end in per_partition.items():
            for _ in reader.records(topic, partition, 0, end, "read_uncommitted"):
                read += 1
    return read


def stream_copy(  # type: ignore[no-untyped-def]
    spark,
    bootstrap: str,
    source: str,
    target: str,
    count: int,
    exactly_once: bool,
    starting: str = "earliest",
    batches: int = STREAM_BATCHES,
) -> dict:
    """Copy `count` records of `source` (from `starting`) to a fresh `target` with a streaming
    query (AvailableNow, count / `batches` rows a micro-batch) into the samsa sink: rows/s over
    the query's wall time, and the micro-batches' trigger-execution p50/p99 in ms. The query is
    stopped and its checkpoint removed, also on failure."""
    create_topic(bootstrap, target)
    with tempfile.TemporaryDirectory(prefix="samsa-bench-checkpoint-") as checkpoint:
        stream = (
            spark.readStream.format("samsa")
            .option("samsa.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", starting)
            .option("maxOffsetsPerTrigger", str(max(1, count // batches)))
            .option("isolation.level", "read_uncommitted")
            .load()
            .select("key", "value")
        )
        started = time.perf_counter()
        query = (
            stream.writeStream.format("samsa")
            .option("samsa.bootstrap.servers", bootstrap)
            .option("topic", target)
            .option("exactlyOnce", "true" if exactly_once else "false")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:
            finished = query.awaitTermination(STREAM_TIMEOUT_S)  # raises if the query failed
            elapsed = time.perf_counter() - started
            if not finished:
                raise TimeoutError(f"the query did not finish in {STREAM_TIMEOUT_S:.0f} s")
            progress = [p for p in query.recentProgress if p.numInputRows > 0]
        finally:
            query.stop()
    transactions = query_transactions(bootstrap, query.id)
    read = sum(p.numInputRows for p in progress)
    if read != count:  # a lost progress entry would skew the percentiles
        raise RuntimeError(f"the query's progress counts {read:,} rows, not {count:,}")
    batches_ms = [float(p.durationMs["triggerExecution"]) for p in progress]
    return {
        "rows_per_s": count / elapsed,
        "p50_ms": percentile(batches_ms, 0.50),
        "p99_ms": percentile(batches_ms, 0.99),
        "batches_ms": batches_ms,
        "transactions": transactions,
    }


def query_transactions(bootstrap: str, query_id: str) -> int:
    """How many transactional ids the query's tasks used (the exactly-once sink names them
    `spark-<query id>-<task>`, one a task for every batch; the at-least-once sink uses none)."""
    from samsa.client import Admin

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        listings = admin.list_transactions()
    return sum(1 for t in listings if t.transactional_id.startswith(f"spark-{query_id}-"))


def output_count(  # type: ignore[no-untyped-def]
    spark, bootstrap: str, topic: str, isolation: str
) -> int | str:
    """The records a batch read of `topic` sees at `isolation`, or why it failed."""
    try:
        return (
            spark.read.format("samsa")
            .option("samsa.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("isolation.level", isolation)
            .load()
            .count()
        )
    except Exception as error:  # the check is reported, the bench goes on
        return f"failed: {type(error).__name__}: {error}"


def streaming_sinks(  # type: ignore[no-untyped-def]
    spark, bootstrap: str, source: str, count: int
) -> str:
    """Scenario 3: the exactly-once sink beside the at-least-once one, a table and the check."""
    from samsa.spark.options import canonical

    # Untimed: the session's first streaming query pays a one-off start-up (~10 s more in its
    # first micro-batch), which would land in whichever sink ran first. The last 1,000 records,
    # in 2 micro-batches.
    tail = 1_000 // PARTITIONS
    end = count // PARTITIONS
    warm_up = canonical({source: {p: max(0, end - tail) for p in range(PARTITIONS)}})
    measure_or_reason(  # a failure here shows on stderr; the timed runs go on
        lambda: stream_copy(spark, bootstrap, source, f"{source}-warm-up", 1_000, True, warm_up, 2)
    )
    targets = {EXACTLY_ONCE: f"{source}-eo", AT_LEAST_ONCE: f"{source}-alo"}
    results = {
        column: measure_or_reason(
            lambda t=target, eo=column == EXACTLY_ONCE: stream_copy(
                spark, bootstrap, source, t, count, eo
            )
        )
        for column, target in targets.items()
    }
    per_batch = max(1, count // STREAM_BATCHES)
    table = Table(
        f'Streaming copy with writeStream.format("samsa"): {count:,} records of 100 B, '
        f"{per_batch:,} a micro-batch (maxOffsetsPerTrigger, Trigger.AvailableNow), one run "
        "each; rows/s over the query's wall time, batch = durationMs.triggerExecution",
        [
            (metric, {c: cell_of(r, metric.key) for c, r in results.items()})
            for metric in (ROWS, BATCH_P50, BATCH_P99)
        ],
        (EXACTLY_ONCE,),
        (AT_LEAST_ONCE,),
    )
    committed = output_count(spark, bootstrap, targets[EXACTLY_ONCE], "read_committed")
    uncommitted = output_count(spark, bootstrap, targets[AT_LEAST_ONCE], "read_uncommitted")
    verdict = "exact" if committed == count else "MISMATCH" if isinstance(committed, int) else "n/a"
    shown = [f"{n:,}" if isinstance(n, int) else n for n in (committed, uncommitted)]
    lines = [
        table.text,
        "",
        f"check: the exactly-once output holds {shown[0]} records at read_committed, "
        f"expected {count:,}: {verdict}",
        f"       (the at-least-once output: {shown[1]} records at read_uncommitted)",
    ]
    for column, result in results.items():
        if isinstance(result, dict):
            lines.append(
                f"{column}: {result['transactions']} transactional ids; batches (ms): "
                + " ".join(f"{ms:.0f}" for ms in result["batches_ms"])
            )
    alo = results[AT_LEAST_ONCE]
    if isinstance(alo, dict) and alo["transactions"]:
        lines.append(
            'WARNING: the exactlyOnce="false" run wrote in transactions: the option was ignored, '
            "so both columns measure the exactly-once sink"
        )
    return "\n".join(lines)


def run_spark_bench(quick: bool = False) -> Iterator[str]:
    count = 200_000 if quick else 1_000_000
    rounds = 3
    with running_samsa(1, 1, SETTINGS, coordinators=1, name="spark") as cluster:
        bootstrap = cluster.spec.bootstrap_servers
        topic = "spark-bench"
        produce(bootstrap, topic, count)
        spark = spark_session()
        try:
            source = (
                spark.read.format("samsa")
                .option("samsa.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("isolation.level", "read_uncommitted")
                .load()
            )
            from bench.spark_ceiling import CeilingSource

            spark.dataSource.register(CeilingSource)
            ceiling = (
                spark.read.format("samsa-ceiling")
                .option("rows", str(count))
                .option("partitions", str(PARTITIONS))
                .load()
            )
            per_partition = {p: count // PARTITIONS for p in range(PARTITIONS)}
            source.write.format("noop").mode("overwrite").save()  # untimed: starts the workers
            ceiling.write.format("noop").mode("overwrite").save()
            checked_rows(source, count)
            checked_rows(ceiling, count)
            reads: dict[str, list[dict | str]] = {SAMSA: [], RANGE: [], CEILING: [], SDK: []}
            for _ in range(rounds):
                reads[SAMSA].append(
                    measure_or_reason(
                        lambda: timed(
                            count, lambda: source.write.format("noop").mode("overwrite").save()
                        )
                    )
                )
                reads[CEILING].append(
                    measure_or_reason(
                        lambda: timed(
                            count, lambda: ceiling.write.format("noop").mode("overwrite").save()
                        )
                    )
                )
                reads[RANGE].append(
                    measure_or_reason(
                        lambda: timed(
                            count,
                            lambda: (
                                spark.range(count).write.format("noop").mode("overwrite").save()
                            ),
                        )
                    )
                )
            reads[SDK].append(
                measure_or_reason(
                    lambda: timed(count, lambda: sdk_read(bootstrap, topic, per_partition))
                )
            )
            read_best = {column: best(runs) for column, runs in reads.items()}
            table = Table(
                f"Batch read into the noop sink: {count:,} records of 100 B (4 partitions), best "
                f"of {rounds} (the SDK: one run, one process); {CEILING}: a Python data source "
                "of the same schema with no I/O (prebuilt Arrow batches), Spark's own cost",
                [(ROWS, {c: cell_of(r, ROWS.key) for c, r in read_best.items()})],
                (SAMSA, SDK),
                (CEILING,),
            )
            met = cell_of(read_best[SAMSA], ROWS.key)
            jvm = cell_of(read_best[RANGE], ROWS.key)
            verdict = (
                f"spark.range into the same sink (the JVM alone, no Python): "
                f"{jvm if isinstance(jvm, str) else f'{jvm:,.0f}'} rows/s\n"
                f"target: samsa source >= 1 M rows/s: "
                f"{'met' if isinstance(met, float) and met >= 1e6 else 'missed'}"
            )
            yield f"{table.text}\n\n{verdict}"

            frame = (
                spark.read.format("samsa")
                .option("samsa.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("isolation.level", "read_uncommitted")
                .load()
                .select("key", "value")
                .cache()
            )
            frame.count()
            writes: list[dict | str] = []
            for index in range(rounds):
                target = f"spark-bench-out-{index}"
                create_topic(bootstrap, target)
                writes.append(
                    measure_or_reason(
                        lambda t=target: timed(
                            count,
                            lambda: (
                                frame.write.format("samsa")
                                .option("samsa.bootstrap.servers", bootstrap)
                                .option("topic", t)
                                .mode("append")
                                .save()
                            ),
                        )
                    )
                )
            written = cell_of(best(writes), ROWS.key)
            yield (
                f'Batch write: {count:,} rows (key, 100 B value) with df.write.format("samsa"), '
                f"best of {rounds}: {written if isinstance(written, str) else f'{written:,.0f}'} "
                f"rows/s\n\ntarget: >= 300 k rows/s: "
                f"{'met' if isinstance(written, float) and written >= 3e5 else 'missed'}"
            )

            yield streaming_sinks(spark, bootstrap, topic, count)
        finally:
            spark.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options of its own: --quick comes with the cluster bench's."""


def run(args: argparse.Namespace) -> None:
    print_tables("Samsa on Spark", run_spark_bench(args.quick), "spark benchmark")
