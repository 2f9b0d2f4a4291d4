"""Stored batches to Arrow record batches in the Kafka connector's schema, a batch at a time.

Theory of operation. A records section is already column-wise (docs/record-batch.md §6), so a
batch becomes an Arrow batch without a Python object per record: `batch_columns` says where each
array and byte run lies; numpy reads the length arrays in place; an Arrow binary column is the
section's own buffer with offsets = the running sum of the lengths (starting where the run
starts) and a validity bitmap where a length is -1. Offsets and timestamps are base + deltas in
numpy; topic and partition are one repeated value. Headers are a list array whose offsets are
the running sum of the header counts, over a struct of (key string, value binary) built the same
way. The result is cut (zero-copy) to the offsets asked for.

`chunk_to_arrow` walks one Fetch answer's batches: markers are never shown, batches of aborted
transactions are hidden at read_committed (the answer's aborted list, per batch as Kafka's
consumer does), and batches wholly outside [start, end) are skipped before anything is decoded.

Pure: no I/O (numpy and pyarrow only).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from samsa.common.record import header
from samsa.common.record.codec import decode_batch, read_control_marker
from samsa.common.record.columns import BatchColumns, batch_columns
from samsa.common.record.transaction_filter import AbortedTransactionFilter

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
HEADERS_FIELD = pa.field("headers", pa.list_(pa.field("element", HEADER_TYPE)))
SCHEMA = pa.schema(FIELDS)
SCHEMA_WITH_HEADERS = pa.schema([*FIELDS, HEADERS_FIELD])
CREATE_TIME, LOG_APPEND_TIME = 0, 1  # Kafka's timestampType values


def arrow_schema(include_headers: bool) -> pa.Schema:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


def chunk_to_arrow(
    data: bytes,
    aborted: Iterable[tuple[int, int]],
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> Iterator[pa.RecordBatch]:
    """The records of [start, end) in `data` (whole batches back to back), batch by batch."""
    shown = AbortedTransactionFilter(aborted)
    position = 0
    while position < len(data):
        batch_header = header.read_header(data, position)
        size = batch_header.batch_length + header.LOG_OVERHEAD
        marker = None
        if batch_header.is_control:
            marker = read_control_marker(decode_batch(data, position))[0]
        if (
            shown.visible(batch_header, marker)
            and batch_header.last_offset >= start
            and batch_header.base_offset < end
        ):
            columns = batch_columns(data, position)
            first, stop = _index_range(columns, start, end)
            if stop > first:
                yield batch_to_arrow(columns, topic, partition, include_headers).slice(
                    first, stop - first
                )
        position += size


def batch_to_arrow(
    columns: BatchColumns, topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """Every record of one batch as an Arrow batch in `arrow_schema(include_headers)`."""
    n = columns.record_count
    data = columns.data
    buffer = pa.py_buffer(data)
    batch_header = columns.header
    offsets = _int32s(data, columns.offset_deltas_at, n).astype(np.int64) + batch_header.base_offset
    if batch_header.is_log_append_time:
        millis = np.full(n, batch_header.max_timestamp, dtype=np.int64)
        timestamp_type = LOG_APPEND_TIME
    else:
        deltas = np.frombuffer(data, dtype="<i8", count=n, offset=columns.timestamp_deltas_at)
        millis = deltas + batch_header.base_timestamp
        timestamp_type = CREATE_TIME
    arrays = [
        _binary(buffer, _int32s(data, columns.key_lengths_at, n), columns.keys[0], pa.binary()),
        _binary(buffer, _int32s(data, columns.value_lengths_at, n), columns.values[0], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.array(millis * 1000, pa.int64()).view(pa.timestamp("us", tz="UTC")),
        pa.repeat(pa.scalar(timestamp_type, pa.int32()), n),
    ]
    if include_headers:
        arrays.append(_headers(columns, buffer))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def _int32s(data: bytes, at: int, count: int) -> np.ndarray:
    return np.frombuffer(data, dtype="<i4", count=count, offset=at)


def _binary(buffer: pa.Buffer, lengths: np.ndarray, start: int, kind: pa.DataType) -> pa.Array:
    """A binary (or string) column over `buffer`: item i is the next max(lengths[i], 0) bytes
    from `start`, null where lengths[i] is -1. No byte is copied."""
    count = len(lengths)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    ends = np.empty(count + 1, dtype=np.int32)
    ends[0] = start
    np.cumsum(sizes, out=ends[1:])
    ends[1:] += start
    nulls = count - int(np.count_nonzero(valid))
    validity = None if nulls == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(kind, count, [validity, pa.py_buffer(ends), buffer], nulls)


def _headers(columns: BatchColumns, buffer: pa.Buffer) -> pa.Array:
    data, h = columns.data, columns.header_count
    counts = _int32s(data, columns.header_counts_at, columns.record_count)
    list_offsets = np.empty(columns.record_count + 1, dtype=np.int32)
    list_offsets[0] = 0
    np.cumsum(counts, out=list_offsets[1:])
    keys = _binary(
        buffer, _int32s(data, columns.header_key_lengths_at, h), columns.header_keys[0], pa.string()
    )
    values = _binary(
        buffer,
        _int32s(data, columns.header_value_lengths_at, h),
        columns.header_values[0],
        pa.binary(),
    )
    pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(list_offsets, pa.int32()), pairs).cast(
        HEADERS_FIELD.type
    )


def _index_range(columns: BatchColumns, start: int, end: int) -> tuple[int, int]:
    """The record indexes of the batch whose offsets lie in [start, end)."""
    base = columns.header.base_offset
    n = columns.record_count
    if columns.dense_offsets:
        return max(0, start - base), min(n, end - base)
    offsets = _int32s(columns.data, columns.offset_deltas_at, n).astype(np.int64) + base
    first = int(np.searchsorted(offsets, start, side="left"))
    return first, int(np.searchsorted(offsets, end, side="left"))
