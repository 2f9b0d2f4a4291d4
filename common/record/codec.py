"""The record-batch codec: records in, batch bytes out, and back. docs/record-batch.md is the
byte-by-byte specification; `header.py` owns the 61-byte header, this module the records section.

Theory of operation. A batch is the header followed by the records section, which is laid out
column-wise (all little-endian, N = record_count, H = total header count):

    offset_deltas int32[N] | timestamp_deltas int64[N] | key_lengths int32[N] |
    value_lengths int32[N] | header_counts int32[N] | header_key_lengths int32[H] |
    header_value_lengths int32[H] | key bytes | value bytes | header key bytes | header value bytes

Because every per-record number sits in a fixed-width array ahead of the bytes, both directions
cost a constant number of C-level calls per batch: `array(...).tobytes()` / `frombytes`, `map(len,
...)`, `b"".join`, `sum`/`min`, and one `struct` unpack that cuts a whole column of keys or values
into bytes objects. No Python-level loop runs per record on the common path (no nulls, no
headers); nulls and headers take slower but still column-wise paths.

Invariants of an encoded batch (checked when encoding, re-checked when decoding):
- 1 <= N; offset deltas are >= 0, strictly increasing, and the last equals
  header.last_offset_delta (dense 0..N-1 from producers, sparse after compaction);
- a length is >= 0, or -1 for null (keys, values, header values; header keys are never null and
  are UTF-8);
- the section's length is exactly what its arrays imply: no byte missing, no byte left over;
- compressed (attributes & 7 == 4): the section is one zstd frame, never inflated beyond
  limits.batch_uncompressed_bytes_max whatever its frame header claims.

Decoding never trusts a length: every count and length is bounds-checked against the bytes that
remain before anything is sliced or allocated, and every bad input raises a SamsaError subclass
(CorruptRecordError mostly) whose message names the field and the numbers. The module is pure: no
I/O, no clock, no threads.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, islice, repeat
from operator import add, lt, sub
from typing import NamedTuple

import zstandard

from samsa.common import limits
from samsa.common.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedFormatError,
)
from samsa.common.record import header

__all__ = [
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "Record",
    "RecordBatch",
    "build_batch",
    "build_control_batch",
    "decode_batch",
    "decode_batches",
    "read_control_marker",
]

# Bytes of fixed-width arrays per record: offset delta 4, timestamp delta 8, key length 4,
# value length 4, header count 4. A record_count is checked against this before any allocation.
ARRAY_BYTES_PER_RECORD = 24
# Bytes of fixed-width arrays per header: key length 4, value length 4.
ARRAY_BYTES_PER_HEADER = 8
NULL_LENGTH = -1

# Control records (transaction markers): key = int16 version | int16 type,
# value = int16 version | int32 coordinator_epoch. Kafka's ControlRecordType ids.
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
CONTROL_KEY_VERSION = 0
CONTROL_VALUE_VERSION = 0
_CONTROL_KEY = struct.Struct("<hh")
_CONTROL_VALUE = struct.Struct("<hi")

_INT32 = "i"
_INT64 = "q"
assert array(_INT32).itemsize == 4 and array(_INT64).itemsize == 8
assert ARRAY_BYTES_PER_RECORD == 4 + 8 + 4 + 4 + 4
# The arrays are little-endian on the wire; on a big-endian CPU each one is byte-swapped once.
_BYTESWAP = sys.byteorder != "little"

# Producers send dense offset deltas 0..N-1: encoding copies a prefix of this, and decoding
# recognises a dense column with one memcmp instead of N comparisons.
_DENSE_CACHE_COUNT = 16_384
_DENSE_OFFSET_DELTAS = array(_INT32, range(_DENSE_CACHE_COUNT))
if _BYTESWAP:
    _DENSE_OFFSET_DELTAS.byteswap()
_DENSE_OFFSET_DELTA_BYTES = _DENSE_OFFSET_DELTAS.tobytes()

# The struct module caches the last 100 formats it compiled. A uniform column's format
# ("100s" * N) repeats from batch to batch, so it goes through that cache, but only up to this
# many records: a hostile batch must not pin a multi-megabyte compiled format in the cache.
_STRUCT_CACHED_COUNT_MAX = 4096


class Record(NamedTuple):
    """One decoded record with absolute offset and timestamp (convenience iteration)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RecordBatch:
    """A decoded batch, column-wise: one sequence per field, index i is record i."""

    __slots__ = ("header", "headers", "keys", "offset_deltas", "timestamp_deltas", "values")

    def __init__(
        self,
        batch_header: header.BatchHeader,
        offset_deltas: Sequence[int],
        timestamp_deltas: Sequence[int],
        keys: list[bytes | None],
        values: list[bytes | None],
        headers: list[tuple[tuple[str, bytes | None], ...]],
    ) -> None:
        self.header = batch_header
        self.offset_deltas = offset_deltas
        self.timestamp_deltas = timestamp_deltas
        self.keys = keys
        self.values = values
        self.headers = headers

    def __len__(self) -> int:
        return self.header.record_count

    def __iter__(self) -> Iterator[Record]:
        # tuple.__new__ builds each Record in C (a NamedTuple's own __new__ is Python code).
        columns = zip(
            self.offsets(), self.timestamps(), self.keys, self.values, self.headers, strict=True
        )
        return map(tuple.__new__, repeat(Record), columns)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.header.base_offset}, "
            f"last_offset={self.header.last_offset}, record_count={self.header.record_count})"
        )

    def offsets(self) -> list[int]:
        """Absolute offsets: base_offset + offset delta."""
        base_offset = self.header.base_offset
        if self.header.last_offset_delta == self.header.record_count - 1:
            return list(range(base_offset, base_offset + self.header.record_count))
        return list(map(add, self.offset_deltas, repeat(base_offset)))

    def timestamps(self) -> list[int]:
        """Absolute timestamps; a LogAppendTime batch gives every record its max_timestamp."""
        if self.header.is_log_append_time:
            return [self.header.max_timestamp] * self.header.record_count
        return list(map(add, self.timestamp_deltas, repeat(self.header.base_timestamp)))


