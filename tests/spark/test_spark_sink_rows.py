"""Goal: the sink sends each row where Spark's Kafka connector would: the `topic` option, when
set, overrides any topic column (so a DataFrame read from one topic, its topic column kept, is
written to the topic the option names, not back to where it came from); without the option a
row goes to its topic column. Pure: a recording producer, no cluster and no Spark session."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from samsa.spark.options import OptionError
from samsa.spark.sink import WriteOptions, send_with, write_options

BOOT = {"samsa.bootstrap.servers": "h:1"}


class _Settled:
    def failed_count(self, timeout: float | None = None) -> int:
        return 0

    def exception(self, timeout: float | None = None) -> None:
        return None


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None]] = []

    def send_many(self, topic, values, keys=None, headers=None, partitions=None):  # type: ignore[no-untyped-def]
        self.sent += [(topic, value) for value in values]
        return _Settled()

    def flush(self, timeout: float | None = None) -> None:
        pass


def rows(topics: list[str | None]) -> pa.RecordBatch:
    values = [b"v%d" % i for i in range(len(topics))]
    return pa.RecordBatch.from_pydict(
        {"value": pa.array(values, pa.binary()), "topic": pa.array(topics, pa.string())}
    )


def test_the_topic_option_overrides_the_topic_column() -> None:
    producer = RecordingProducer()
    options = WriteOptions({"bootstrap.servers": "h:1"}, "copy")
    sent = send_with(producer, options, iter([rows(["source", None, "other"])]))  # type: ignore[arg-type]
    assert sent == 3
    assert producer.sent == [("copy", b"v0"), ("copy", b"v1"), ("copy", b"v2")]


def test_without_the_option_each_row_goes_to_its_topic_column() -> None:
    producer = RecordingProducer()
    options = WriteOptions({"bootstrap.servers": "h:1"}, None)
    send_with(producer, options, iter([rows(["a", "b", "a"])]))  # type: ignore[arg-type]
    assert sorted(producer.sent) == [("a", b"v0"), ("a", b"v2"), ("b", b"v1")]


def test_the_topic_column_type_matters_only_when_it_is_used() -> None:
    schema = StructType([StructField("value", BinaryType()), StructField("topic", IntegerType())])
    assert write_options(BOOT | {"topic": "t"}, schema).topic == "t"
    with pytest.raises(OptionError, match="topic column must be a string"):
        write_options(BOOT, schema)
    as_text = StructType([StructField("value", BinaryType()), StructField("topic", StringType())])
    assert write_options(BOOT, as_text).topic is None
