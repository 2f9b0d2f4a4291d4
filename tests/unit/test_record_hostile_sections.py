"""Goal: the record-batch decoder answers hostile bytes with a typed error naming the field,
quickly and without large allocations: lengths and counts that overrun the section, negative or
unordered ones, unknown attributes and codecs, zstd bombs and broken zstd frames.

Method: hand-built hostile records sections wrapped in a correctly signed header
(record_reference.py's `sign`, so that the CRC passes and the section's own bounds checks are what
is tested); zstd bombs and a huge record count measured with tracemalloc.
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest
import zstandard

from samsa.common import limits
from samsa.common.errors import (
    CorruptRecordError,
    InvalidRecordError,
    SamsaError,
    UnsupportedCompressionError,
)
from samsa.common.record import header
from samsa.common.record.codec import decode_batch
from tests.unit.record_reference import reference_section, sign

MIB = 1 << 20


def arrays(*columns: tuple[str, list[int]]) -> bytes:
    return b"".join(struct.pack(f"<{len(items)}{code}", *items) for code, items in columns)


def hostile_section(
    *,
    key_lengths: list[int],
    value_lengths: list[int],
    payload: bytes,
    header_counts: list[int] | None = None,
    header_key_lengths: list[int] = (),  # type: ignore[assignment]
    header_value_lengths: list[int] = (),  # type: ignore[assignment]
    offset_deltas: list[int] | None = None,
) -> bytes:
    record_count = len(key_lengths)
    return (
        arrays(
            ("i", offset_deltas if offset_deltas is not None else list(range(record_count))),
            ("q", [0] * record_count),
            ("i", key_lengths),
            ("i", value_lengths),
            ("i", header_counts if header_counts is not None else [0] * record_count),
            ("i", list(header_key_lengths)),
            ("i", list(header_value_lengths)),
        )
        + payload
    )


def hostile(section: bytes, record_count: int, **kwargs: int) -> bytes:
    return sign(section, record_count=record_count, **kwargs)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (
            hostile(
                hostile_section(
                    key_lengths=[1, 1, 1, 9000], value_lengths=[0] * 4, payload=b"k" * 123
                ),
                4,
            ),
            r"key_lengths\[3\] = 9000 exceeds the 120 key bytes remaining",
        ),
        (
            hostile(hostile_section(key_lengths=[-1], value_lengths=[2**31 - 1], payload=b"v"), 1),
            r"value_lengths\[0\] = 2147483647 exceeds the 1 value bytes remaining",
        ),
        (
            hostile(hostile_section(key_lengths=[-2], value_lengths=[0], payload=b""), 1),
            r"key_lengths\[0\] = -2 is negative",
        ),
        (
            hostile(hostile_section(key_lengths=[0], value_lengths=[-7], payload=b""), 1),
            r"value_lengths\[0\] = -7 is negative",
        ),
        (
            hostile(hostile_section(key_lengths=[1], value_lengths=[1], payload=b"kvX"), 1),
            "1 trailing bytes",
        ),
        (
            hostile(
                hostile_section(
                    key_lengths=[0], value_lengths=[0], payload=b"", header_counts=[-1]
                ),
                1,
            ),
            r"header_counts\[0\] = -1 is negative",
        ),
        (
            hostile(
                hostile_section(
                    key_lengths=[0], value_lengths=[0], payload=b"", header_counts=[2**31 - 1]
                ),
                1,
            ),
            "header_counts sum to 2147483647 headers",
        ),
        (
            hostile(
                hostile_section(
                    key_lengths=[0],
                    value_lengths=[0],
                    payload=b"k",
                    header_counts=[1],
                    header_key_lengths=[-1],
                    header_value_lengths=[-1],
                ),
                1,
            ),
            "header keys are never null",
        ),
        (
            hostile(
                hostile_section(
                    key_lengths=[0],
                    value_lengths=[0],
                    payload=b"\xff",
                    header_counts=[1],
                    header_key_lengths=[1],
                    header_value_lengths=[-1],
                ),
                1,
            ),
            "not valid UTF-8",
        ),
        (
            hostile(
                hostile_section(
                    key_lengths=[0],
                    value_lengths=[0],
                    payload=b"k",
                    header_counts=[1],
                    header_key_lengths=[1],
                    header_value_lengths=[5],
                ),
                1,
            ),
            r"header_value_lengths\[0\] = 5 exceeds the 0 header value bytes remaining",
        ),
        (
            hostile(
                hostile_section(
                    key_lengths=[0, 0], value_lengths=[0, 0], payload=b"", offset_deltas=[1, 1]
                ),
                2,
                last_offset_delta=1,
            ),
            r"offset_deltas\[1\] = 1 follows 1",
        ),
        (
            hostile(
                hostile_section(
                    key_lengths=[0, 0], value_lengths=[0, 0], payload=b"", offset_deltas=[-5, 1]
                ),
                2,
                last_offset_delta=1,
            ),
            r"offset_deltas\[0\] = -5 is negative",
        ),
        (
            hostile(
                hostile_section(key_lengths=[0, 0], value_lengths=[0, 0], payload=b""),
                2,
                last_offset_delta=4,
            ),
            r"offset_deltas\[1\] = 1 but the header's last_offset_delta is 4",
        ),
    ],
)
def test_hostile_sections_raise_corrupt_record_naming_the_field(raw: bytes, match: str) -> None:
    with pytest.raises(CorruptRecordError, match=match):
        decode_batch(raw)


def test_huge_record_count_fails_before_allocating() -> None:
    raw = hostile(b"\x00" * 48, 2**31 - 1, last_offset_delta=2**31 - 1)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="record_count 2147483647 needs"):
            decode_batch(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MIB


def test_unknown_attributes_and_codecs_are_typed_errors() -> None:
    section = reference_section([b"a"], [None], [0], [0], [[]])
    with pytest.raises(UnsupportedCompressionError):
        decode_batch(hostile(section, 1, attributes=2))
    with pytest.raises(InvalidRecordError, match="unknown bits"):
        decode_batch(hostile(section, 1, attributes=0x40))


@pytest.fixture(scope="module")
def zero_bomb_frames() -> dict[str, bytes]:
    """200 MiB of zeros as one zstd frame (~6 KiB), with and without a declared content size,
    compressed in 1 MiB pieces so that the test itself never holds 200 MiB."""
    zero = bytes(MIB)
    frames = {}
    for name, write_content_size in (("declared", True), ("undeclared", False)):
        compressor = zstandard.ZstdCompressor(write_content_size=write_content_size)
        stream = compressor.compressobj(size=200 * MIB if write_content_size else -1)
        frames[name] = b"".join([stream.compress(zero) for _ in range(200)] + [stream.flush()])
    return frames


@pytest.mark.parametrize("kind", ["declared", "undeclared"])
def test_zstd_bomb_is_refused_without_allocating_it(
    zero_bomb_frames: dict[str, bytes], kind: str
) -> None:
    frame = zero_bomb_frames[kind]
    assert len(frame) < 64 * 1024
    raw = hostile(frame, 1, attributes=header.COMPRESSION_ZSTD)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match=str(limits.batch_uncompressed_bytes_max)):
            decode_batch(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # An undeclared frame is measured in 1 MiB chunks that are counted and dropped.
    assert peak < 4 * MIB


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x28\xb5\x2f\xfd",  # the magic number alone
        b"not zstd at all",
        zstandard.ZstdCompressor().compress(b"abc" * 100)[:-3],  # truncated frame
        zstandard.ZstdCompressor().compress(b"abc" * 100) + b"\x00",  # a byte after the frame
        zstandard.ZstdCompressor().compress(b"a") + zstandard.ZstdCompressor().compress(b"b"),
        b"\x50\x2a\x4d\x18\x04\x00\x00\x00abcd" + zstandard.ZstdCompressor().compress(b"a"),
    ],
)
def test_bad_zstd_frames_raise_corrupt_record(frame: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_batch(hostile(frame, 1, attributes=header.COMPRESSION_ZSTD))


def test_errors_are_samsa_errors_with_kafka_codes() -> None:
    with pytest.raises(SamsaError) as caught:
        decode_batch(b"\x00" * 100)
    assert caught.value.code == CorruptRecordError.code