# --- encoding ----------------------------------------------------------------------------------


def build_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamps: Sequence[int] | int = 0,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    offset_deltas: Sequence[int] | None = None,
    compression: int = header.COMPRESSION_NONE,
    compression_level: int = 3,
    base_offset: int = 0,
    partition_leader_epoch: int = header.NO_PARTITION_LEADER_EPOCH,
    producer_id: int = header.NO_PRODUCER_ID,
    producer_epoch: int = header.NO_PRODUCER_EPOCH,
    base_sequence: int = header.NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """Encode one batch. `keys`, `timestamps` (or one int for all), `headers` and
    `offset_deltas` are columns parallel to `values`; None values/keys are nulls.

    base_timestamp is the first record's timestamp and max_timestamp the largest; the CRC is
    filled in. Raises InvalidRecordError for bad input (empty, mismatched columns, offset deltas
    not strictly increasing, non-bytes values, an unknown compression) and RecordTooLargeError
    for a batch over limits.batch_bytes_max (or a section over batch_uncompressed_bytes_max).
    """
    record_count = len(values)
    if record_count == 0:
        raise InvalidRecordError("a batch needs at least one record; got an empty values list")
    if compression not in header.SUPPORTED_COMPRESSIONS:
        raise InvalidRecordError(f"compression {compression} is not supported: use 0 or 4 (zstd)")
    parts, last_offset_delta = _encode_offset_deltas(offset_deltas, record_count)
    timestamp_delta_bytes, base_timestamp, max_timestamp = _encode_timestamps(
        timestamps, record_count
    )
    key_column = _encode_keys(keys, record_count)
    value_column = _encode_column("values", values)
    header_count_bytes, header_key_column, header_value_column = _encode_headers(
        headers, record_count
    )
    columns = (key_column, value_column, header_key_column, header_value_column)
    parts = [parts, timestamp_delta_bytes, key_column.length_bytes, value_column.length_bytes]
    parts += (header_count_bytes, header_key_column.length_bytes, header_value_column.length_bytes)
    section_bytes = sum(map(len, parts)) + sum(column.payload_bytes for column in columns)
    for column in columns:
        parts += column.items
    section = _join_section(parts, section_bytes)
    if compression == header.COMPRESSION_ZSTD:
        section = zstandard.ZstdCompressor(level=compression_level).compress(section)
    attributes = compression
    attributes |= header.TIMESTAMP_TYPE_LOG_APPEND_TIME if log_append_time else 0
    attributes |= header.TRANSACTIONAL if transactional else 0
    attributes |= header.CONTROL if control else 0
    fields = [
        base_offset,
        header.HEADER_BYTES - header.LOG_OVERHEAD + len(section),
        partition_leader_epoch,
        header.MAGIC,
        0,  # the CRC, computed below over the packed fields that follow it and the section
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    ]
    return _sign_batch(fields, section)


