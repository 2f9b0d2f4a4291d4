"""`format("samsa")`: the batch read of PySpark's Python Data Source API.

Theory of operation. On the driver, `partitions()` finds the partitions (subscribe, pattern or
assign), asks their first and end offsets at the read's isolation level (a Consumer without a
group), resolves and splits the ranges (ranges.py) and hands Spark one `RangePartition` each. With
`spark.sql.python.filterPushdown.enabled` on, the reader also takes the filters on topic,
partition, offset and timestamp and narrows the ranges first (pushdown.py).
On a worker, `read()` reads its range with the SDK's PartitionRangeReader (one per worker
process and samsa.* settings, reused across tasks: nothing live is pickled) and yields Arrow
batches straight from the stored batches (arrow_batches.py), no Python object per record.
Each range carries the id (KIP-516) its topic had when the tasks were planned (a batch read
asks the ids before it resolves the offsets: `planned`), and is read under it: a topic deleted
(or deleted and created again under the same name) before or while a task reads fails the task
(failOnDataLoss) or ends its range there, never yielding the new topic's records at the planned
offsets, also when Spark retries the task (read_range).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
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

from samsa.client import Admin, AuthorizationError, Consumer, KafkaError
from samsa.client.partition_range import PartitionRangeReader
from samsa.common.errors import ErrorCode
from samsa.spark.arrow_batches import chunk_to_arrow
from samsa.spark.options import (
    OptionError,
    SourceOptions,
    batch_checked,
    parse_options,
    stream_checked,
)
from samsa.spark.pushdown import Pushed, push
from samsa.spark.ranges import (
    OffsetRange,
    offsets_at_times,
    refuse_unread,
    resolve,
    split,
    timestamps_for,
)

log = logging.getLogger(__name__)

PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"
# The range reader's errors for a range whose topic no longer exists: deleted (no topic of that
# name, or none under the range's id), or deleted and created again (another id).
TOPIC_GONE = frozenset({ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
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
        options = batch_checked(parse_options(self.options))
        if _planning_with_pushdown():
            return SamsaPushdownReader(options)
        return SamsaBatchReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from samsa.spark.sink import SamsaArrowWriter, write_options

        options = write_options(dict(self.options), schema)
        if any(k.lower() == "exactlyonce" and v.lower() == "true" for k, v in self.options.items()):
            raise OptionError(
                "exactlyOnce=true is for writeStream: a batch write is at least once (Spark "
                "retries a failed task, which writes its rows again); leave the option out"
            )
        return SamsaArrowWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from samsa.spark.exactly_once import ExactlyOnceStreamWriter
        from samsa.spark.sink import SamsaStreamArrowWriter, write_options

        options = write_options(dict(self.options), schema)
        if options.exactly_once:
            return ExactlyOnceStreamWriter(options)
        return SamsaStreamArrowWriter(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from samsa.spark.stream_source import SamsaStreamReader

        return SamsaStreamReader(parse_options(stream_checked(self.options)))


@dataclass
class RangePartition(InputPartition):
    """One task's offset range (picklable: plain values only) in the topic whose id is
    `topic_id` (empty: unknown, the worker's reader takes the one its metadata shows)."""

    topic: str
    partition: int
    start: int
    end: int
    topic_id: bytes = b""


def planned(
    options: SourceOptions,
    ranges: list[OffsetRange],
    ids_before: Mapping[str, bytes] | None = None,
) -> list[InputPartition]:
    """The tasks reading `ranges`, each with its topic's id (see the module docstring):
    `ids_before`'s, taken before the ranges' offsets were resolved, else the id now. Taken
    after, a topic deleted and created again in between had the old topic's offsets planned
    under the new topic's id, and its tasks read the new records at them as the old ones;
    taken before, such a task fails (failOnDataLoss) or ends its range, as when the topic is
    re-created after planning."""
    ids = dict(ids_before or {})
    unknown = {r.topic for r in ranges} - ids.keys()
    if unknown:
        ids |= topic_ids(options, unknown)
    return [
        RangePartition(r.topic, r.partition, r.start, r.end, ids.get(r.topic, b"")) for r in ranges
    ]


def subscribed_topic_ids(options: SourceOptions) -> dict[str, bytes]:
    """The id of each topic the options name, now: a batch read asks them before it resolves
    its ranges' offsets (`planned`)."""
    with Admin(options.admin_config()) as admin:
        names = _named_topics(admin, options)
    return topic_ids(options, names)


def partition_topic_ids(
    options: SourceOptions, partitions: Iterable[tuple[str, int]]
) -> dict[str, bytes]:
    """The id of each topic of `partitions` now: a stream asks them before its partitions'
    offsets, for the same reason as a batch read (`planned`), and records them in its offsets
    (stream_offsets.py)."""
    return topic_ids(options, {topic for topic, _ in partitions})


def topic_ids(options: SourceOptions, topics: Iterable[str]) -> dict[str, bytes]:
    """Each of `topics`' id now; one deleted since it was looked at has none."""
    names = sorted(topics)
    if not names:
        return {}
    with Admin(options.admin_config()) as admin:
        try:
            described = admin.describe_topics(names)
        except KafkaError as error:  # one is gone: every topic, to keep the others'
            if any(isinstance(e, AuthorizationError) for e in (error, *error.errors.values())):
                raise  # one the ACLs refuse: listing all would only leave it out
            described = admin.describe_topics(None)
    return {name: d.topic_id for name, d in described.items() if name in names}


class SamsaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        ids = subscribed_topic_ids(self.options)  # before the offsets (planned)
        ranges = split(offset_ranges(self.options), self.options.min_partitions)
        return planned(self.options, ranges, ids)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition)


