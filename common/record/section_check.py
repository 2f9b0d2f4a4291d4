"""Check a batch's records section without decoding its records: what the leader runs on append.

Theory of operation. header.check_batch proves a batch is framed and signed, but the CRC only
says the bytes are the producer's, not that they make sense: a producer (buggy or hostile) can
sign a section whose arrays no reader can decode, and once stored, every consumer of the
partition fails on it. So before a leader stores a batch it checks every rule the decoder
(batch_decoding._decode_section) enforces, on the fixed-width arrays alone:

- the arrays fit: 24 bytes per record, 8 per header;
- offset deltas are >= 0, strictly increasing, and end at the header's last_offset_delta;
- lengths are >= 0, or -1 (null) where null is allowed (never for header keys);
- header counts are >= 0, and everything the lengths claim adds up to exactly the section's
  length: no byte missing, no byte left over;
- header keys are UTF-8;
- a zstd section is one frame, inflated within limits.batch_uncompressed_bytes_max.

Timestamp deltas are not checked (any int64 delta decodes, as in the decoder), but a CreateTime
batch's header max_timestamp must be its records' largest timestamp (`check_records`, which
returns the largest, and the smallest when asked, for the topic's bounds: append_info.py).
A compacted topic's data batches must key every record (`keys_required`: Kafka refuses a null
key there with INVALID_RECORD, since compaction keeps the newest record of each key): one
search of the key-length column for a -1, made only when the caller asks.

Cost: a constant number of C-level calls per batch, and no Python object per record on the
common path. The producer's dense offset deltas are one memcmp. A length column is summed
without iterating it (`_column_bytes`): an all-null or a uniform column is one memcmp;
otherwise the column is read as one little-endian integer X = sum(a_i * 2^(32 i)). For a
divisor m of 2^32 - 1, 2^32 = 1 (mod m), so X mod m = sum(a_i) mod m, which *is* the sum once
every a_i is known to lie in [0, 2^b) with count * 2^b <= 2^29 < m. That bound is checked on
the columns of high bytes (`raw[3::4]` and so on) with `strip` and `translate`, which run in C.
A column that fails the bound (nulls mixed with lengths, or lengths too large for the fast
bound) takes the exact path: array min / sum / count, still C-level but one int object per
item. Keys and values are never sliced; header keys are checked for UTF-8 in one call when all
their bytes are ASCII, else cut and decoded one by one. A compressed batch is inflated once.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from array import array
from itertools import repeat

from samsa.common.errors import CorruptRecordError, InvalidRecordError
from samsa.common.record import header
from samsa.common.record.batch_decoding import (
    _check_header_counts,
    _decode_offset_deltas,
    _decompress_section,
    _is_utf8,
    _load,
    _raise_overrun,
    _slice_column,
)
from samsa.common.record.record_batch import (
    _DENSE_CACHE_COUNT,
    _DENSE_OFFSET_DELTA_BYTES,
    _INT32,
    _INT64,
    ARRAY_BYTES_PER_HEADER,
    ARRAY_BYTES_PER_RECORD,
    NULL_LENGTH,
)

__all__ = ["check_records", "section_of"]


def check_records(
    buffer: bytes | bytearray | memoryview,
    position: int,
    batch_header: header.BatchHeader,
    *,
    with_smallest: bool = False,
    keys_required: bool = False,
) -> tuple[int | None, int] | None:
    """Raise CorruptRecordError unless the records section of the batch at `position` (whose
    framing and CRC the caller checked) decodes: see the module docstring for every rule; and
    InvalidRecordError unless a CreateTime batch's max_timestamp is its records' largest, or
    when `keys_required` (a compacted topic's data batch) and a record's key is null.
    Returns a CreateTime batch's (smallest, largest) record timestamps, smallest None unless
    `with_smallest` (one more pass over the deltas: ~22 µs for 1,000 records); None under
    LogAppendTime."""
    data, start, end = section_of(buffer, position, batch_header)
    _check_section(data, start, end, batch_header)
    if keys_required:
        _check_keys_present(data, start, batch_header.record_count, position)
    if batch_header.is_log_append_time:
        return None
    return _timestamp_range(data, start, batch_header, with_smallest)


def _timestamp_range(
    data: bytes, start: int, batch_header: header.BatchHeader, with_smallest: bool
) -> tuple[int | None, int]:
    """The header's max_timestamp is what the log indexes, looks up and expires segments by
    (Kafka's broker recomputes it from the records): one that understates the records would
    let retention delete them early and time lookups skip them. An array max (and min), in C."""
    deltas = _load(_INT64, data, start + 4 * batch_header.record_count, batch_header.record_count)
    largest = batch_header.base_timestamp + max(deltas)
    if largest != batch_header.max_timestamp:
        raise InvalidRecordError(
            f"batch max_timestamp {batch_header.max_timestamp} is not its records' largest "
            f"timestamp {largest} (base_timestamp + the largest timestamp delta)"
        )
    smallest = batch_header.base_timestamp + min(deltas) if with_smallest else None
    return smallest, largest


def _check_keys_present(data: bytes, start: int, record_count: int, position: int) -> None:
    """InvalidRecordError when a record's key is null (length -1: four 0xff bytes), as Kafka's
    LogValidator refuses one on a compacted topic. One substring search over the key-length
    column, in C, no copy: once `_check_section` has passed, no length is below -1, so four 0xff
    bytes anywhere in the column (their span holds some length's high byte, 0xff only in a
    negative length) mean a -1 is there."""
    column = start + 12 * record_count  # after the offset deltas (4N) and timestamp deltas (8N)
    if data.find(_NULL_LENGTH_BYTES, column, column + 4 * record_count) < 0:
        return
    index = _load(_INT32, data, column, record_count).index(NULL_LENGTH)
    raise InvalidRecordError(
        f"batch at position {position}: record {index} has a null key, and the topic's "
        'cleanup.policy is compact, which keeps the newest record of each key (Kafka: "Compacted '
        'topic cannot accept message without key"): give every record a key, or write keyless '
        "records to a topic whose cleanup.policy is delete"
    )


_NULL_LENGTH_BYTES = NULL_LENGTH.to_bytes(4, "little", signed=True)


def section_of(
    buffer: bytes | bytearray | memoryview, position: int, batch_header: header.BatchHeader
) -> tuple[bytes, int, int]:
    """(data, start, end): the batch's records section as bytes, inflated when compressed;
    the caller's own bytes, uncopied, when it is an uncompressed `bytes`."""
    start = position + header.HEADER_BYTES
    end = position + batch_header.batch_length + header.LOG_OVERHEAD
    if batch_header.attributes & header.COMPRESSION_MASK == header.COMPRESSION_ZSTD:
        with memoryview(buffer) as view:
            data: bytes = _decompress_section(view[start:end])
        return data, 0, len(data)
    if type(buffer) is bytes:
        return buffer, start, end
    with memoryview(buffer) as view:
        data = bytes(view[start:end])
    return data, 0, len(data)


def _check_section(data: bytes, start: int, end: int, batch_header: header.BatchHeader) -> None:
    record_count = batch_header.record_count
    if record_count * ARRAY_BYTES_PER_RECORD > end - start:
        raise CorruptRecordError(
            f"record_count {record_count} needs {record_count * ARRAY_BYTES_PER_RECORD} bytes of "
            f"per-record arrays but the records section has {end - start}"
        )
    _check_offset_deltas(data, start, batch_header)
    # The arrays after the timestamp deltas (int64[N] at start + 4N, which need no check): key
    # lengths, value lengths and header counts (int32[N] each), then two int32[H] columns.
    # Unrolled on purpose: this runs once per produced batch, and a loop over column
    # descriptions cost a third of the check.
    column_bytes = 4 * record_count
    position = start + 12 * record_count
    key_lengths = data[position : position + column_bytes]
    value_lengths = data[position + column_bytes : position + 2 * column_bytes]
    header_counts = data[position + 2 * column_bytes : position + 3 * column_bytes]
    if header_counts == bytes(column_bytes):
        header_count = 0  # no headers: one memcmp, no call
    else:
        header_count = _column_bytes("header_counts", header_counts, record_count, floor=0)
    position += 3 * column_bytes
    if header_count * ARRAY_BYTES_PER_HEADER > end - position:
        counts = _load(_INT32, header_counts, 0, record_count)
        _check_header_counts(counts, end - position)  # raises, naming the numbers
    columns_start = position = position + ARRAY_BYTES_PER_HEADER * header_count
    if key_lengths != b"\xff" * column_bytes:  # all null (keyless): no bytes, no call
        position = _add_column("key_lengths", key_lengths, record_count, NULL_LENGTH, position, end)
    position = _add_column("value_lengths", value_lengths, record_count, NULL_LENGTH, position, end)
    if header_count:
        arrays_at = columns_start - ARRAY_BYTES_PER_HEADER * header_count
        key_lengths = data[arrays_at : arrays_at + 4 * header_count]
        value_lengths = data[arrays_at + 4 * header_count : columns_start]
        keys_start = position
        position = _add_column("header_key_lengths", key_lengths, header_count, 0, position, end)
        if not data[keys_start:position].isascii():
            _check_header_keys(data, _load(_INT32, key_lengths, 0, header_count), keys_start, end)
        position = _add_column(
            "header_value_lengths", value_lengths, header_count, NULL_LENGTH, position, end
        )
    if position != end:
        raise CorruptRecordError(
            f"records section has {end - position} trailing bytes after the last "
            f"{'header value' if header_count else 'value'} ({end - start} bytes in all, the "
            f"arrays account for {columns_start - start} and the lengths for "
            f"{position - columns_start})"
        )


def _add_column(name: str, raw: bytes, count: int, floor: int, position: int, end: int) -> int:
    """Where the bytes a length column describes end, once they are known to fit before `end`."""
    total = _column_bytes(name, raw, count, floor=floor)
    if total > end - position:
        column = array(_INT32, map(max, _load(_INT32, raw, 0, count), repeat(0)))
        _raise_overrun(name.removesuffix("_lengths"), column, end - position)
    return position + total


def _check_offset_deltas(data: bytes, start: int, batch_header: header.BatchHeader) -> None:
    """A producer's dense deltas 0..N-1 in one memcmp; anything else the decoder's way."""
    record_count = batch_header.record_count
    if (
        record_count <= _DENSE_CACHE_COUNT
        and batch_header.last_offset_delta == record_count - 1
        and data.startswith(_DENSE_OFFSET_DELTA_BYTES[: 4 * record_count], start)
    ):
        return
    _decode_offset_deltas(data, start, batch_header)


def _column_bytes(name: str, raw: bytes, count: int, *, floor: int) -> int:
    """The bytes described by the column `name` of `count` int32 lengths (or header counts) in
    `raw`, a null (-1) counting 0; CorruptRecordError when an item is below `floor` (-1 where
    null is allowed, else 0). The caller has bounds-checked the column's own bytes."""
    if count == 0:
        return 0
    if floor == NULL_LENGTH and raw == b"\xff" * len(raw):
        return 0  # all null: the keys of a keyless batch
    total = _bounded_sum(raw, count)
    if total is not None:
        return total
    column = _load(_INT32, raw, 0, count)  # the exact path: one int object per item
    smallest = min(column)
    if smallest < floor:
        index = column.index(smallest)
        why = "null is -1" if floor else "it is a count"
        if name == "header_key_lengths":
            why = "header keys are never null"
        raise CorruptRecordError(f"{name}[{index}] = {smallest} is negative ({why})")
    return sum(column) + column.count(NULL_LENGTH)  # each -1 counted back to 0


def _bounded_sum(raw: bytes, count: int) -> int | None:
    """sum(lengths) without iterating them, when every length is in [0, 2^b) with
    count * 2^b <= 2^29; None when that bound does not hold (the caller then sums exactly)."""
    lane = raw[:4]
    if lane[3] < 0x80 and raw == lane * count:
        return int.from_bytes(lane, "little") * count  # one length throughout: one memcmp
    bits = (2**29 // count).bit_length() - 1
    if bits < 8:
        return None  # a bound this tight rejects ordinary lengths: not worth trying
    full_byte, partial_bits = divmod(bits, 8)
    for index in range(full_byte + 1, 4):  # the bytes above the bound must all be zero
        if raw[index::4].strip(b"\x00"):
            return None
    if full_byte < 4 and raw[full_byte::4].translate(_AT_LEAST[partial_bits]).strip(b"\x00"):
        return None
    # Every length is < 2^bits, so the sum is < 2^29 < _RESIDUE_MODULUS: the residue is the sum.
    return int.from_bytes(raw, "little") % _RESIDUE_MODULUS


# A divisor of 2^32 - 1 (so 2^32 = 1 modulo it: each 32-bit lane adds its own value) that fits
# one 30-bit CPython digit, which makes the big-integer remainder a fast single-digit division.
_RESIDUE_MODULUS = 3 * 17 * 257 * 65537
assert (2**32 - 1) % _RESIDUE_MODULUS == 0 and 2**29 < _RESIDUE_MODULUS < 2**30
# _AT_LEAST[r] maps a byte to 0 when it is below 2^r and to 1 otherwise (bytes.translate table).
_AT_LEAST = [bytes(int(value >= 1 << r) for value in range(256)) for r in range(8)]


def _check_header_keys(data: bytes, lengths: array[int], position: int, end: int) -> None:
    keys, _ = _slice_column("header_key", data, lengths, position, end)
    try:
        list(map(bytes.decode, keys))  # type: ignore[arg-type]
    except UnicodeDecodeError:
        index = next(i for i, key in enumerate(keys) if not _is_utf8(key))  # type: ignore[arg-type]
        raise CorruptRecordError(
            f"header key {index} is not valid UTF-8: {keys[index]!r:.60}"
        ) from None
