"""Goal: the codec round-trips any records, agrees with a dumb reference encoder, and answers any
bytes with a RecordBatch or a SamsaError subclass — never IndexError, struct.error, a zstd error,
MemoryError or a hang.

Method: hypothesis generates record lists (null and empty keys/values, headers with null values
and non-ASCII keys, sparse offset deltas, int64 timestamps, both codecs). Fuzzing comes in three
strengths: raw bytes (stopped by framing or the CRC), raw bytes with the CRC skipped, and valid
batches whose records section is mutated and then re-signed, so that the section's own bounds
checks are what the fuzzer exercises. The profile (example count, derandomized under CI) comes
from tests/conftest.py.
"""

from __future__ import annotations

import struct

import crc32c
from hypothesis import given
from hypothesis import strategies as st

from samsa.common.errors import SamsaError
from samsa.common.record import header
from samsa.common.record.codec import RecordBatch, build_batch, decode_batch, decode_batches
from samsa.common.record.section_check import _column_bytes, check_records

NULLABLE_BYTES = st.none() | st.binary(max_size=40)
HEADER = st.tuples(st.text(max_size=8), NULLABLE_BYTES)
# Timestamps are ms since the epoch or -1 (none); this range keeps every delta inside an int64.
TIMESTAMPS = st.integers(-1, 2**62)


@st.composite
def record_lists(draw: st.DrawFn) -> dict:
    count = draw(st.integers(1, 30))
    values = draw(st.lists(NULLABLE_BYTES, min_size=count, max_size=count))
    keys = draw(st.none() | st.lists(NULLABLE_BYTES, min_size=count, max_size=count))
    timestamps = draw(TIMESTAMPS | st.lists(TIMESTAMPS, min_size=count, max_size=count))
    headers = draw(
        st.none() | st.lists(st.lists(HEADER, max_size=3), min_size=count, max_size=count)
    )
    offset_deltas = draw(
        st.none()
        | st.lists(st.integers(0, 2**31 - 1), min_size=count, max_size=count, unique=True).map(
            sorted
        )
    )
    compression = draw(st.sampled_from([header.COMPRESSION_NONE, header.COMPRESSION_ZSTD]))
    return {
        "values": values,
        "keys": keys,
        "timestamps": timestamps,
        "headers": headers,
        "offset_deltas": offset_deltas,
        "compression": compression,
        "base_offset": draw(st.integers(0, 2**62)),
        "log_append_time": draw(st.booleans()),
    }


def reference_section(records: dict) -> bytes:
    """The records section per docs/record-batch.md, field by field (no codec code)."""
    values = records["values"]
    count = len(values)
    keys = records["keys"] or [None] * count
    headers = records["headers"] or [[]] * count
    timestamps = records["timestamps"]
    if isinstance(timestamps, int):
        timestamps = [timestamps] * count
    offset_deltas = records["offset_deltas"] or list(range(count))
    flat = [pair for record_headers in headers for pair in record_headers]
    header_keys = [key.encode() for key, _ in flat]
    header_values = [value for _, value in flat]

    def lengths(column: list[bytes | None]) -> list[int]:
        return [-1 if item is None else len(item) for item in column]

    out = struct.pack(f"<{count}i", *offset_deltas)
    out += struct.pack(f"<{count}q", *[t - timestamps[0] for t in timestamps])
    out += struct.pack(f"<{count}i", *lengths(keys))
    out += struct.pack(f"<{count}i", *lengths(values))
    out += struct.pack(f"<{count}i", *map(len, headers))
    out += struct.pack(f"<{len(flat)}i", *lengths(header_keys))
    out += struct.pack(f"<{len(flat)}i", *lengths(header_values))
    for column in (keys, values, header_keys, header_values):
        out += b"".join(item or b"" for item in column)
    return out


@given(record_lists())
def test_any_records_round_trip(records: dict) -> None:
    raw = build_batch(**records)
    batch = decode_batch(raw)
    count = len(records["values"])
    assert len(batch) == count
    assert batch.values == records["values"]
    assert batch.keys == (records["keys"] or [None] * count)
    expected_headers = (
        [tuple(h) for h in records["headers"]] if records["headers"] else [()] * count
    )
    assert batch.headers == expected_headers
    deltas = records["offset_deltas"] or list(range(count))
    assert batch.offsets() == [records["base_offset"] + delta for delta in deltas]
    timestamps = records["timestamps"]
    if isinstance(timestamps, int):
        timestamps = [timestamps] * count
    assert batch.header.max_timestamp == max(timestamps)
    if records["log_append_time"]:
        assert batch.timestamps() == [max(timestamps)] * count
    else:
        assert batch.timestamps() == timestamps
    assert [record.value for record in batch] == records["values"]
    assert decode_batches(raw + raw)[1].values == records["values"]


@given(record_lists())
def test_the_codec_agrees_with_the_reference_encoder(records: dict) -> None:
    records["compression"] = header.COMPRESSION_NONE
    raw = build_batch(**records)
    assert raw[header.HEADER_BYTES :] == reference_section(records)


