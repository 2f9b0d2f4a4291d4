"""The ceiling of any PySpark Python data source with the samsa source's schema: a source that
does no I/O and yields prebuilt Arrow batches of the same shape (8 B keys, 100 B values, the
Kafka connector's columns), so that the samsa source's figure can be read against what Spark
itself costs per row of a Python source, measured in the same run.

Each task builds one Arrow batch of BATCH_ROWS rows once (numpy, outside Spark's per-row work)
and yields it until its share of the rows is out (the last slice cut zero-copy): the same batch
sizes the samsa source yields for one Fetch answer. Spark pickles this class by reference, so
the workers import this module: bench.spark_bench puts the repository root on their
PYTHONPATH. Registered as format("samsa-ceiling").
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

BATCH_ROWS = 16_384  # about one 2 MiB Fetch answer of 100 B records
VALUE_BYTES = 100


class CeilingSource(DataSource):
    """format("samsa-ceiling"), options `rows` (in all) and `partitions`."""

    @classmethod
    def name(cls) -> str:
        return "samsa-ceiling"

    def schema(self) -> StructType:
        from samsa.spark.source import spark_schema

        return spark_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return CeilingReader(int(self.options["rows"]), int(self.options["partitions"]))


class CeilingReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int) -> None:
        self.rows = rows
        self.partition_count = partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(index) for index in range(self.partition_count)]

    def read(self, partition: InputPartition) -> Iterator[object]:
        share = self.rows // self.partition_count
        if partition.value < self.rows % self.partition_count:  # type: ignore[attr-defined]
            share += 1
        batch = _batch(min(BATCH_ROWS, share), partition.value)  # type: ignore[attr-defined]
        while share > 0:
            rows = min(len(batch), share)
            yield batch if rows == len(batch) else batch.slice(0, rows)
            share -= rows


def _batch(rows: int, partition: int):  # type: ignore[no-untyped-def]
    """`rows` records in the samsa source's Arrow schema, built from whole columns."""
    import os

    import numpy as np
    import pyarrow as pa

    from samsa.spark.arrow_batches import SCHEMA

    keys = b"".join(b"%08d" % i for i in range(rows))
    key_ends = np.arange(rows + 1, dtype=np.int32) * 8
    value_ends = np.arange(rows + 1, dtype=np.int32) * VALUE_BYTES
    values = os.urandom(VALUE_BYTES) * rows
    topic = b"spark-bench"
    topic_ends = np.arange(rows + 1, dtype=np.int32) * len(topic)
    arrays = [
        pa.Array.from_buffers(
            pa.binary(), rows, [None, pa.py_buffer(key_ends), pa.py_buffer(keys)]
        ),
        pa.Array.from_buffers(
            pa.binary(), rows, [None, pa.py_buffer(value_ends), pa.py_buffer(values)]
        ),
        pa.Array.from_buffers(
            pa.string(), rows, [None, pa.py_buffer(topic_ends), pa.py_buffer(topic * rows)]
        ),
        pa.repeat(pa.scalar(partition, pa.int32()), rows),
        pa.array(np.arange(rows, dtype=np.int64)),
        pa.array(np.full(rows, 1_700_000_000_000_000, dtype=np.int64)).view(
            pa.timestamp("us", tz="UTC")
        ),
        pa.array(np.zeros(rows, dtype=np.int32)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