def recompress_batch(
    buffer: bytes | bytearray | memoryview,
    position: int,
    batch_header: header.BatchHeader,
    compression: int,
    compression_level: int = 3,
) -> bytes:
    """The batch at `position` (already checked: framing, CRC, records section) with its records
    section in `compression`: what a leader appends for a topic whose compression.type is not
    `producer` (Kafka recompresses there too). Every header field is kept but the codec bits,
    the length and the CRC; a zstd section is inflated within batch_uncompressed_bytes_max."""
    if compression not in header.SUPPORTED_COMPRESSIONS:
        raise InvalidRecordError(f"compression {compression} is not supported: use 0 or 4 (zstd)")
    frame = memoryview(buffer)[position + header.HEADER_BYTES : position + batch_header.size_bytes]
    if batch_header.compression == header.COMPRESSION_ZSTD:
        section = _decompress_section(frame)
    else:
        section = bytes(frame)
    if compression == header.COMPRESSION_ZSTD:
        section = zstandard.ZstdCompressor(level=compression_level).compress(section)
    fields = list(batch_header)
    fields[1] = header.HEADER_BYTES - header.LOG_OVERHEAD + len(section)  # batch_length
    fields[4] = 0  # the CRC, computed by _sign_batch
    fields[5] = (batch_header.attributes & ~header.COMPRESSION_MASK) | compression
    return _sign_batch(fields, section)


def _sign_batch(fields: list[int], section: bytes) -> bytes:
    """Pack the header with its CRC-32C over [attributes, end) and prepend it to the section."""
    batch_bytes = header.HEADER_BYTES + len(section)
    if batch_bytes > limits.batch_bytes_max:
        raise RecordTooLargeError(
            f"batch of {batch_bytes} bytes exceeds the hard limit of {limits.batch_bytes_max} "
            f"bytes: send fewer or smaller records per batch"
        )
    try:
        unsigned = header.HEADER.pack(*fields)
    except struct.error as error:
        raise InvalidRecordError(f"a batch header field is out of range: {error}") from None
    crc = header.crc32c.crc32c(section, header.crc32c.crc32c(unsigned[header.CRC_COVERED_FROM :]))
    fields[4] = crc
    signed = header.HEADER.pack(*fields)
    assert signed[header.CRC_COVERED_FROM :] == unsigned[header.CRC_COVERED_FROM :]
    return signed + section


def _join_section(parts: list[bytes], section_bytes: int) -> bytes:
    """One b"".join of the arrays and the bytes columns, which must add up to `section_bytes`."""
    if section_bytes > limits.batch_uncompressed_bytes_max:
        raise RecordTooLargeError(
            f"records section of {section_bytes} bytes exceeds the hard limit of "
            f"{limits.batch_uncompressed_bytes_max} uncompressed bytes"
        )
    try:
        section = b"".join(parts)
    except TypeError:
        raise InvalidRecordError(
            "keys, values and header values must be bytes (or None for null); "
            + _first_non_bytes(parts)
        ) from None
    if len(section) != section_bytes:
        # len() of a memoryview counts items, not bytes: its lengths would not match its bytes.
        raise InvalidRecordError(
            f"keys, values and header values must be bytes: their lengths add up to "
            f"{section_bytes} bytes of section but they joined into {len(section)}"
        )
    return section


