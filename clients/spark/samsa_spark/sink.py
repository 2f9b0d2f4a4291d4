"""`df.write.format("samsa")` and `writeStream.format("samsa")`: rows to records, as Spark's Kafka
connector writes them (at least once; the exactly-once sink is the transactional one).

Columns: `value` (binary or string, required), `key` (binary or string), `topic` (string; the
`topic` option, when set, overrides it for every row, as in Spark's Kafka connector: a DataFrame
read from a topic keeps its topic column, and must not be written back there), `partition` (int;
else the producer's partitioner), `headers` (array of key/value structs). Each task sends its
rows with one idempotent producer (acks=all) per worker process and cluster, reused across tasks,
flushes before it reports, and fails if any record failed: Spark then retries the task, so a
record may be written twice, never lost. The driver's commit has nothing to do. The schema is
checked on the driver before a task starts, and each mistake names the column.
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
from samsa.client.config import ProducerConfig
from samsa.client.errors import KafkaError
from samsa.client.record_future import RecordsFuture
from samsa.common.errors import InvalidConfigError
from samsa.spark.options import OptionError

FLUSH_TIMEOUT_S = 120.0
# The task producer's settings unless the options set them (samsa.<key>). A task sends its rows
# as fast as Python hands them over and then flushes, so bigger batches than Kafka's 16 KiB
# default cost no latency: 256 KiB (~2,000 rows of 100 B) cuts the per-batch work of encoding,
# requests and the broker's appends, which otherwise leaves a flush tail of ~0.5 s per 200k rows.
TASK_PRODUCER_DEFAULTS = {"acks": "all", "batch.size": str(256 * 1024)}


@dataclass(frozen=True)
class WriteOptions:
    client: dict[str, str]
    topic: str | None  # the `topic` option: every row's topic when set (the column's otherwise)
    exactly_once: bool = True  # streaming only (exactly_once.py); batch writes are at least once


def write_options(options: dict[str, str], schema: StructType) -> WriteOptions:
    """The write's options, once the DataFrame's columns are known to fit (OptionError)."""
    client = {k[len("samsa.") :]: v for k, v in options.items() if k.startswith("samsa.")}
    if not client.get("bootstrap.servers"):
        raise OptionError("samsa.bootstrap.servers is required: the brokers' host:port list")
    if "transactional.id" in client:
        raise OptionError(
            "samsa.transactional.id cannot be set: the exactly-once sink names its transactions "
            "itself (spark-<query id>-<task>), and the other writes use none"
        )
    check_producer_options({**TASK_PRODUCER_DEFAULTS, **client})
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
    named = {key.lower(): value for key, value in options.items()}  # Spark lower-cases keys
    topic = named.get("topic")
    if not topic and "topic" in fields and fields["topic"] != StringType():
        raise OptionError("the topic column must be a string")
    if "topic" not in fields and not topic:
        raise OptionError("set the topic option, or give the DataFrame a topic column")
    exactly = named.get("exactlyonce", "true").lower()
    if exactly not in ("true", "false"):
        raise OptionError(f"exactlyOnce must be true or false, not {exactly!r}")
    return WriteOptions(client, topic, exactly == "true")


def check_producer_options(config: dict[str, object], needs: str = "") -> None:
    """Refuse, on the driver, the samsa.* options the tasks' producer would refuse (a typo
    failed every task instead, each retried by Spark, with a worker's traceback). The message
    names the option; `needs` says why, when the sink's own settings make the combination."""
    try:
        ProducerConfig.from_dict(config)
    except InvalidConfigError as error:
        culprit = next((key for key in config if _refused_alone(config, key)), None)
        where = f"samsa.{culprit}" if culprit else f"the samsa.* options{needs}"
        raise OptionError(f"{where}: {error}") from None


def _refused_alone(config: dict[str, object], key: str) -> bool:
    alone = {"bootstrap.servers": "localhost:9092", key: config[key]}
    try:
        ProducerConfig.from_dict(alone)
    except InvalidConfigError:
        return True
    return False


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
    """Send every row with `producer`, flush, and raise the first failure. Returns the count.
    Each Arrow batch goes as columns (`Producer.send_many`, one call per topic in it): keys
    hashed together, records appended to the producer's batches in runs, one future."""
    futures: list[RecordsFuture] = []
    count = 0
    for batch in batches:
        names = batch.schema.names
        values = _bytes(batch.column("value"))
        keys = _bytes(batch.column("key")) if "key" in names else None
        partitions = batch.column("partition").to_pylist() if "partition" in names else None
        headers = _headers(batch.column("headers")) if "headers" in names else None
        if options.topic or "topic" not in names:
            futures.append(producer.send_many(options.topic, values, keys, headers, partitions))
        else:
            for topic, rows in _rows_by_topic(batch.column("topic")).items():
                futures.append(
                    producer.send_many(
                        topic,
                        [values[i] for i in rows],
                        None if keys is None else [keys[i] for i in rows],
                        None if headers is None else [headers[i] for i in rows],
                        None if partitions is None else [partitions[i] for i in rows],
                    )
                )
        count += batch.num_rows
    producer.flush(FLUSH_TIMEOUT_S)
    failed = sum(future.failed_count(0) for future in futures)
    if failed:
        first = next(error for future in futures if (error := future.exception(0)) is not None)
        raise KafkaError(f"{failed} of {count} records failed: {first}")
    return count


def _bytes(column: pa.Array | pa.ChunkedArray) -> list[bytes | None]:
    """A binary or string column as bytes (strings as their UTF-8, a zero-copy cast)."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary() if pa.types.is_string(column.type) else pa.large_binary())
    return column.to_pylist()


def _headers(column: pa.Array | pa.ChunkedArray) -> list[list[tuple[str, bytes | None]] | None]:
    return [
        [(h["key"], h["value"]) for h in pairs] if pairs else None for pairs in column.to_pylist()
    ]


def _rows_by_topic(column: pa.Array | pa.ChunkedArray) -> dict[str, list[int]]:
    """Row indexes per topic, in row order (no `topic` option: the column says)."""
    rows: dict[str, list[int]] = {}
    for index, topic in enumerate(column.to_pylist()):
        if topic is None:
            raise KafkaError(f"row {index} has a null topic and the topic option is not set")
        rows.setdefault(topic, []).append(index)
    return rows


_PRODUCERS: dict[str, Producer] = {}


def task_producer(client: dict[str, str]) -> Producer:
    """This worker process's producer for the cluster (reused across tasks; never pickled)."""
    key = repr(sorted(client.items()))
    producer = _PRODUCERS.get(key)
    if producer is None:
        producer = _PRODUCERS[key] = Producer({**TASK_PRODUCER_DEFAULTS, **client})
    return producer