class SamsaPushdownReader(SamsaBatchReader):
    """The batch reader with filter pushdown (pushdown.py): what the filters on topic,
    partition, offset and timestamp allow narrows the ranges before the tasks start."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self.pushed = Pushed()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.pushed, remaining = push(filters)
        return remaining

    def partitions(self) -> list[InputPartition]:
        ids = subscribed_topic_ids(self.options)  # before the offsets (planned)
        ranges = offset_ranges(self.options, self.pushed.wants)
        time_starts: dict[tuple[str, int], int | None] = {}
        if self.pushed.timestamp_from_ms is not None and ranges:
            tps = [(r.topic, r.partition) for r in ranges]
            time_starts = offsets_for_times(
                self.options, dict.fromkeys(tps, self.pushed.timestamp_from_ms)
            )
        ranges = split(self.pushed.narrow(ranges, time_starts), self.options.min_partitions)
        return planned(self.options, ranges, ids)


def _planning_with_pushdown() -> bool:
    """Whether Spark is planning this read with filter pushdown on.

    PySpark fails a query whose reader defines `pushFilters` while
    `spark.sql.python.filterPushdown.enabled` is off, and tells the data source nothing of that
    flag. It calls `reader()` from one worker module when the flag is on and from another when
    it is off, so the caller's module is the one signal there is (PySpark 4.1 to 4.3)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == PUSHDOWN_PLANNER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def read_range(options: SourceOptions, partition: RangePartition) -> Iterator[pa.RecordBatch]:
    """One task's range as Arrow batches (batch and streaming reads alike).

    Retention may delete offsets of the range after it was planned (a stream's start is the
    checkpointed end of the batch before, whatever was deleted since). The reader then fails
    with OFFSET_OUT_OF_RANGE: with failOnDataLoss that fails the task, else the read goes on
    from the partition's first offset, as Kafka's connector does. Every offset yielded lies
    below the one that failed, which lies below the new first offset: nothing is read twice.

    A topic deleted, or deleted and created again, since the range was planned (the reader's
    UNKNOWN_TOPIC_ID: no topic under the range's id, or UNKNOWN_TOPIC_OR_PARTITION: none of
    that name, once request.timeout.ms ran out) lost the rest of the range: with
    failOnDataLoss that fails the task, else the range ends there, as the stream leaves out a
    deleted topic; the new topic's records are never read at the planned offsets."""
    start = read_to = partition.start
    while start < partition.end:
        try:
            for batch in _read_from(options, partition, start):
                read_to = batch.column("offset")[-1].as_py() + 1
                yield batch
            return
        except KafkaError as error:
            if error.code in TOPIC_GONE:
                _topic_gone(options, partition, read_to, error)
                return
            if error.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            if options.fail_on_data_loss:
                raise KafkaError(
                    f"{partition.topic}-{partition.partition}: offsets from {read_to} on are no "
                    f"longer stored (deleted by retention or DeleteRecords since the range "
                    f"{partition.start}..{partition.end - 1} was planned, or truncated): records "
                    "may be lost; set failOnDataLoss=false to read on from the first offset "
                    f"still stored ({error})",
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                ) from error
            first = first_offset(options, (partition.topic, partition.partition))
            if first <= max(start, read_to):
                raise  # not records deleted ahead of the read: no offset to go on from
            start = first


def _topic_gone(
    options: SourceOptions, partition: RangePartition, read_to: int, error: KafkaError
) -> None:
    """The range's topic was deleted (and maybe created again): raise with failOnDataLoss,
    else say so and let the range end (read_range)."""
    what = (
        f"{partition.topic}-{partition.partition}: the topic was deleted (or deleted and "
        f"created again) since the range {partition.start}..{partition.end - 1} was planned; "
        f"offsets from {read_to} on name records that no longer exist"
    )
    if options.fail_on_data_loss:
        raise KafkaError(
            f"{what}: records may be lost; set failOnDataLoss=false to go on without them "
            f"({error})",
            ErrorCode.UNKNOWN_TOPIC_ID,
        ) from error
    log.warning("%s: the range ends there (failOnDataLoss=false)", what)