def _first_non_bytes(parts: list[object]) -> str:
    for item in parts:
        if not isinstance(item, bytes | bytearray | memoryview):
            return f"got {type(item).__name__} {item!r:.40}"
    return "got a non-bytes item"


def _to_array(typecode: str, numbers: object) -> array[int]:
    """An int32/int64 array built in C from an iterable; InvalidRecordError if one does not fit."""
    try:
        return array(typecode, numbers)  # type: ignore[call-overload]
    except (TypeError, OverflowError) as error:
        width = 32 if typecode == _INT32 else 64
        raise InvalidRecordError(f"expected int{width} integers: {error}") from None


def _array_bytes(column: array[int]) -> bytes:
    """The little-endian bytes of an array (swapped on a big-endian CPU)."""
    if _BYTESWAP:
        column = array(column.typecode, column)
        column.byteswap()
    return column.tobytes()


def _dump(typecode: str, numbers: object) -> bytes:
    return _array_bytes(_to_array(typecode, numbers))


def _encode_offset_deltas(
    offset_deltas: Sequence[int] | None, record_count: int
) -> tuple[bytes, int]:
    """The offset_deltas array and last_offset_delta; sparse deltas must strictly increase."""
    if offset_deltas is None:
        if record_count <= _DENSE_CACHE_COUNT:
            return _DENSE_OFFSET_DELTA_BYTES[: 4 * record_count], record_count - 1
        return _dump(_INT32, range(record_count)), record_count - 1
    _check_column_length("offset_deltas", offset_deltas, record_count)
    column = _to_array(_INT32, offset_deltas)
    if column[0] < 0:
        raise InvalidRecordError(f"offset_deltas[0] = {column[0]} is negative")
    if not all(map(lt, column, islice(column, 1, None))):
        index = next(i for i in range(1, record_count) if column[i] <= column[i - 1])
        raise InvalidRecordError(
            f"offset_deltas must strictly increase: offset_deltas[{index}] = {column[index]} "
            f"follows {column[index - 1]}"
        )
    return _array_bytes(column), column[-1]


def _encode_timestamps(
    timestamps: Sequence[int] | int, record_count: int
) -> tuple[bytes, int, int]:
    """The timestamp_deltas array, base_timestamp (the first record's) and max_timestamp."""
    if isinstance(timestamps, int):
        return bytes(8 * record_count), timestamps, timestamps
    _check_column_length("timestamps", timestamps, record_count)
    base_timestamp = timestamps[0]
    try:
        max_timestamp = max(timestamps)
        deltas = map(sub, timestamps, repeat(base_timestamp))
    except TypeError as error:
        raise InvalidRecordError(f"timestamps must be integers (ms): {error}") from None
    return _dump(_INT64, deltas), base_timestamp, max_timestamp


class _Column(NamedTuple):
    """A bytes column ready to join: its lengths array, its non-null items, their total size."""

    length_bytes: bytes
    items: Sequence[bytes]
    payload_bytes: int


_EMPTY_COLUMN = _Column(b"", (), 0)


def _encode_keys(keys: Sequence[bytes | None] | None, record_count: int) -> _Column:
    if keys is None:
        return _Column(_dump(_INT32, repeat(NULL_LENGTH, record_count)), (), 0)
    _check_column_length("keys", keys, record_count)
    return _encode_column("keys", keys)


def _encode_column(name: str, column: Sequence[bytes | None]) -> _Column:
    """The lengths array of a bytes column (-1 for None) and the items to join.

    The common case (no None) is one C-level pass; a column holding a null pays a Python-level
    one. A non-bytes item that has a len() (a str) is caught by the join that follows.
    """
    try:
        lengths = _to_array(_INT32, map(len, column))  # type: ignore[arg-type]
        return _Column(_array_bytes(lengths), column, sum(lengths))  # type: ignore[arg-type]
    except InvalidRecordError:
        pass  # a None, or an item without a length: find out below
    try:
        lengths = _to_array(_INT32, [NULL_LENGTH if item is None else len(item) for item in column])
    except TypeError:
        index, item = next(
            (i, x) for i, x in enumerate(column) if x is not None and not hasattr(x, "__len__")
        )
        raise InvalidRecordError(
            f"{name}[{index}] must be bytes or None, got {type(item).__name__}"
        ) from None
    payload_bytes = sum(lengths) + lengths.count(NULL_LENGTH)
    # filter(None, ...) drops the nulls (and empty values, which add nothing to the join).
    return _Column(_array_bytes(lengths), list(filter(None, column)), payload_bytes)  # type: ignore[arg-type]


