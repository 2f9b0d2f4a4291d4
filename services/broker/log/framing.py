"""Walking stored batches by their headers: framing checks and read extents, without CRCs.

Theory of operation. Stored batches were CRC-checked when they were appended or recovered, so the
read path only needs their framing: where each batch starts and ends and which offsets it holds.
`read_frame` decodes one header and refuses a frame that cannot be a batch (a length below a
header or above the hard limit, an unknown magic) — were an index or a position ever wrong, the
reader stops with CorruptRecordError instead of serving garbage. `fetch_extent` measures how many
whole batches at the start of a buffer a fetch may return.

Invariants: positions move forward by a batch's whole size; a frame is never read past the end of
the buffer it came from.
"""

from __future__ import annotations

import struct

from samsa.common.errors import CorruptRecordError
from samsa.common.record.header import (
    HEADER_BYTES,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    batch_size_at,
    read_header,
)

_BASE_OFFSET_AND_LENGTH = struct.Struct("<qi")
_LAST_OFFSET_DELTA = struct.Struct("<i")
_LAST_OFFSET_DELTA_POSITION = 23


def read_frame(buffer: bytes | memoryview, position: int) -> BatchHeader:
    """The header at `position`, after checking that it frames a plausible batch."""
    if len(buffer) - position < HEADER_BYTES:
        raise CorruptRecordError(
            f"batch header at position {position} is truncated: "
            f"{max(0, len(buffer) - position)} bytes of {HEADER_BYTES}"
        )
    batch_size_at(buffer, position)  # raises for a length no batch can have
    header = read_header(buffer, position)
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"batch at position {position} has magic {header.magic}, expected {MAGIC}: the "
            f"position does not start a batch"
        )
    return header


def fetch_extent(buffer: bytes, upper_offset: int) -> tuple[int, int]:
    """(end, next_offset) of the whole batches at the start of `buffer` whose last offset is
    below `upper_offset`; (0, -1) when the first batch is cut or not below it."""
    position = 0
    next_offset = -1
    size_max = len(buffer)
    while size_max - position >= HEADER_BYTES:
        base_offset, batch_length = _BASE_OFFSET_AND_LENGTH.unpack_from(buffer, position)
        size = batch_length + LOG_OVERHEAD
        if size < HEADER_BYTES:
            raise CorruptRecordError(f"batch at position {position} has length {batch_length}")
        if position + size > size_max:
            break
        (last_offset_delta,) = _LAST_OFFSET_DELTA.unpack_from(
            buffer, position + _LAST_OFFSET_DELTA_POSITION
        )
        if base_offset + last_offset_delta >= upper_offset:
            break
        position += size
        next_offset = base_offset + last_offset_delta + 1
    return position, next_offset
