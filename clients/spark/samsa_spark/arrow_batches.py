"""Stored batches to Arrow record batches in the Kafka connector's schema, a Fetch answer at a
time.

Theory of operation. A records section is already column-wise (docs/record-batch.md §6), so
batches become an Arrow batch without a Python object per record: `batch_columns` checks each
stored batch and says where each array and byte run lies. The batches of one Fetch answer go
into ONE Arrow batch (a Python step per stored batch is the cost that matters: a stored batch
often holds a few hundred records): each column is gathered across them with one `b"".join`
of their slices (the fixed-width arrays, and the key, value and header byte runs), then numpy
works on the whole column at once. An Arrow binary column is the joined bytes with offsets =
the running sum of the lengths and a validity bitmap where a length is -1. Offsets and
timestamps are each batch's base (np.repeat) + the deltas; a LogAppendTime batch's records all
take its max timestamp. Topic and partition are one repeated value. Headers are a list array
whose offsets are the running sum of the header counts, over a struct of (key string, value
binary) built the same way. The result is cut (zero-copy) to the offsets asked for.

`chunk_to_arrow` walks one Fetch answer's batches: markers are never shown, batches of aborted
transactions are hidden at read_committed (the answer's aborted list, per batch as Kafka's
consumer does), and batches wholly outside [start, end) are skipped before anything is decoded.
An answer's batches whose sections add up to more than ARROW_BATCH_BYTES_MAX are split over
several Arrow batches (the int32 offsets of a binary column must stay below 2 GiB).

Pure: no I/O (numpy and pyarrow only).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from samsa.common import limits
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

# Records-section bytes gathered into one Arrow batch before another is started. A group ends
# below this plus one (inflated) batch, which keeps every int32 offset far from 2 GiB.
ARROW_BATCH_BYTES_MAX = 32 * limits.MIB
assert ARROW_BATCH_BYTES_MAX + limits.batch_uncompressed_bytes_max < 2**31


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
    """The records of [start, end) in `data` (whole batches back to back): one Arrow batch per
    ARROW_BATCH_BYTES_MAX of records sections (one for a Fetch answer of the usual size)."""
    group: list[BatchColumns] = []
    group_bytes = 0
    for columns in shown_batches(data, aborted, start, end):
        section_bytes = columns.header_values[1] - columns.offset_deltas_at
        if group and group_bytes + section_bytes > ARROW_BATCH_BYTES_MAX:
            yield from _cut(group, topic, partition, start, end, include_headers)
            group, group_bytes = [], 0
        group.append(columns)
        group_bytes += section_bytes
    if group:
        yield from _cut(group, topic, partition, start, end, include_headers)


def shown_batches(
    data: bytes, aborted: Iterable[tuple[int, int]], start: int, end: int
) -> Iterator[BatchColumns]:
    """The checked columns of each batch in `data` a reader shows that holds an offset of
    [start, end): markers never, aborted transactions' batches not."""
    shown = AbortedTransactionFilter(aborted)
    position = 0
    while position < len(data):
        batch_header = header.read_header(data, position)
        if batch_header.base_offset >= end:
            return  # batches are in offset order: nothing further is asked for
        marker = None
        if batch_header.is_control:
            marker = read_control_marker(decode_batch(data, position))[0]
        if shown.visible(batch_header, marker) and batch_header.last_offset >= start:
            yield batch_columns(data, position)
        position += batch_header.batch_length + header.LOG_OVERHEAD