def decodes_or_raises_typed(buffer: bytes, *, verify_crc: bool = True) -> None:
    try:
        result = decode_batch(buffer, verify_crc=verify_crc)
    except SamsaError:
        return
    assert isinstance(result, RecordBatch)
    list(result)  # iterating a decoded batch never fails either


@given(st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise_typed(buffer: bytes) -> None:
    decodes_or_raises_typed(buffer)
    decodes_or_raises_typed(buffer, verify_crc=False)


def resign(raw: bytearray) -> bytes:
    """Fix batch_length and the CRC after a mutation, as a malicious producer would."""
    struct.pack_into("<i", raw, header.BATCH_LENGTH_POSITION, len(raw) - header.LOG_OVERHEAD)
    crc = crc32c.crc32c(bytes(raw[header.CRC_COVERED_FROM :]))
    struct.pack_into("<I", raw, header.CRC_POSITION, crc)
    return bytes(raw)


@given(record_lists(), st.data())
def test_mutated_and_resigned_batches_decode_or_raise_typed(
    records: dict, data: st.DataObject
) -> None:
    records["compression"] = data.draw(st.sampled_from([0, 0, 0, header.COMPRESSION_ZSTD]))
    raw = bytearray(build_batch(**records))
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["set", "insert", "delete", "int32"]))
        position = data.draw(st.integers(header.CRC_COVERED_FROM, max(len(raw) - 1, 21)))
        if action == "set" and position < len(raw):
            raw[position] = data.draw(st.integers(0, 255))
        elif action == "insert":
            raw[position:position] = data.draw(st.binary(min_size=1, max_size=8))
        elif action == "delete" and len(raw) > header.HEADER_BYTES:
            del raw[position : position + data.draw(st.integers(1, 8))]
        elif action == "int32" and position + 4 <= len(raw):
            value = data.draw(st.sampled_from([-(2**31), -2, -1, 0, 1, 2**31 - 1, 10**6]))
            struct.pack_into("<i", raw, position, value)
    decodes_or_raises_typed(resign(raw))


@given(record_lists(), st.data())
def test_the_append_check_accepts_exactly_the_batches_that_decode(
    records: dict, data: st.DataObject
) -> None:
    """section_check.check_records (arrays only, no record objects) against the decoder: the
    same verdict on every mutation of a valid batch, but for a CreateTime batch whose header
    max_timestamp is not its records' largest (a mutated timestamp delta), which decodes and
    which the append check refuses (the time index trusts max_timestamp)."""
    raw = bytearray(build_batch(**records))
    for _ in range(data.draw(st.integers(0, 3))):
        position = data.draw(st.integers(header.HEADER_BYTES, len(raw)))
        action = data.draw(st.sampled_from(["set", "int32", "delete", "insert"]))
        if action == "insert":
            raw[position:position] = data.draw(st.binary(min_size=1, max_size=8))
        elif action == "set" and position < len(raw):
            raw[position] = data.draw(st.integers(0, 255))
        elif action == "int32" and position + 4 <= len(raw):
            value = data.draw(st.sampled_from([-(2**31), -2, -1, 0, 1, 2**31 - 1, 10**6]))
            struct.pack_into("<i", raw, position, value)
        elif action == "delete" and header.HEADER_BYTES + 1 < len(raw) > position:
            del raw[position : position + data.draw(st.integers(1, 8))]
    signed = resign(raw)
    try:
        batch_header = header.check_batch(signed)
    except SamsaError:
        return  # framing: not the section's business
    try:
        decoded = decode_batch(signed)
    except SamsaError:
        decoded = None
    try:
        check_records(signed, 0, batch_header)
        accepted = True
    except SamsaError:
        accepted = False
    create_time = decoded is not None and not batch_header.is_log_append_time
    if create_time and max(decoded.timestamps()) != batch_header.max_timestamp:
        decoded = None  # refused by the max_timestamp rule, not by decoding
    assert accepted == (decoded is not None), (
        "the append check accepted a batch no reader can decode"
        if accepted
        else "the append check refused a batch that decodes"
    )


LENGTHS = st.one_of(
    st.integers(-1, 300),
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([-2, -1, 0, 2**15, 2**16 - 1, 2**21, 2**24 - 1, 2**24, 2**31 - 1]),
)


@given(
    st.lists(LENGTHS, min_size=1, max_size=3000)
    | st.lists(st.integers(0, 2**20), min_size=1, max_size=3000),  # the fast path's domain
    st.sampled_from([-1, 0]),
)
def test_a_length_column_is_summed_exactly_without_iterating_it(
    lengths: list[int], floor: int
) -> None:
    """_column_bytes' residue fast path against the obvious sum: the same total, or the same
    refusal, for any int32 column (nulls, negatives, lengths at and past the fast bound)."""
    raw = struct.pack(f"<{len(lengths)}i", *lengths)
    expected = None if min(lengths) < floor else sum(max(0, n) for n in lengths)
    try:
        total = _column_bytes("value_lengths", raw, len(lengths), floor=floor)
    except SamsaError:
        total = None
    assert total == expected
