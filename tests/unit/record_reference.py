"""Record batches built from docs/record-batch.md, not from the codec, for the codec's tests
(test_record_codec.py, test_record_corruption.py, test_record_hostile_sections.py).

`reference_section` writes a records section one field at a time as the document describes it
(per-record struct.pack, no codec code), so a test can compare the codec's bytes with it; `sign`
wraps any section, hostile ones too, in a header with a correct length and CRC, so that a decoder
test reaches the section's own checks; `small_batch` is the small batch of three records (a null
value, an empty one, headers, a producer id and sequence) that round trips, bit flips and
truncations start from.
"""

from __future__ import annotations

import struct

import crc32c

from samsa.common.record import header
from samsa.common.record.codec import build_batch


def reference_section(
    values: list[bytes | None],
    keys: list[bytes | None],
    timestamp_deltas: list[int],
    offset_deltas: list[int],
    headers: list[list[tuple[str, bytes | None]]],
) -> bytes:
    """The records section exactly as docs/record-batch.md describes it, one field at a time."""
    flat = [pair for record_headers in headers for pair in record_headers]
    header_keys = [key.encode() for key, _ in flat]
    header_values = [value for _, value in flat]
    out = bytearray()
    for delta in offset_deltas:
        out += struct.pack("<i", delta)
    for delta in timestamp_deltas:
        out += struct.pack("<q", delta)
    for column in (keys, values):
        for item in column:
            out += struct.pack("<i", -1 if item is None else len(item))
    for record_headers in headers:
        out += struct.pack("<i", len(record_headers))
    for key in header_keys:
        out += struct.pack("<i", len(key))
    for value in header_values:
        out += struct.pack("<i", -1 if value is None else len(value))
    for column in (keys, values, header_keys, header_values):
        for item in column:
            out += item or b""
    return bytes(out)


def sign(
    section: bytes,
    *,
    record_count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_offset: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
) -> bytes:
    """A header with a correct length and CRC around an arbitrary (possibly hostile) section."""
    if last_offset_delta is None:
        last_offset_delta = record_count - 1
    fields = [
        base_offset,
        header.HEADER_BYTES - header.LOG_OVERHEAD + len(section),
        -1,
        header.MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        -1,
        -1,
        -1,
        record_count,
    ]
    unsigned = header.HEADER.pack(*fields)
    fields[4] = crc32c.crc32c(unsigned[header.CRC_COVERED_FROM :] + section)
    return header.HEADER.pack(*fields) + section


def small_batch(compression: int = header.COMPRESSION_NONE) -> bytes:
    return build_batch(
        [b"v0", None, b""],
        keys=[b"k0", b"k1", None],
        timestamps=[1_000, 999, 1_005],
        headers=[[("h", b"x")], [], [("é", None)]],
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        compression=compression,
    )