def _read_from(
    options: SourceOptions, partition: RangePartition, start: int
) -> Iterator[pa.RecordBatch]:
    reader = range_reader(options.client)
    topic, number = partition.topic, partition.partition
    topic_id = partition.topic_id or None
    for chunk in reader.chunks(topic, number, start, partition.end, options.isolation, topic_id):
        yield from chunk_to_arrow(
            chunk.data,
            chunk.aborted,
            topic,
            number,
            start,
            partition.end,
            options.include_headers,
        )


def first_offset(options: SourceOptions, tp: tuple[str, int]) -> int:
    """The partition's first stored offset now."""
    return partition_bounds(options, [tp])[0][tp]


def offset_ranges(
    options: SourceOptions, wanted: Callable[[tuple[str, int]], bool] = lambda tp: True
) -> list[OffsetRange]:
    """The ranges the options ask for (of the partitions `wanted`), resolved against the
    cluster now (the driver's side)."""
    subscribed = subscribed_partitions(options)
    refuse_unread(options, subscribed)
    partitions = [tp for tp in subscribed if wanted(tp)]
    if not partitions:
        return []
    first, last = partition_bounds(options, partitions)
    starting = starting_offsets(options, partitions, "earliest")
    ending: str | Mapping[str, Mapping[int, int]] = options.ending
    if options.ending_times is not None:
        times = timestamps_for(options.ending_times, partitions, "endingOffsetsByTimestamp")
        found = offsets_for_times(options, times)
        ending = offsets_at_times(found, times, "endingOffsetsByTimestamp", True, last)
    by_offsets = options.starting_times is None and options.ending_times is None
    return resolve(partitions, starting, ending, first, last, options.fail_on_data_loss, by_offsets)


def starting_offsets(
    options: SourceOptions, partitions: list[tuple[str, int]], default: str
) -> str | Mapping[str, Mapping[int, int]]:
    """Where the read starts: by time when asked (that wins), else startingOffsets."""
    if options.starting_times is None:
        return options.starting or default
    times = timestamps_for(options.starting_times, partitions, "startingOffsetsByTimestamp")
    found = offsets_for_times(options, times)
    latest = options.starting_time_strategy == "latest"
    return offsets_at_times(found, times, "startingOffsetsByTimestamp", latest)


def offsets_for_times(
    options: SourceOptions, times: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], int | None]:
    """Each partition's first offset whose timestamp is at least the given ms (None: none)."""
    with Consumer(options.consumer_config()) as consumer:
        found = consumer.offsets_for_times(times)
    return {tp: None if at is None else at.offset for tp, at in found.items()}


def subscribed_partitions(
    options: SourceOptions, missing_ok: bool = False
) -> list[tuple[str, int]]:
    """The partitions the options name, as the cluster has them now. A subscribed topic or an
    assigned partition that does not exist is an error, unless `missing_ok` (a running stream:
    one deleted since is the caller's data loss to judge, failOnDataLoss)."""
    with Admin(options.admin_config()) as admin:
        topics = _named_topics(admin, options)
        described = admin.describe_topics(topics) if topics else {}
    partitions = sorted(
        (topic, p.partition) for topic, d in described.items() for p in d.partitions
    )
    if options.assign:
        have = set(partitions)
        partitions = [tp for tp in options.assign if tp in have]
        gone = [f"{topic}-{p}" for topic, p in options.assign if (topic, p) not in have]
        if gone and not missing_ok:
            raise OptionError(f"assign names partitions that do not exist: {', '.join(gone)}")
        return partitions
    missing = [t for t in options.subscribe if t not in described]
    if missing and not missing_ok:
        raise OptionError(f"subscribe names topics that do not exist: {missing}")
    return partitions


def _named_topics(admin: Admin, options: SourceOptions) -> list[str]:
    """The cluster's topics that the options subscribe to or assign partitions of."""
    assigned = {topic for topic, _ in options.assign}
    return [t for t in admin.list_topics() if t in assigned or options.matches(t)]


def partition_bounds(
    options: SourceOptions, partitions: list[tuple[str, int]]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Each partition's first offset and end offset (at the read's isolation level) now."""
    with Consumer(options.consumer_config()) as consumer:
        return consumer.beginning_offsets(partitions), consumer.end_offsets(partitions)


_READERS: dict[str, PartitionRangeReader] = {}


def range_reader(client: dict[str, str]) -> PartitionRangeReader:
    """This worker process's reader for the cluster and settings (gRPC channels are opened
    once, lazily). Keyed by every samsa.* setting, as task_producer is: Spark reuses a Python
    worker across queries, and one keyed by the bootstrap list served a later query with the
    first one's samsa.request.timeout.ms."""
    key = repr(sorted(client.items()))
    reader = _READERS.get(key)
    if reader is None:
        reader = _READERS[key] = PartitionRangeReader(client)
    return reader
