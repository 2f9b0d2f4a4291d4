"""Decoding: batch bytes in, a column-wise `RecordBatch` out (`decode_batch`, `decode_batches`),
and the bounds-checked readers section_check.py reuses to check a section without decoding it.
codec.py's docstring describes the layout.

Decoding never trusts a length: every count and length is bounds-checked against the bytes that
remain before anything is sliced or allocated, and every bad input raises a SamsaError subclass
(CorruptRecordError mostly) whose message names the field and the numbers. A zstd section is
inflated within limits.batch_uncompressed_bytes_max whatever its frame header claims. Pure: no
I/O, no clock, no threads.
"""

from __future__ import annotations

import struct
from array import array
from itertools import accumulate, islice, repeat
from operator import lt

import zstandard

from samsa.common import limits
from samsa.common.errors import CorruptRecordError, UnsupportedFormatError
from samsa.common.record import header, zstd_contexts
from samsa.common.record.record_batch import (
    _BYTESWAP,
    _DENSE_CACHE_COUNT,
    _DENSE_OFFSET_DELTA_BYTES,
    _INT32,
    _INT64,
    ARRAY_BYTES_PER_HEADER,
    ARRAY_BYTES_PER_RECORD,
    NULL_LENGTH,
    RecordBatch,
)

__all__ = ["decode_batch", "decode_batches"]

# The struct module caches the last 100 formats it compiled. A uniform column's format
# ("100s" * N) repeats from batch to batch, so it goes through that cache, but only up to this
# many records: a hostile batch must not pin a multi-megabyte compiled format in the cache.
_STRUCT_CACHED_COUNT_MAX = 4096


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
        data = zstd_contexts.decompressor().decompress(
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
        if name != "header_key" and max(lengths) == NULL_LENGTH:
            # Every item null, as the keys of most batches are: no bytes to cut.
            return [None] * len(lengths), position
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
