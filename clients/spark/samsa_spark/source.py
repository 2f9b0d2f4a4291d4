"""`format("samsa")`: the batch read of PySpark's Python Data Source API.

Theory of operation. On the driver, `partitions()` finds the partitions (subscribe, pattern or
assign), asks their first and end offsets at the read's isolation level (a Consumer without a
group), resolves and splits the ranges (ranges.py) and hands Spark one `RangePartition` each.
On a worker, `read()` reads its range with the SDK's PartitionRangeReader (one per worker
process and bootstrap list, reused across tasks: nothing live is pickled) and yields Arrow
batches straight from the stored batches (arrow_batches.py), no Python object per record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from samsa.client import Admin, Consumer
from samsa.client.partition_range import PartitionRangeReader
from samsa.spark.arrow_batches import chunk_to_arrow
from samsa.spark.options import OptionError, SourceOptions, parse_options
from samsa.spark.ranges import OffsetRange, resolve, split

_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
_HEADERS = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)


def spark_schema(include_headers: bool) -> StructType:
    return StructType([*_FIELDS, _HEADERS] if include_headers else _FIELDS)


class SamsaDataSource(DataSource):
    """Reads Samsa topics as Spark's Kafka connector reads Kafka's (see options.py)."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> StructType:
        return spark_schema(parse_options(self.options).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return SamsaBatchReader(parse_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from samsa.spark.sink import SamsaArrowWriter, write_options

        return SamsaArrowWriter(write_options(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from samsa.spark.exactly_once import ExactlyOnceStreamWriter
        from samsa.spark.sink import SamsaStreamArrowWriter, write_options

        options = write_options(dict(self.options), schema)
        if options.exactly_once:
            return ExactlyOnceStreamWriter(options)
        return SamsaStreamArrowWriter(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from samsa.spark.stream_source import SamsaStreamReader

        return SamsaStreamReader(parse_options(self.options))


@dataclass
class RangePartition(InputPartition):
    """One task's offset range (picklable: plain values only)."""

    topic: str
    partition: int
    start: int
    end: int


class SamsaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        ranges = split(offset_ranges(self.options), self.options.min_partitions)
        return [RangePartition(r.topic, r.partition, r.start, r.end) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition)


def read_range(options: SourceOptions, partition: RangePartition) -> Iterator[pa.RecordBatch]:
    """One task's range as Arrow batches (batch and streaming reads alike)."""
    reader = range_reader(options.client)
    topic, number = partition.topic, partition.partition
    for chunk in reader.chunks(topic, number, partition.start, partition.end, options.isolation):
        yield from chunk_to_arrow(
            chunk.data,
            chunk.aborted,
            topic,
            number,
            partition.start,
            partition.end,
            options.include_headers,
        )


def offset_ranges(options: SourceOptions) -> list[OffsetRange]:
    """The ranges the options ask for, resolved against the cluster now (the driver's side)."""
    partitions = subscribed_partitions(options)
    if not partitions:
        return []
    first, last = partition_bounds(options, partitions)
    starting = options.starting or "earliest"
    return resolve(partitions, starting, options.ending, first, last, options.fail_on_data_loss)


def subscribed_partitions(options: SourceOptions) -> list[tuple[str, int]]:
    """The partitions the options name, as the cluster has them now."""
    config = {"bootstrap.servers": options.client["bootstrap.servers"]}
    if options.assign:
        partitions = list(options.assign)
    else:
        with Admin(config) as admin:
            topics = [t for t in admin.list_topics() if options.matches(t)]
            described = admin.describe_topics(topics) if topics else {}
        partitions = sorted(
            (topic, p.partition) for topic, d in described.items() for p in d.partitions
        )
        missing = [t for t in options.subscribe if t not in described]
        if missing:
            raise OptionError(f"subscribe names topics that do not exist: {missing}")
    return partitions


def partition_bounds(
    options: SourceOptions, partitions: list[tuple[str, int]]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Each partition's first offset and end offset (at the read's isolation level) now."""
    config = {
        "bootstrap.servers": options.client["bootstrap.servers"],
        "isolation.level": options.isolation,
    }
    with Consumer(config) as consumer:
        return consumer.beginning_offsets(partitions), consumer.end_offsets(partitions)


_READERS: dict[str, PartitionRangeReader] = {}


def range_reader(client: dict[str, str]) -> PartitionRangeReader:
    """This worker process's reader for the cluster (gRPC channels are opened once, lazily)."""
    key = client["bootstrap.servers"]
    reader = _READERS.get(key)
    if reader is None:
        reader = _READERS[key] = PartitionRangeReader(client)
    return reader
