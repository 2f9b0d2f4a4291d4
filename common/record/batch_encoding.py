"""Encoding: records in, batch bytes out (`build_batch`), and a checked batch's records section
re-encoded in another compression (`recompress_batch`). codec.py's docstring describes the layout.

Every column becomes one fixed-width array in C (`array(...)` over `map(len, ...)` and the like)
and the whole section is one `b"".join`; a null or a header costs a slower but still column-wise
path. Bad input raises InvalidRecordError (empty batch, columns that are not parallel, offset
deltas not strictly increasing, non-bytes items, an out-of-range header field, an unknown
compression) and an oversized batch RecordTooLargeError, each naming the field. Pure: no I/O, no
clock, no threads.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from itertools import chain, islice, repeat
from operator import lt, sub
from typing import NamedTuple

from samsa.common import limits
from samsa.common.errors import InvalidRecordError, RecordTooLargeError
from samsa.common.record import header, zstd_contexts
from samsa.common.record.batch_decoding import _decompress_section
from samsa.common.record.record_batch import (
    _BYTESWAP,
    _DENSE_CACHE_COUNT,
    _DENSE_OFFSET_DELTA_BYTES,
    _INT32,
    _INT64,
    NULL_LENGTH,
)

__all__ = ["build_batch", "recompress_batch"]


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
        section = zstd_contexts.compressor(compression_level).compress(section)
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
        section = zstd_contexts.compressor(compression_level).compress(section)
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
# One null length, little-endian: a column of N nulls (keyless records) is this repeated, a
# single C-level repeat where an array built item by item cost ~0.1 us per record.
_NULL_LENGTH_BYTES = struct.pack("<i", NULL_LENGTH)


def _encode_keys(keys: Sequence[bytes | None] | None, record_count: int) -> _Column:
    if keys is None:
        return _Column(_NULL_LENGTH_BYTES * record_count, (), 0)
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