def _encode_headers(
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None, record_count: int
) -> tuple[bytes, _Column, _Column]:
    """The header_counts array, then the header key and header value columns."""
    if headers is None:
        return bytes(4 * record_count), _EMPTY_COLUMN, _EMPTY_COLUMN
    _check_column_length("headers", headers, record_count)
    try:
        counts = _dump(_INT32, map(len, headers))
        flat = list(chain.from_iterable(headers))
    except (TypeError, InvalidRecordError):
        raise InvalidRecordError(
            "headers must hold, per record, a sequence of (str key, bytes | None value) pairs"
        ) from None
    if not flat:
        return counts, _EMPTY_COLUMN, _EMPTY_COLUMN
    if set(map(len, flat)) != {2}:
        raise InvalidRecordError("every header must be a (str key, bytes | None value) pair")
    header_keys, header_values = zip(*flat, strict=True)
    try:
        key_items = list(map(str.encode, header_keys))
    except TypeError:
        raise InvalidRecordError("header keys must be str") from None
    except UnicodeEncodeError as error:
        raise InvalidRecordError(f"a header key is not encodable as UTF-8: {error}") from None
    key_lengths = _to_array(_INT32, map(len, key_items))
    key_column = _Column(_array_bytes(key_lengths), key_items, sum(key_lengths))
    return counts, key_column, _encode_column("header values", header_values)


def _check_column_length(name: str, column: Sequence[object], record_count: int) -> None:
    try:
        length = len(column)
    except TypeError:
        raise InvalidRecordError(
            f"{name} must be a sequence, got {type(column).__name__}"
        ) from None
    if length != record_count:
        raise InvalidRecordError(
            f"{name} has {length} items but values has {record_count}: columns must be parallel"
        )


# --- decoding ----------------------------------------------------------------------------------


def decode_batch(
    buffer: bytes | bytearray | memoryview, position: int = 0, *, verify_crc: bool = True
) -> RecordBatch:
    """Decode the batch at `position`. Checks framing, magic, CRC and attributes
    (header.check_batch), or framing, magic and attributes only when verify_crc=False.

    Raises CorruptRecordError (or another SamsaError subclass) for any bad input.
    """
    if verify_crc:
        batch_header = header.check_batch(buffer, position)
    else:
        batch_header = _check_framing(buffer, position)
    start = position + header.HEADER_BYTES
    end = position + batch_header.size_bytes
    if batch_header.compression == header.COMPRESSION_ZSTD:
        with memoryview(buffer) as view:
            data = _decompress_section(view[start:end])
        start, end = 0, len(data)
    elif type(buffer) is bytes:
        data = buffer  # slices are taken from the caller's bytes directly: no section copy
    else:
        with memoryview(buffer) as view:
            data = bytes(view[start:end])
        start, end = 0, len(data)
    return _decode_section(data, start, end, batch_header)


def decode_batches(buffer: bytes | bytearray | memoryview) -> list[RecordBatch]:
    """Every batch in `buffer`, which must hold whole batches back to back (none is fine)."""
    batches = []
    position = 0
    while position < len(buffer):
        batch = decode_batch(buffer, position)
        batches.append(batch)
        position += batch.header.size_bytes
    return batches


