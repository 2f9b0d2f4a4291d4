"""The Spark benchmark (issue 14): the `samsa` source and sink beside Spark's own ceiling and the
SDK, in one run.

python -m bench spark            every scenario (needs the [spark] extra and Java)
python -m bench spark --quick    a fifth of the records

The cluster: 1 controller, 1 broker, 1 coordinator from the launcher; one local Spark session
(`local[2]`, the workers on this interpreter); every process is stopped at the end, also on
failure. Records: 100 B values with 8 B keys, 4 partitions, produced once before the reads.

1. Batch read into Spark's noop sink (`df.write.format("noop")`), best of 3 after one untimed
   run: the `samsa` source (Arrow path) beside `spark.range` of the same row count into the same
   sink (the JVM's ceiling here), and beside the SDK's own read of the same records
   (PartitionRangeReader.records, one process, no Spark). Target: ≥ 1 M rows/s.
2. Batch write: a DataFrame of the same shape (built once, cached) written with
   `df.write.format("samsa")`, best of 3. Target: ≥ 300 k rows/s.

Figures are rows/s. The machine is shared: read the best of each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator

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
WRITE = "samsa sink"


def best(runs: list[dict | str]) -> dict | str:
    measured = [r for r in runs if isinstance(r, dict)]
    return max(measured, key=lambda r: r["rows_per_s"]) if measured else runs[0]


def timed(count: int, work: Callable[[], object]) -> dict:
    started = time.perf_counter()
    work()
    return {"rows_per_s": count / (time.perf_counter() - started)}


def spark_session():  # type: ignore[no-untyped-def]
    from samsa.spark import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    return local_session("samsa-bench", **{"spark.sql.shuffle.partitions": "4"})


def produce(bootstrap: str, topic: str, count: int) -> None:
    from samsa.client import Admin, NewTopic, Producer

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    value = os.urandom(100)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20}) as p:
        for i in range(count):
            p.send(topic, value, key=b"%08d" % i, partition=i % PARTITIONS)
        p.flush(120)


def sdk_read(bootstrap: str, topic: str, per_partition: dict[int, int]) -> int:
    from samsa.client.partition_range import PartitionRangeReader

    read = 0
    with PartitionRangeReader({"bootstrap.servers": bootstrap}) as reader:
        for partition, end in per_partition.items():
            for _ in reader.records(topic, partition, 0, end, "read_uncommitted"):
                read += 1
    return read


def run_spark_bench(quick: bool = False) -> Iterator[str]:
    from samsa.client import Admin, NewTopic

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
            per_partition = {p: count // PARTITIONS for p in range(PARTITIONS)}
            source.write.format("noop").mode("overwrite").save()  # untimed: starts the workers
            reads: dict[str, list[dict | str]] = {SAMSA: [], RANGE: [], SDK: []}
            for _ in range(rounds):
                reads[SAMSA].append(
                    measure_or_reason(
                        lambda: timed(
                            count, lambda: source.write.format("noop").mode("overwrite").save()
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
                f"of {rounds} (the SDK: one run, one process)",
                [(ROWS, {c: cell_of(r, ROWS.key) for c, r in read_best.items()})],
                (SAMSA, SDK),
                (RANGE,),
            )
            met = cell_of(read_best[SAMSA], ROWS.key)
            verdict = (
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
                with Admin({"bootstrap.servers": bootstrap}) as admin:
                    admin.create_topics([NewTopic(target, PARTITIONS, 1)])
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
        finally:
            spark.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options of its own: --quick comes with the cluster bench's."""


def run(args: argparse.Namespace) -> None:
    print_tables("Samsa on Spark", run_spark_bench(args.quick), "spark benchmark")