def _cut(
    group: Sequence[BatchColumns],
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> Iterator[pa.RecordBatch]:
    """The group's records of [start, end), if any, as one Arrow batch."""
    batch, offsets = batches_to_arrow(group, topic, partition, include_headers)
    first = int(np.searchsorted(offsets, start, side="left"))
    stop = int(np.searchsorted(offsets, end, side="left"))
    if stop > first:
        yield batch if stop - first == len(offsets) else batch.slice(first, stop - first)


def batches_to_arrow(
    group: Sequence[BatchColumns], topic: str, partition: int, include_headers: bool
) -> tuple[pa.RecordBatch, np.ndarray]:
    """Every record of the batches (in offset order) as one Arrow batch in
    `arrow_schema(include_headers)`, and the records' offsets (int64, increasing)."""
    views = [memoryview(columns.data) for columns in group]
    counts = np.array([columns.record_count for columns in group], dtype=np.int64)
    count = int(counts.sum())
    offsets = _numbers(views, [(c.offset_deltas_at, 4 * c.record_count) for c in group], "<i4")
    offsets = offsets.astype(np.int64) + np.repeat(
        np.array([c.header.base_offset for c in group], dtype=np.int64), counts
    )
    log_append = np.array([c.header.is_log_append_time for c in group], dtype=np.bool_)
    millis = _numbers(views, [(c.timestamp_deltas_at, 8 * c.record_count) for c in group], "<i8")
    if log_append.any():  # every record of such a batch takes the batch's max timestamp
        millis = np.where(np.repeat(log_append, counts), 0, millis)
    bases = [
        c.header.max_timestamp if c.header.is_log_append_time else c.header.base_timestamp
        for c in group
    ]
    millis = millis + np.repeat(np.array(bases, dtype=np.int64), counts)
    timestamp_types = np.repeat(
        np.where(log_append, LOG_APPEND_TIME, CREATE_TIME).astype(np.int32), counts
    )
    arrays = [
        _binary_column(views, group, "key_lengths_at", "keys", pa.binary()),
        _binary_column(views, group, "value_lengths_at", "values", pa.binary()),
        _repeated_string(topic, count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array(offsets, pa.int64()),
        pa.array(millis * 1000, pa.int64()).view(pa.timestamp("us", tz="UTC")),
        pa.array(timestamp_types, pa.int32()),
    ]
    if include_headers:
        arrays.append(_headers(views, group))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers)), offsets


def _repeated_string(text: str, count: int) -> pa.Array:
    """`text` `count` times, built from numpy (pa.repeat of a string scalar is slower)."""
    encoded = text.encode()
    assert len(encoded) * count < 2**31, "int32 string offsets"
    ends = np.arange(count + 1, dtype=np.int32) * np.int32(len(encoded))
    buffers = [None, pa.py_buffer(ends), pa.py_buffer(encoded * count)]
    return pa.Array.from_buffers(pa.string(), count, buffers, 0)


def _gather(views: Sequence[memoryview], parts: Iterable[tuple[int, int]]) -> bytes:
    """The (position, size) part of each batch's buffer, back to back (one copy)."""
    return b"".join([view[at : at + size] for view, (at, size) in zip(views, parts, strict=True)])


def _numbers(
    views: Sequence[memoryview], parts: Iterable[tuple[int, int]], dtype: str
) -> np.ndarray:
    return np.frombuffer(_gather(views, parts), dtype=dtype)


def _binary_column(
    views: Sequence[memoryview],
    group: Sequence[BatchColumns],
    lengths_at: str,
    run: str,
    kind: pa.DataType,
) -> pa.Array:
    """A binary column of the batches: lengths from the int32[N] at `lengths_at`, bytes from the
    byte range `run` (BatchColumns attribute names)."""
    lengths = _numbers(views, [(getattr(c, lengths_at), 4 * c.record_count) for c in group], "<i4")
    runs = [getattr(c, run) for c in group]
    return _binary(_gather(views, [(s, e - s) for s, e in runs]), lengths, kind)


def _binary(data: bytes, lengths: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A binary (or string) column over `data`: item i is the next max(lengths[i], 0) bytes,
    null where lengths[i] is -1. No byte is copied."""
    count = len(lengths)
    valid = lengths >= 0
    ends = np.empty(count + 1, dtype=np.int32)
    ends[0] = 0
    np.cumsum(np.maximum(lengths, 0), out=ends[1:])
    assert ends[-1] == len(data), "columns.py proved the lengths add up to the bytes"
    nulls = count - int(np.count_nonzero(valid))
    validity = None if nulls == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        kind, count, [validity, pa.py_buffer(ends), pa.py_buffer(data)], nulls
    )


def _headers(views: Sequence[memoryview], group: Sequence[BatchColumns]) -> pa.Array:
    counts = _numbers(views, [(c.header_counts_at, 4 * c.record_count) for c in group], "<i4")
    list_offsets = np.empty(len(counts) + 1, dtype=np.int32)
    list_offsets[0] = 0
    np.cumsum(counts, out=list_offsets[1:])
    key_lengths = [(c.header_key_lengths_at, 4 * c.header_count) for c in group]
    value_lengths = [(c.header_value_lengths_at, 4 * c.header_count) for c in group]
    keys = _binary(
        _gather(views, [(s, e - s) for s, e in (c.header_keys for c in group)]),
        _numbers(views, key_lengths, "<i4"),
        pa.string(),
    )
    values = _binary(
        _gather(views, [(s, e - s) for s, e in (c.header_values for c in group)]),
        _numbers(views, value_lengths, "<i4"),
        pa.binary(),
    )
    pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(list_offsets, pa.int32()), pairs).cast(
        HEADERS_FIELD.type
    )
