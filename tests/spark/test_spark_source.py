"""Goal: `spark.read.format("samsa")` returns what was produced, record for record (key, value,
topic, partition, offset, timestamp, timestampType, headers with nulls kept), for whole topics
and for offset ranges (by offset or by timestamp, and narrowed by pushed filters when Spark
allows pushdown), however the ranges are split into tasks; at read_committed (the default)
it never shows a record of an aborted transaction, while read_uncommitted does.

Method: a real local cluster (1 controller, 1 broker, 1 coordinator; stopped by PID also on
failure) and a real local Spark session (conftest.py); records written with the SDK's Producer,
read back through Spark and compared with what the producer's acknowledgements say.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster
from pyspark.sql.datasource import GreaterThanOrEqual, In, LessThan

from samsa.client import Admin, KafkaError, NewTopic, Producer
from samsa.client.partition_range import PartitionRangeReader
from samsa.spark.options import parse_options
from samsa.spark.source import SamsaPushdownReader

pytestmark = pytest.mark.timeout(300)

TOPIC, TXN_TOPIC = "spark-events", "spark-txn"
PARTITIONS = 3


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("spark-cluster")
    with local_cluster(data_dir, 1, 1, TRANSACTION_SETTINGS, coordinators=1) as cluster:
        servers = cluster.spec.bootstrap_servers
        with Admin({"bootstrap.servers": servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1), NewTopic(TXN_TOPIC, 1, 1)])
        yield servers


@pytest.fixture(scope="module")
def produced(bootstrap: str) -> list[tuple]:
    """Every record sent to TOPIC as (partition, offset, key, value, timestamp ms, headers)."""
    sent = []
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i in range(300):
            key = None if i % 7 == 0 else b"k%d" % i
            value = None if i % 11 == 0 else b"value-%d" % i
            headers = [("n", b"%d" % i), ("empty", None)] if i % 3 == 0 else []
            timestamp = 1_700_000_000_000 + i
            future = producer.send(
                TOPIC,
                value,
                key=key,
                headers=headers,
                partition=i % PARTITIONS,
                timestamp=timestamp,
            )
            sent.append((future, key, value, timestamp, headers))
        producer.flush(30)
    return sorted(
        (f.result(0).partition, f.result(0).offset, key, value, ts, headers)
        for f, key, value, ts, headers in sent
    )


def spark_rows(frame) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(
        (
            row.partition,
            row.offset,
            None if row.key is None else bytes(row.key),
            None if row.value is None else bytes(row.value),
            int(row.timestamp.replace(tzinfo=UTC).timestamp() * 1000),
            [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers],
        )
        for row in frame.collect()
    )


def test_a_batch_read_equals_what_was_produced(spark, bootstrap: str, produced: list) -> None:  # type: ignore[no-untyped-def]
    frame = (
        spark.read.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("includeHeaders", "true")
        .load()
    )
    assert frame.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert spark_rows(frame) == produced
    assert {
        (r.topic, r.timestampType) for r in frame.select("topic", "timestampType").collect()
    } == {(TOPIC, 0)}


def test_offset_ranges_and_split_tasks(spark, bootstrap: str, produced: list) -> None:  # type: ignore[no-untyped-def]
    starting = {TOPIC: {"0": 10, "1": -2, "2": 95}}
    ending = {TOPIC: {"0": 60, "1": 5, "2": -1}}
    frame = (
        spark.read.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({TOPIC: [0, 1, 2]}))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("minPartitions", "7")
        .option("includeHeaders", "true")
        .load()
    )
    assert frame.rdd.getNumPartitions() >= 7
    ends = {p: max(o for q, o, *_ in produced if q == p) + 1 for p in range(PARTITIONS)}
    window = {0: (10, 60), 1: (0, 5), 2: (95, ends[2])}
    expected = [r for r in produced if window[r[0]][0] <= r[1] < window[r[0]][1]]
    assert spark_rows(frame) == expected


def test_offsets_by_timestamp_bound_the_ranges(spark, bootstrap: str, produced: list) -> None:  # type: ignore[no-untyped-def]
    base = 1_700_000_000_000  # record i has timestamp base + i (see `produced`)
    starting = {TOPIC: {"0": base + 30, "1": base + 31, "2": base + 10**9}}

    def read(strategy: str) -> list[tuple]:
        return spark_rows(
            spark.read.format("samsa")
            .option("samsa.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsetsByTimestamp", json.dumps(starting))
            .option("startingOffsetsByTimestampStrategy", strategy)
            .option("endingTimestamp", str(base + 90))
            .option("includeHeaders", "true")
            .load()
        )

    # partition 2 holds no record that late: with "latest" it starts (and ends) at its end
    expected = [r for r in produced if r[0] < 2 and base + 30 <= r[4] < base + 90]
    assert read("latest") == expected and expected
    with pytest.raises(Exception, match=f"{TOPIC}-2 holds no record at or after"):
        read("error")


def test_pushed_filters_narrow_the_ranges(spark, bootstrap: str, produced: list) -> None:  # type: ignore[no-untyped-def]
    since = datetime.fromtimestamp((1_700_000_000_000 + 60) / 1000, UTC)
    query = f"""partition IN (0, 2) AND offset >= 5 AND offset < 40
        AND timestamp >= TIMESTAMP '{since.isoformat()}' AND offset != 33"""
    expected = [
        r
        for r in produced
        if r[0] in (0, 2) and 5 <= r[1] < 40 and r[4] >= 1_700_000_000_060 and r[1] != 33
    ]

    def filtered():  # type: ignore[no-untyped-def]
        return (
            spark.read.format("samsa")
            .option("samsa.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("includeHeaders", "true")
            .load()
            .filter(query)
        )

    assert spark_rows(filtered()) == expected  # pushdown off (Spark's default): Spark filters
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        frame = filtered()  # planned now, with pushdown on
        assert spark_rows(frame) == expected
        assert frame.rdd.getNumPartitions() == 2  # one task each for partitions 0 and 2
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    # What the tasks are handed: the offsets the filters allow, the timestamp's lower bound
    # found by ListOffsets (record 3k + p of partition p has timestamp base + 3k + p).
    reader = SamsaPushdownReader(
        parse_options({"samsa.bootstrap.servers": bootstrap, "subscribe": TOPIC})
    )
    timestamp = GreaterThanOrEqual(("timestamp",), since)
    filters = [In(("partition",), (0, 2)), GreaterThanOrEqual(("offset",), 5)]
    filters += [LessThan(("offset",), 40), timestamp]
    assert list(reader.pushFilters(filters)) == [timestamp]
    tasks = [(p.partition, p.start, p.end) for p in reader.partitions()]
    assert tasks == [(0, 20, 40), (2, 20, 40)]


def test_read_committed_never_shows_aborted_records(spark, bootstrap: str) -> None:  # type: ignore[no-untyped-def]
    config = {"bootstrap.servers": bootstrap, "transactional.id": "spark-source-test"}
    with Producer(config) as producer:
        producer.init_transactions(30)
        for round_, commit in enumerate([True, False, True, False, True]):
            producer.begin_transaction()
            for i in range(20):
                producer.send(TXN_TOPIC, b"%s-%d-%d" % (b"c" if commit else b"a", round_, i))
            if commit:
                producer.commit_transaction(30)
            else:
                producer.flush(30)
                producer.abort_transaction(30)

    def values(isolation: str) -> list[bytes]:
        frame = (
            spark.read.format("samsa")
            .option("samsa.bootstrap.servers", bootstrap)
            .option("subscribe", TXN_TOPIC)
            .option("isolation.level", isolation)
            .load()
        )
        return sorted(bytes(row.value) for row in frame.select("value").collect())

    committed = values("read_committed")
    assert len(committed) == 60 and all(v.startswith(b"c-") for v in committed)
    everything = values("read_uncommitted")
    assert len(everything) == 100 and sum(v.startswith(b"a-") for v in everything) == 40


def test_the_sdks_range_reader_serves_plain_python(bootstrap: str, produced: list) -> None:
    """The API the tasks use, without Spark: partition 1 from offset 10 up to 40."""
    with PartitionRangeReader({"bootstrap.servers": bootstrap}) as reader:
        got = [
            (1, r.offset, r.key, r.value, r.timestamp, list(r.headers))
            for r in reader.records(TOPIC, 1, 10, 40)
        ]
    assert got == [r for r in produced if r[0] == 1 and 10 <= r[1] < 40]
    impatient = PartitionRangeReader({"bootstrap.servers": bootstrap, "request.timeout.ms": 300})
    with impatient, pytest.raises(KafkaError, match="not readable yet"):
        list(impatient.records(TOPIC, 1, 0, 10_000))


def test_a_stream_restarted_from_its_checkpoint_neither_loses_nor_repeats(
    spark,  # type: ignore[no-untyped-def]
    bootstrap: str,
    tmp_path: Path,
) -> None:
    """Micro-batches of at most 30 records (maxOffsetsPerTrigger) to a Parquet sink under
    Trigger.AvailableNow; more records arrive; the query restarts from its checkpoint and reads
    exactly the new ones."""
    topic = "spark-stream"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def produce(first: int, count: int) -> None:
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for i in range(first, first + count):
                producer.send(topic, b"s-%d" % i, partition=i % 2)

    def run() -> int:
        query = (
            spark.readStream.format("samsa")
            .option("samsa.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "30")
            .load()
            .select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(120), "the AvailableNow run did not finish"
            batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        finally:
            query.stop()
        assert all(p["numInputRows"] <= 30 for p in batches), "maxOffsetsPerTrigger holds"
        return len(batches)

    produce(0, 100)
    assert run() >= 4, "100 records in micro-batches of at most 30"
    produce(100, 45)
    assert run() >= 2
    rows = spark.read.parquet(out).collect()
    keys = [(row.partition, row.offset) for row in rows]
    assert len(keys) == len(set(keys)) == 145, "no record lost, none repeated"
    assert sorted(bytes(row.value) for row in rows) == sorted(b"s-%d" % i for i in range(145))


def read_topic(spark, bootstrap: str, topic: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    frame = (
        spark.read.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    return spark_rows(frame)


def test_a_batch_write_lands_every_row_where_its_columns_say(spark, bootstrap: str) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    topic = "spark-written"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("partition", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    rows = [
        (None if i % 5 == 0 else f"k{i}", b"w-%d" % i, i % 2, [("i", b"%d" % i)] if i % 3 else [])
        for i in range(200)
    ]
    frame = spark.createDataFrame(rows, schema).repartition(3)
    frame.write.format("samsa").option("samsa.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).mode("append").save()
    stored = read_topic(spark, bootstrap, topic)
    assert sorted(((p, k, v, h) for p, _, k, v, _, h in stored), key=repr) == sorted(
        ((p, None if k is None else k.encode(), v, h) for k, v, p, h in rows), key=repr
    )
    with pytest.raises(Exception, match="value column"):
        spark.createDataFrame([("x",)], "nope string").write.format("samsa").option(
            "samsa.bootstrap.servers", bootstrap
        ).option("topic", topic).mode("append").save()


def test_a_streaming_write_copies_a_topic(
    spark, bootstrap: str, produced: list, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    target = "spark-copied"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(target, PARTITIONS, 1)])
    query = (
        spark.readStream.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("key", "coalesce(value, X'') AS value", "partition", "headers")
        .writeStream.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "copy-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    copied = read_topic(spark, bootstrap, target)
    assert sorted(((p, k, v or b"", h) for p, _, k, v, _, h in copied), key=repr) == sorted(
        ((p, k, v or b"", h) for p, _, k, v, _, h in produced), key=repr
    )