def _check_framing(buffer: bytes | bytearray | memoryview, position: int) -> header.BatchHeader:
    """header.check_batch without the CRC: enough to decode the section safely."""
    size = header.batch_size_at(buffer, position)
    if size == 0 or position + size > len(buffer):
        raise CorruptRecordError(
            f"batch at position {position} is truncated: {len(buffer) - position} bytes remain"
            + (f", the batch declares {size}" if size else "")
        )
    batch_header = header.read_header(buffer, position)
    if batch_header.magic != header.MAGIC:
        raise UnsupportedFormatError(
            f"batch magic {batch_header.magic} at position {position} is not supported "
            f"(expected {header.MAGIC})"
        )
    header.check_header_fields(batch_header)
    return batch_header


def _decompress_section(frame: memoryview) -> bytes:
    """Inflate one zstd frame, refusing to produce more than batch_uncompressed_bytes_max.

    A frame header that declares its content size (our encoder always writes it) is checked
    before anything is allocated; a frame without one is first inflated in bounded chunks that
    are counted and dropped, so a bomb costs at most the cap in CPU and one chunk in memory.
    """
    cap = limits.batch_uncompressed_bytes_max
    try:
        content_size = zstandard.frame_content_size(frame)
        if content_size < 0:  # frame_content_size() says -1 (not CONTENTSIZE_UNKNOWN)
            content_size = _measure_frame(frame, cap)
        if content_size > cap:
            raise CorruptRecordError(
                f"zstd frame declares {content_size} uncompressed bytes, over the limit of {cap} "
                f"(limits.batch_uncompressed_bytes_max)"
            )
        if content_size == 0:
            # No records section is empty (N >= 1). This is also what a skippable frame reports.
            raise CorruptRecordError("zstd frame declares 0 bytes (or is a skippable frame)")
        data = zstandard.ZstdDecompressor().decompress(
            frame, max_output_size=content_size, allow_extra_data=False
        )
    except zstandard.ZstdError as error:
        raise CorruptRecordError(f"records section is not one valid zstd frame: {error}") from None
    if len(data) != content_size:
        raise CorruptRecordError(
            f"zstd frame declares {content_size} bytes but inflates to {len(data)}"
        )
    return data


def _measure_frame(frame: memoryview, cap: int) -> int:
    """The inflated size of a frame that does not declare it, giving up past `cap`."""
    chunk_bytes = 1 << 20
    total = 0
    with zstandard.ZstdDecompressor().stream_reader(frame, read_across_frames=False) as reader:
        while chunk := reader.read(chunk_bytes):
            total += len(chunk)
            if total > cap:
                raise CorruptRecordError(
                    f"zstd frame inflates past {cap} bytes (limits.batch_uncompressed_bytes_max)"
                )
    return total


def _load(typecode: str, data: bytes, position: int, count: int) -> array[int]:
    """An int32/int64 array of `count` items at `position`; the caller bounds-checked it."""
    column = array(typecode)
    with memoryview(data) as view:
        column.frombytes(view[position : position + count * column.itemsize])
    if _BYTESWAP:
        column.byteswap()
    return column


def _decode_section(
    data: bytes, start: int, end: int, batch_header: header.BatchHeader
) -> RecordBatch:
    """The records section at data[start:end]: arrays first, then the bytes they describe."""
    record_count = batch_header.record_count
    if record_count * ARRAY_BYTES_PER_RECORD > end - start:
        raise CorruptRecordError(
            f"record_count {record_count} needs {record_count * ARRAY_BYTES_PER_RECORD} bytes of "
            f"per-record arrays but the records section has {end - start}"
        )
    offset_deltas = _decode_offset_deltas(data, start, batch_header)
    position = start + 4 * record_count
    timestamp_deltas = _load(_INT64, data, position, record_count)
    position += 8 * record_count
    key_lengths = _load(_INT32, data, position, record_count)
    value_lengths = _load(_INT32, data, position + 4 * record_count, record_count)
    header_counts = _load(_INT32, data, position + 8 * record_count, record_count)
    position += 12 * record_count
    header_count = _check_header_counts(header_counts, end - position)
    header_key_lengths = _load(_INT32, data, position, header_count)
    header_value_lengths = _load(_INT32, data, position + 4 * header_count, header_count)
    position += ARRAY_BYTES_PER_HEADER * header_count
    keys, position = _slice_column("key", data, key_lengths, position, end)
    values, position = _slice_column("value", data, value_lengths, position, end)
    if header_count == 0:
        headers: list[tuple[tuple[str, bytes | None], ...]] = [()] * record_count
    else:
        headers, position = _decode_headers(
            data, header_counts, header_key_lengths, header_value_lengths, position, end
        )
    if position != end:
        raise CorruptRecordError(
            f"records section has {end - position} trailing bytes after the last header value "
            f"({end - start} bytes in all, the arrays account for {position - start})"
        )
    return RecordBatch(batch_header, offset_deltas, timestamp_deltas, keys, values, headers)


