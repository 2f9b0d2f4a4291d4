"""The record-batch header: 61 bytes at fixed positions, little-endian. docs/record-batch.md is
the byte-by-byte specification; this module is its executable form.

    position  size  field                    owner
    0         8     base_offset              broker (assigned on append)
    8         4     batch_length             bytes after this field (whole batch = length + 12)
    12        4     partition_leader_epoch   broker (stamped on append)
    16        1     magic                    = MAGIC (1)
    17        4     crc                      CRC-32C (Castagnoli) of bytes [21, end)
    21        2     attributes               compression, timestamp type, transactional, control
    23        4     last_offset_delta        last record's offset - base_offset
    27        8     base_timestamp           first record's timestamp (ms)
    35        8     max_timestamp            largest record timestamp, or the LogAppendTime
    43        8     producer_id              -1 when not idempotent
    51        2     producer_epoch           -1 when not idempotent
    53        4     base_sequence            -1 when not idempotent
    57        4     record_count             number of records in the section that follows

Why this shape: the fields the broker owns (base offset, leader epoch) sit *before* the CRC, so
assigning offsets on append rewrites 12 bytes and never recomputes a checksum; the CRC covers
everything a producer wrote. That is Kafka's v2 header, field for field, in little-endian so that
the records section's fixed-width arrays load with `array.frombytes` on every common CPU without
a byte swap.

Functions here work per batch, never per record: the broker frames, checks and stamps batches as
bytes without decoding a single record.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from samsa.common import limits
from samsa.common.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedFormatError,
)

HEADER = struct.Struct("<qiibIhiqqqhii")
HEADER_BYTES = HEADER.size
# base_offset and batch_length: the bytes not counted by batch_length.
LOG_OVERHEAD = 12
MAGIC = 1

BASE_OFFSET_POSITION = 0
BATCH_LENGTH_POSITION = 8
PARTITION_LEADER_EPOCH_POSITION = 12
MAGIC_POSITION = 16
CRC_POSITION = 17
ATTRIBUTES_POSITION = 21
MAX_TIMESTAMP_POSITION = 35
CRC_COVERED_FROM = ATTRIBUTES_POSITION

# attributes
COMPRESSION_MASK = 0x07
COMPRESSION_NONE = 0
COMPRESSION_ZSTD = 4  # Kafka's id for zstd; 1-3 (gzip, snappy, lz4) are not implemented
TIMESTAMP_TYPE_LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
KNOWN_ATTRIBUTES = COMPRESSION_MASK | TIMESTAMP_TYPE_LOG_APPEND_TIME | TRANSACTIONAL | CONTROL
SUPPORTED_COMPRESSIONS = frozenset({COMPRESSION_NONE, COMPRESSION_ZSTD})

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

assert HEADER_BYTES == 61
assert CRC_POSITION + 4 == CRC_COVERED_FROM

_BASE_OFFSET_AND_LENGTH = struct.Struct("<qi")
_INT64 = struct.Struct("<q")
_INT32 = struct.Struct("<i")
_UINT32 = struct.Struct("<I")
_INT16 = struct.Struct("<h")


class BatchHeader(NamedTuple):
    """The 61-byte header, decoded. Offsets: `last_offset` inclusive, `next_offset` exclusive."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)


