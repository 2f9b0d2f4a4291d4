"""A worked Spark pipeline on Samsa, end to end in one command:

    .venv/bin/python examples/spark_pipeline.py

It starts a local Samsa cluster (1 controller, 1 broker, 1 coordinator, in a temporary
directory, stopped at the end), produces page-view events to `page-views`, and runs two Spark
jobs on a local session:

1. a **stream**: page views counted per page in 10-second event-time windows, with a 30-second
   watermark, written to `page-view-counts` with the exactly-once sink (Trigger.AvailableNow, so
   it ends once everything is read);
2. a **batch** job: the whole `page-views` topic to Parquet.

Then it reads `page-view-counts` back at read_committed and prints the counts, and the Parquet
row count. Needs the Spark extra and Java (`bash .ci/setup --dev` installs both).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from samsa.cli.launcher import LocalCluster, load_or_create, running, wait_healthy
from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.client.partition_range import PartitionRangeReader

PAGES = ["/", "/pricing", "/docs", "/blog"]
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
EVENTS = 2_000


def produce_page_views(bootstrap: str) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(EVENTS):
            page = PAGES[i % len(PAGES)]
            # Two events a second of event time; the producer's timestamp is the event time.
            event = {"page": page, "user": f"u{i % 37}"}
            producer.send(
                "page-views",
                json.dumps(event).encode(),
                key=page.encode(),
                timestamp=START_MS + i * 500,
            )


def count_page_views(spark, bootstrap: str, checkpoint: Path) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    views = (
        spark.readStream.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("subscribe", "page-views")
        .option("startingOffsets", "earliest")
        .load()
    )
    counts = (
        views.select(
            F.get_json_object(F.col("value").cast("string"), "$.page").alias("page"),
            "timestamp",
        )
        .withWatermark("timestamp", "30 seconds")
        .groupBy(F.window("timestamp", "10 seconds"), "page")
        .count()
        .select(
            F.col("page").cast("binary").alias("key"),
            F.to_json(
                F.struct(F.col("window.start").cast("string").alias("window"), "page", "count")
            )
            .cast("binary")
            .alias("value"),
        )
    )
    query = (
        counts.writeStream.format("samsa")  # exactly once (the default)
        .outputMode("append")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("topic", "page-view-counts")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def to_parquet(spark, bootstrap: str, path: Path) -> int:  # type: ignore[no-untyped-def]
    frame = (
        spark.read.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("subscribe", "page-views")
        .load()
    )
    frame.write.mode("overwrite").parquet(str(path))
    return spark.read.parquet(str(path)).count()


def read_counts(bootstrap: str) -> list[dict]:
    """Every count the stream wrote, as a read_committed reader sees them."""
    config = {"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}
    with Consumer(config) as consumer:
        end = consumer.end_offsets([("page-view-counts", 0)])[("page-view-counts", 0)]
    with PartitionRangeReader({"bootstrap.servers": bootstrap}) as reader:
        records = reader.records("page-view-counts", 0, 0, end, "read_committed")
        return [json.loads(record.value) for record in records]


@contextmanager
def example_cluster(workdir: Path) -> Iterator[str]:
    """A started local cluster (1 controller, 1 broker, 1 coordinator) with the example's two
    topics; yields its bootstrap servers and stops every process on the way out."""
    settings = {
        "offsets.topic.num.partitions": "2",
        "transaction.state.log.num.partitions": "2",
    }
    spec = load_or_create(workdir / "cluster", 1, 1, settings, coordinators=1)
    with running(LocalCluster(spec, workdir / "cluster")) as cluster:
        wait_healthy(cluster)
        bootstrap = cluster.spec.bootstrap_servers
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            # The events carry January's event times as their timestamps: retention.ms counts
            # from a record's timestamp, so keep them whatever their age (Kafka would delete
            # them at its next retention check too).
            keep = {"retention.ms": "-1"}
            admin.create_topics(
                [NewTopic("page-views", 2, 1, keep), NewTopic("page-view-counts", 1, 1)]
            )
        yield bootstrap


class PipelineResult(NamedTuple):
    counts: list[dict]  # every count the stream wrote, read back at read_committed
    parquet_rows: int  # rows the batch job wrote to Parquet


def run_pipeline(spark, bootstrap: str, workdir: Path) -> PipelineResult:  # type: ignore[no-untyped-def]
    """Produce the events, run the stream and the batch job, and read the counts back."""
    produce_page_views(bootstrap)
    count_page_views(spark, bootstrap, workdir / "counts-checkpoint")
    rows = to_parquet(spark, bootstrap, workdir / "page-views.parquet")
    return PipelineResult(read_counts(bootstrap), rows)


def report(result: PipelineResult) -> None:
    counts = result.counts
    print(f"{len(counts)} closed windows counted exactly once; the first few:")
    for count in sorted(counts, key=lambda c: (c["window"], c["page"]))[:8]:
        print(f"  {count['window']}  {count['page']:<10} {count['count']}")
    total = sum(c["count"] for c in counts)
    print(
        f"{total} page views in closed windows (of {EVENTS}; the last windows stay open "
        "until the watermark passes them)"
    )
    print(f"batch job: {result.parquet_rows} page views written to Parquet")


def main() -> None:
    from samsa.spark import local_session

    with tempfile.TemporaryDirectory(prefix="samsa-example-") as root:
        workdir = Path(root)
        with example_cluster(workdir) as bootstrap:
            spark = local_session("samsa-example")
            try:
                result = run_pipeline(spark, bootstrap, workdir)
            finally:
                spark.stop()
        report(result)


if __name__ == "__main__":
    main()
