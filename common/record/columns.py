"""A batch's records section as positions of its columns: for readers that take the arrays and
byte runs whole (Arrow, numpy) instead of one Python object per record.

Theory of operation (docs/record-batch.md §6). The records section is already column-wise:
fixed-width arrays (offset deltas, timestamp deltas, key and value lengths, header counts, then
the two header length arrays), then the bytes they describe, each kind concatenated in record
order. `batch_columns` checks the batch exactly as the decoder would (framing, CRC, and every
rule of `section_check`), inflates a compressed section once, and returns where each part lies
in the (inflated) section's buffer. Nothing is sliced per record: a consumer of these positions
builds, say, an Arrow binary column from the value lengths (offsets = their running sum, a null
where the length is -1) and the value bytes as one buffer.

Pure: no I/O, no clock, no dependency beyond the codec.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.common.record import header
from samsa.common.record.codec import ARRAY_BYTES_PER_HEADER, NULL_LENGTH
from samsa.common.record.section_check import _check_section, _column_bytes, section_of

ByteRange = tuple[int, int]  # [start, end) in BatchColumns.data


@dataclass(frozen=True)
class BatchColumns:
    """Where each part of one checked batch's records section lies in `data`. Arrays are
    little-endian: int32 at the `*_at` positions except `timestamp_deltas_at` (int64)."""

    header: header.BatchHeader
    data: bytes  # the buffer holding the section (the caller's, or the inflated section)
    record_count: int  # N
    header_count: int  # H: headers of all records together
    offset_deltas_at: int  # int32[N]
    timestamp_deltas_at: int  # int64[N]
    key_lengths_at: int  # int32[N], -1 = null
    value_lengths_at: int  # int32[N], -1 = null
    header_counts_at: int  # int32[N]
    header_key_lengths_at: int  # int32[H]
    header_value_lengths_at: int  # int32[H], -1 = null
    keys: ByteRange  # the non-null keys, concatenated
    values: ByteRange  # the non-null values, concatenated
    header_keys: ByteRange  # every header key (UTF-8), concatenated
    header_values: ByteRange  # every non-null header value, concatenated

    @property
    def dense_offsets(self) -> bool:
        """True when the offsets are base_offset .. base_offset + N - 1 (no compaction gap)."""
        return self.header.last_offset_delta == self.record_count - 1


def batch_columns(buffer: bytes, position: int = 0) -> BatchColumns:
    """The columns of the batch at `position` in `buffer`, once it is known to decode;
    CorruptRecordError (or another SamsaError) naming what is wrong otherwise."""
    batch_header = header.check_batch(buffer, position)
    data, start, end = section_of(buffer, position, batch_header)
    _check_section(data, start, end, batch_header)
    count = batch_header.record_count
    at = start
    offset_deltas_at = at
    at += 4 * count
    timestamp_deltas_at = at
    at += 8 * count
    key_lengths_at, value_lengths_at, header_counts_at = at, at + 4 * count, at + 8 * count
    at += 12 * count
    header_count = _column_bytes(
        "header_counts", data[header_counts_at : header_counts_at + 4 * count], count, floor=0
    )
    header_key_lengths_at = at
    header_value_lengths_at = at + 4 * header_count
    at += ARRAY_BYTES_PER_HEADER * header_count
    keys = _run(data, key_lengths_at, count, at)
    values = _run(data, value_lengths_at, count, keys[1])
    header_keys = _run(data, header_key_lengths_at, header_count, values[1])
    header_values = _run(data, header_value_lengths_at, header_count, header_keys[1])
    assert header_values[1] == end, "section_check proved the lengths add up to the section"
    return BatchColumns(
        header=batch_header,
        data=data,
        record_count=count,
        header_count=header_count,
        offset_deltas_at=offset_deltas_at,
        timestamp_deltas_at=timestamp_deltas_at,
        key_lengths_at=key_lengths_at,
        value_lengths_at=value_lengths_at,
        header_counts_at=header_counts_at,
        header_key_lengths_at=header_key_lengths_at,
        header_value_lengths_at=header_value_lengths_at,
        keys=keys,
        values=values,
        header_keys=header_keys,
        header_values=header_values,
    )


def _run(data: bytes, lengths_at: int, count: int, start: int) -> ByteRange:
    """The bytes a checked length column describes, starting at `start`."""
    raw = data[lengths_at : lengths_at + 4 * count]
    return start, start + _column_bytes("lengths", raw, count, floor=NULL_LENGTH)