def read_header(buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Decode the header at `position` without validating anything but its presence."""
    if position < 0 or len(buffer) - position < HEADER_BYTES:
        raise CorruptRecordError(
            f"batch header truncated: need {HEADER_BYTES} bytes at position {position}, "
            f"have {max(0, len(buffer) - position)}"
        )
    return BatchHeader._make(HEADER.unpack_from(buffer, position))


def unreadable_batch_offsets(
    buffer: bytes | bytearray | memoryview, position: int, from_offset: int
) -> tuple[int, int]:
    """First and last offset of a batch at `position` that cannot be decoded, as far as its
    header tells, never below `from_offset` (only `from_offset` when even the header is
    unreadable): where a reader reports it and what it seeks past."""
    try:
        header = read_header(buffer, position)
    except CorruptRecordError:
        return from_offset, from_offset
    first = max(from_offset, header.base_offset)
    return first, max(first, header.last_offset)


def batch_size_at(buffer: bytes | bytearray | memoryview, position: int) -> int:
    """The whole size of the batch starting at `position`, read from its length field only.

    Returns 0 when fewer than LOG_OVERHEAD bytes remain (a clean end or a torn write: the caller
    decides which), and raises CorruptRecordError for a length no valid batch can have.
    """
    if len(buffer) - position < LOG_OVERHEAD:
        return 0
    _, batch_length = _BASE_OFFSET_AND_LENGTH.unpack_from(buffer, position)
    if batch_length < HEADER_BYTES - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch_length {batch_length} at position {position} is smaller than a header "
            f"({HEADER_BYTES - LOG_OVERHEAD} bytes after the length field)"
        )
    if batch_length > limits.batch_bytes_max:
        raise CorruptRecordError(
            f"batch_length {batch_length} at position {position} exceeds the hard limit of "
            f"{limits.batch_bytes_max} bytes"
        )
    return batch_length + LOG_OVERHEAD


def compute_crc(buffer: bytes | bytearray | memoryview, position: int, end: int) -> int:
    """CRC-32C of the batch at [position, end), over the bytes the CRC covers."""
    with memoryview(buffer) as view:
        return crc32c.crc32c(view[position + CRC_COVERED_FROM : end])


def check_batch(
    buffer: bytes | bytearray | memoryview,
    position: int = 0,
    *,
    max_batch_bytes: int = limits.batch_bytes_max,
) -> BatchHeader:
    """Validate one batch's framing, magic, attributes, counts and CRC; return its header.

    Raises (each message names the field and what was expected):
    - RecordTooLargeError when the batch is larger than `max_batch_bytes` (Kafka's
      `max.message.bytes`),
    - CorruptRecordError for truncation, a bad length or a CRC mismatch,
    - UnsupportedFormatError for an unknown magic, UnsupportedCompressionError for a codec we do not
      implement, InvalidRecordError for unknown attribute bits or incoherent counts.
    """
    size = batch_size_at(buffer, position)
    if size == 0:
        raise CorruptRecordError(
            f"batch truncated at position {position}: fewer than {LOG_OVERHEAD} bytes remain"
        )
    end = position + size
    if end > len(buffer):
        # Before the size limit: bytes that are not a batch at all (their "length" is whatever
        # they hold) are corrupt, not too large.
        raise CorruptRecordError(
            f"batch at position {position} declares {size} bytes but only "
            f"{len(buffer) - position} remain"
        )
    if size > max_batch_bytes:
        raise RecordTooLargeError(
            f"batch of {size} bytes exceeds max.message.bytes={max_batch_bytes}: send smaller "
            f"batches (batch.size) or raise the topic's max.message.bytes"
        )
    header = read_header(buffer, position)
    if header.magic != MAGIC:
        raise UnsupportedFormatError(
            f"batch magic {header.magic} at position {position} is not supported (expected {MAGIC})"
        )
    actual_crc = compute_crc(buffer, position, end)
    if actual_crc != header.crc:
        raise CorruptRecordError(
            f"batch at position {position} failed its CRC-32C check: stored {header.crc:#010x}, "
            f"computed {actual_crc:#010x}"
        )
    check_header_fields(header)
    return header


def check_header_fields(header: BatchHeader) -> None:
    """The per-field rules a header must satisfy, independent of where its bytes came from."""
    if header.attributes & ~KNOWN_ATTRIBUTES:
        raise InvalidRecordError(
            f"batch attributes {header.attributes:#06x} set unknown bits "
            f"(known: {KNOWN_ATTRIBUTES:#06x})"
        )
    if header.compression not in SUPPORTED_COMPRESSIONS:
        raise UnsupportedCompressionError(
            f"compression codec {header.compression} is not supported: use 0 (none) or 4 (zstd)"
        )
    if header.record_count < 1:
        raise InvalidRecordError(f"record_count {header.record_count} must be at least 1")
    if header.last_offset_delta < header.record_count - 1:
        raise InvalidRecordError(
            f"last_offset_delta {header.last_offset_delta} is smaller than record_count - 1 "
            f"({header.record_count - 1}): offsets in a batch are distinct and increasing"
        )
    if header.base_offset < 0:
        raise InvalidRecordError(f"base_offset {header.base_offset} is negative")


def stamp_offsets(
    buffer: bytearray, position: int, base_offset: int, partition_leader_epoch: int
) -> None:
    """Write the broker-owned fields that sit before the CRC: no checksum to recompute."""
    _INT64.pack_into(buffer, position + BASE_OFFSET_POSITION, base_offset)
    _INT32.pack_into(buffer, position + PARTITION_LEADER_EPOCH_POSITION, partition_leader_epoch)


def stamp_log_append_time(buffer: bytearray, position: int, end: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with `timestamp_ms` as its max timestamp, and re-sign it.

    As in Kafka, record timestamps inside the batch are left as the producer wrote them; readers
    of a LogAppendTime batch use its max_timestamp for every record.
    """
    attributes = _INT16.unpack_from(buffer, position + ATTRIBUTES_POSITION)[0]
    _INT16.pack_into(
        buffer, position + ATTRIBUTES_POSITION, attributes | TIMESTAMP_TYPE_LOG_APPEND_TIME
    )
    _INT64.pack_into(buffer, position + MAX_TIMESTAMP_POSITION, timestamp_ms)
    _UINT32.pack_into(buffer, position + CRC_POSITION, compute_crc(buffer, position, end))
