"""The record-batch codec: records in, batch bytes out, and back. docs/record-batch.md is the
byte-by-byte specification; `header.py` owns the 61-byte header, the modules below the records
section. This module is the codec's one import point: it re-exports their names, so importers
write `from samsa.common.record.codec import build_batch` (or `codec.decode_batch`) whichever
module the code lives in.

Where each part lives:
- `record_batch.py`: the layout constants both directions share (ARRAY_BYTES_PER_RECORD,
  ARRAY_BYTES_PER_HEADER, NULL_LENGTH, the dense offset deltas) and the decoded `RecordBatch`
  with its `Record`s;
- `batch_encoding.py`: `build_batch` and `recompress_batch`;
- `batch_decoding.py`: `decode_batch`, `decode_batches` and the bounds-checked column readers
  that `section_check.py` reuses;
- `control_batches.py`: transaction markers, `build_control_batch` and `read_control_marker`.

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

Every bad input raises a SamsaError subclass whose message names the field and the numbers
(batch_decoding.py says how decoding never trusts a length). The codec is pure: no I/O, no
clock, no threads.
"""

from __future__ import annotations

from samsa.common.record.batch_decoding import (
    decode_batch,
    decode_batches,
)
from samsa.common.record.batch_encoding import build_batch, recompress_batch
from samsa.common.record.control_batches import (
    CONTROL_KEY_VERSION,
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    CONTROL_VALUE_VERSION,
    build_control_batch,
    read_control_marker,
)
from samsa.common.record.record_batch import (
    ARRAY_BYTES_PER_HEADER,
    ARRAY_BYTES_PER_RECORD,
    NULL_LENGTH,
    Record,
    RecordBatch,
)

__all__ = [
    "ARRAY_BYTES_PER_HEADER",
    "ARRAY_BYTES_PER_RECORD",
    "CONTROL_KEY_VERSION",
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "CONTROL_VALUE_VERSION",
    "NULL_LENGTH",
    "Record",
    "RecordBatch",
    "build_batch",
    "build_control_batch",
    "decode_batch",
    "decode_batches",
    "read_control_marker",
    "recompress_batch",
]