def _decode_offset_deltas(data: bytes, start: int, batch_header: header.BatchHeader) -> array[int]:
    """The offset_deltas array, checked: >= 0, strictly increasing, last == last_offset_delta."""
    record_count = batch_header.record_count
    offset_deltas = _load(_INT32, data, start, record_count)
    if record_count <= _DENSE_CACHE_COUNT and data.startswith(
        _DENSE_OFFSET_DELTA_BYTES[: 4 * record_count], start
    ):
        dense = True  # one memcmp: the producer's 0..N-1
    else:
        dense = False
        if offset_deltas[0] < 0:
            raise CorruptRecordError(f"offset_deltas[0] = {offset_deltas[0]} is negative")
        if not all(map(lt, offset_deltas, islice(offset_deltas, 1, None))):
            index = next(
                i for i in range(1, record_count) if offset_deltas[i] <= offset_deltas[i - 1]
            )
            raise CorruptRecordError(
                f"offset_deltas must strictly increase: offset_deltas[{index}] = "
                f"{offset_deltas[index]} follows {offset_deltas[index - 1]}"
            )
    if offset_deltas[-1] != batch_header.last_offset_delta:
        raise CorruptRecordError(
            f"offset_deltas[{record_count - 1}] = {offset_deltas[-1]} but the header's "
            f"last_offset_delta is {batch_header.last_offset_delta}"
            + (" (dense deltas 0..N-1)" if dense else "")
        )
    return offset_deltas


def _check_header_counts(header_counts: array[int], remaining_bytes: int) -> int:
    """H, the total header count, once it is known to fit the bytes that remain."""
    smallest = min(header_counts)
    if smallest < 0:
        index = header_counts.index(smallest)
        raise CorruptRecordError(f"header_counts[{index}] = {smallest} is negative")
    header_count = sum(header_counts)
    if header_count * ARRAY_BYTES_PER_HEADER > remaining_bytes:
        raise CorruptRecordError(
            f"header_counts sum to {header_count} headers, which need "
            f"{header_count * ARRAY_BYTES_PER_HEADER} bytes of length arrays but only "
            f"{remaining_bytes} bytes remain"
        )
    return header_count


def _slice_column(
    name: str, data: bytes, lengths: array[int], position: int, end: int
) -> tuple[list[bytes | None], int]:
    """Cut len(lengths) items (-1 = None) from data[position:end]; return them and the end.

    `name` is the column's field name without "_lengths" ("key", "header_value"). One struct
    unpack cuts the whole column: its format is "{L}s" * N when every length is L (cached by the
    struct module when N is small), else the lengths joined with "s".
    """
    if not lengths:
        return [], position
    smallest = min(lengths)
    if smallest < NULL_LENGTH:
        index = lengths.index(smallest)
        raise CorruptRecordError(f"{name}_lengths[{index}] = {smallest} is negative (null is -1)")
    stored_lengths = lengths
    if smallest == NULL_LENGTH:
        if name == "header_key":
            index = lengths.index(NULL_LENGTH)
            raise CorruptRecordError(
                f"header_key_lengths[{index}] = -1: header keys are never null"
            )
        lengths = array(_INT32, map(max, lengths, repeat(0)))  # a null takes no bytes
        smallest = min(lengths)
    total = sum(lengths)
    if total > end - position:
        _raise_overrun(name, lengths, end - position)
    if smallest == max(lengths) and len(lengths) <= _STRUCT_CACHED_COUNT_MAX:
        items = list(struct.unpack_from(f"{smallest}s" * len(lengths), data, position))
    elif smallest == max(lengths):
        items = list(struct.Struct(f"{smallest}s" * len(lengths)).unpack_from(data, position))
    else:
        items = list(struct.Struct("s".join(map(str, lengths)) + "s").unpack_from(data, position))
    if stored_lengths is not lengths:
        # Put None back where the stored length was -1 (only batches holding a null pay this).
        items = [
            None if length < 0 else item for item, length in zip(items, stored_lengths, strict=True)
        ]
    return items, position + total


