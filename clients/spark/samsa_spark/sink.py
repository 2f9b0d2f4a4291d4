"""`df.write.format("samsa")` and `writeStream.format("samsa")`: rows to records, as Spark's Kafka
connector writes them (at least once; the exactly-once sink is the transactional one).

Columns: `value` (binary or string, required), `key` (binary or string), `topic` (string; else
the `topic` option), `partition` (int; else the producer's partitioner), `headers` (array of
key/value structs). Each task sends its rows with one idempotent producer (acks=all) per worker
process and cluster, reused across tasks, flushes before it reports, and fails if any record
failed: Spark then retries the task, so a record may be written twice, never lost. The driver's
commit has nothing to do. The schema is checked on the driver before a task starts, and each
mistake names the column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from samsa.client import Producer
from samsa.client.errors import KafkaError
from samsa.spark.options import OptionError

FLUSH_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class WriteOptions:
    client: dict[str, str]
    topic: str | None  # the `topic` option: for rows without a topic column
    exactly_once: bool = True  # streaming only (exactly_once.py); batch writes are at least once


def write_options(options: dict[str, str], schema: StructType) -> WriteOptions:
    """The write's options, once the DataFrame's columns are known to fit (OptionError)."""
    client = {k[len("samsa.") :]: v for k, v in options.items() if k.startswith("samsa.")}
    if not client.get("bootstrap.servers"):
        raise OptionError("samsa.bootstrap.servers is required: the brokers' host:port list")
    fields = {field.name: field.dataType for field in schema.fields}
    text_or_bytes = (BinaryType(), StringType())
    if fields.get("value") not in text_or_bytes:
        raise OptionError("the DataFrame needs a value column, binary or string")
    if "key" in fields and fields["key"] not in text_or_bytes:
        raise OptionError("the key column must be binary or string")
    if "partition" in fields and fields["partition"] != IntegerType():
        raise OptionError("the partition column must be an int")
    header_type = ArrayType(
        StructType().add("key", StringType()).add("value", BinaryType()), containsNull=True
    )
    if "headers" in fields and fields["headers"].simpleString() != header_type.simpleString():
        raise OptionError("headers must be array<struct<key:string,value:binary>>")
    topic = options.get("topic")
    if "topic" in fields and fields["topic"] != StringType():
        raise OptionError("the topic column must be a string")
    if "topic" not in fields and not topic:
        raise OptionError("set the topic option, or give the DataFrame a topic column")
    exactly = options.get("exactlyOnce", "true").lower()
    if exactly not in ("true", "false"):
        raise OptionError(f"exactlyOnce must be true or false, not {exactly!r}")
    return WriteOptions(client, topic, exactly == "true")


@dataclass
class WrittenMessage(WriterCommitMessage):
    records: int


class SamsaArrowWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return WrittenMessage(send_rows(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task flushed its records before it reported: nothing is left to do."""


class SamsaStreamArrowWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return WrittenMessage(send_rows(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task flushed its records before it reported: nothing is left to do."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records a failed batch sent stay written (at least once); Spark replays the batch."""


def send_rows(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row with this worker's producer; raise the first failure once all are
    settled. Returns the count."""
    return send_with(task_producer(options.client), options, batches)


def send_with(producer: Producer, options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row with `producer`, flush, and raise the first failure. Returns the count."""
    futures = []
    count = 0
    for batch in batches:
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
        values = _bytes(columns["value"])
        keys = _bytes(columns["key"]) if "key" in columns else [None] * len(values)
        topics = columns.get("topic") or [options.topic] * len(values)
        partitions = columns.get("partition") or [None] * len(values)
        headers = columns.get("headers") or [None] * len(values)
        for value, key, topic, partition, pairs in zip(
            values, keys, topics, partitions, headers, strict=True
        ):
            futures.append(
                producer.send(
                    topic,
                    value,
                    key=key,
                    partition=partition,
                    headers=[(h["key"], h["value"]) for h in pairs] if pairs else None,
                )
            )
        count += len(values)
    producer.flush(FLUSH_TIMEOUT_S)
    failures = [error for future in futures if (error := future.exception(0)) is not None]
    if failures:
        raise KafkaError(f"{len(failures)} of {count} records failed: {failures[0]}")
    return count


def _bytes(column: list) -> list[bytes | None]:
    return [v.encode() if isinstance(v, str) else v for v in column]


_PRODUCERS: dict[str, Producer] = {}


def task_producer(client: dict[str, str]) -> Producer:
    """This worker process's producer for the cluster (reused across tasks; never pickled)."""
    key = repr(sorted(client.items()))
    producer = _PRODUCERS.get(key)
    if producer is None:
        producer = _PRODUCERS[key] = Producer({"acks": "all", **client})
    return producer