def _raise_overrun(name: str, lengths: array[int], remaining_bytes: int) -> None:
    """Name the first length that runs past the end (an error path: a Python loop is fine)."""
    for index, used in enumerate(accumulate(lengths)):
        if used > remaining_bytes:
            before = used - lengths[index]
            raise CorruptRecordError(
                f"{name}_lengths[{index}] = {lengths[index]} exceeds the "
                f"{remaining_bytes - before} {name.replace('_', ' ')} bytes remaining"
            )
    raise AssertionError("_raise_overrun called on lengths that fit")


def _decode_headers(
    data: bytes,
    header_counts: array[int],
    header_key_lengths: array[int],
    header_value_lengths: array[int],
    position: int,
    end: int,
) -> tuple[list[tuple[tuple[str, bytes | None], ...]], int]:
    """Per-record tuples of (key, value) headers, cut column-wise then grouped by count."""
    key_bytes, position = _slice_column("header_key", data, header_key_lengths, position, end)
    header_values, position = _slice_column(
        "header_value", data, header_value_lengths, position, end
    )
    try:
        header_keys = list(map(bytes.decode, key_bytes))  # type: ignore[arg-type]
    except UnicodeDecodeError:
        index = next(i for i, key in enumerate(key_bytes) if not _is_utf8(key))  # type: ignore[arg-type]
        raise CorruptRecordError(
            f"header key {index} is not valid UTF-8: {key_bytes[index]!r:.60}"
        ) from None
    pairs = tuple(zip(header_keys, header_values, strict=True))
    bounds = list(accumulate(header_counts, initial=0))
    return list(map(pairs.__getitem__, map(slice, bounds, islice(bounds, 1, None)))), position


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


# --- control batches ---------------------------------------------------------------------------


def build_control_batch(
    marker_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = header.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker: a transactional control batch of one record (see the doc)."""
    if marker_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(
            f"control marker type {marker_type} is unknown: use 0 (ABORT) or 1 (COMMIT)"
        )
    try:
        value = _CONTROL_VALUE.pack(CONTROL_VALUE_VERSION, coordinator_epoch)
    except struct.error:
        raise InvalidRecordError(f"coordinator_epoch {coordinator_epoch} is not an int32") from None
    return build_batch(
        [value],
        keys=[_CONTROL_KEY.pack(CONTROL_KEY_VERSION, marker_type)],
        timestamps=timestamp,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def read_control_marker(batch: RecordBatch) -> tuple[int, int]:
    """(marker_type, coordinator_epoch) of a control batch; InvalidRecordError otherwise."""
    if not batch.header.is_control:
        raise InvalidRecordError("not a control batch: attribute bit 0x20 is clear")
    if len(batch) != 1:
        raise InvalidRecordError(f"a control batch holds exactly one record, this one {len(batch)}")
    key, value = batch.keys[0], batch.values[0]
    if key is None or len(key) != _CONTROL_KEY.size:
        raise InvalidRecordError(f"control record key must be {_CONTROL_KEY.size} bytes: {key!r}")
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise InvalidRecordError(
            f"control record value must be at least {_CONTROL_VALUE.size} bytes: {value!r}"
        )
    key_version, marker_type = _CONTROL_KEY.unpack(key)
    value_version, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    if key_version != CONTROL_KEY_VERSION or value_version != CONTROL_VALUE_VERSION:
        raise InvalidRecordError(
            f"control record versions {key_version}/{value_version} are unknown (expected 0/0)"
        )
    if marker_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(f"control marker type {marker_type} is unknown (0 or 1)")
    return marker_type, coordinator_epoch
