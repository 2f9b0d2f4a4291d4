"""Goal: the leader's append check (section_check.check_records) refuses every records section a
reader could not decode, with a message naming the field, and accepts every batch the SDK builds.

Method: build valid batches with the codec, break one field of the records section (or its
zstd frame), re-sign the CRC as a hostile producer would, and check the verdict and the message.
The property test in tests/property/test_record_codec_property.py then compares the check with
the decoder over random mutations.
"""

from __future__ import annotations

import struct

import pytest
import zstandard

from samsa.common.errors import CorruptRecordError, InvalidRecordError
from samsa.common.record import header
from samsa.common.record.codec import build_batch
from samsa.common.record.section_check import _bounded_sum, check_records

SECTION = header.HEADER_BYTES


def resign(raw: bytearray) -> bytes:
    struct.pack_into("<i", raw, header.BATCH_LENGTH_POSITION, len(raw) - header.LOG_OVERHEAD)
    struct.pack_into("<I", raw, header.CRC_POSITION, header.compute_crc(raw, 0, len(raw)))
    return bytes(raw)


def check(raw: bytes) -> None:
    check_records(raw, 0, header.check_batch(raw))


def three_records(**options: object) -> bytearray:
    return bytearray(
        build_batch(
            [b"a", None, b"ccc"],
            keys=[b"k", None, b""],
            timestamps=[10, 7, 12],
            headers=[[("h", b"v")], [], [("é", None)]],
            **options,  # type: ignore[arg-type]
        )
    )


@pytest.mark.parametrize("compression", [header.COMPRESSION_NONE, header.COMPRESSION_ZSTD])
def test_every_batch_the_codec_builds_passes(compression: int) -> None:
    check(bytes(three_records(compression=compression)))
    check(build_batch([b"x" * 100] * 600, timestamps=5))
    check(build_batch([b"v"], offset_deltas=[7]))  # sparse deltas, as after compaction


def test_the_issues_poisoned_batch_is_refused() -> None:
    """Issue 9, hole 1: the first offset delta set to 2^31-1 and the CRC re-signed."""
    raw = bytearray(build_batch([b"one", b"two", b"three"]))
    struct.pack_into("<i", raw, SECTION, 2**31 - 1)
    with pytest.raises(CorruptRecordError, match="offset_deltas must strictly increase"):
        check(resign(raw))


@pytest.mark.parametrize(
    ("array_index", "value", "message"),
    [
        (3 + 2 * 3 + 0, -2, "key_lengths\\[0\\] = -2 is negative"),  # int32 slots: deltas 3,
        (3 + 2 * 3 + 3, 1000, "value_lengths\\[0\\] = 1000 exceeds"),  # timestamps 2 x 3, keys 3
        (3 + 2 * 3 + 6, -1, "header_counts\\[0\\] = -1 is negative"),
        (3 + 2 * 3 + 8, 5, "header_counts sum|trailing|exceeds"),
        (3 + 2 * 3 + 9, -1, "header keys are never null"),
    ],
)
def test_a_bad_length_or_count_is_refused_naming_the_field(
    array_index: int, value: int, message: str
) -> None:
    raw = three_records()
    struct.pack_into("<i", raw, SECTION + 4 * array_index, value)
    with pytest.raises(CorruptRecordError, match=message):
        check(resign(raw))


def test_a_byte_missing_or_left_over_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="trailing bytes"):
        check(resign(three_records() + b"??"))
    with pytest.raises(CorruptRecordError, match="exceeds"):
        check(resign(three_records()[:-1]))


def test_a_header_key_that_is_not_utf8_is_refused() -> None:
    raw = bytearray(build_batch([b"v"], headers=[[("k", b"")]]))
    raw[-1] = 0xFF  # the one header key byte (its value is empty)
    with pytest.raises(CorruptRecordError, match="header key 0 is not valid UTF-8"):
        check(resign(raw))


def test_timestamps_are_not_the_checks_business() -> None:
    """Any int64 delta decodes (the decoder does not look either): not refused."""
    raw = three_records()
    struct.pack_into("<q", raw, SECTION + 12, -(2**63))
    check(resign(raw))


def test_a_compressed_section_is_checked_after_inflating_it() -> None:
    plain = build_batch([b"one", b"two"])
    section = bytearray(plain[SECTION:])
    struct.pack_into("<i", section, 0, 2**31 - 1)
    raw = bytearray(plain[:SECTION]) + zstandard.ZstdCompressor().compress(bytes(section))
    struct.pack_into("<h", raw, header.ATTRIBUTES_POSITION, header.COMPRESSION_ZSTD)
    with pytest.raises(CorruptRecordError, match="offset_deltas must strictly increase"):
        check(resign(raw))
    raw[SECTION + 6] ^= 0xFF  # inside the frame
    with pytest.raises(CorruptRecordError):
        check(resign(raw))


def test_ordinary_columns_take_the_fast_path() -> None:
    """The residue sum applies to the lengths a producer writes (so the bench measures it)."""
    assert _bounded_sum(struct.pack("<528i", *[100] * 528), 528) == 52_800
    assert _bounded_sum(struct.pack("<2i", 2**28 - 1, 2**28 - 1), 2) == 2**29 - 2
    assert _bounded_sum(struct.pack("<2i", 2**28, 2**28 + 1), 2) is None  # past the bound
    assert _bounded_sum(struct.pack("<3i", 5, -1, 5), 3) is None  # a null: the exact path


def check_keyed(raw: bytes) -> None:
    check_records(raw, 0, header.check_batch(raw), keys_required=True)


@pytest.mark.parametrize("compression", [header.COMPRESSION_NONE, header.COMPRESSION_ZSTD])
def test_keys_required_refuses_a_null_key_naming_the_record(compression: int) -> None:
    """A compacted topic's check (Kafka's INVALID_RECORD), compressed or not, wherever the
    null key is; an empty key is a key."""
    keys: list[bytes | None] = [b"k%d" % index for index in range(500)]
    check_keyed(build_batch([b"v"] * 500, keys=keys, compression=compression))
    check_keyed(build_batch([b"v"], keys=[b""], compression=compression))
    for index in (0, 257, 499):
        keys[index] = None
        raw = build_batch([b"v"] * 500, keys=keys, compression=compression)
        with pytest.raises(InvalidRecordError, match=f"record {index} has a null key"):
            check_keyed(raw)
        check(raw)  # without keys_required: accepted
        keys[index] = b"k"


def test_keys_required_never_misreads_long_keys_as_a_null() -> None:
    """Lengths whose low bytes are 0xff (255, 65,535) side by side never make four 0xff bytes
    in a row: once the section is checked, only a -1 has a 0xff high byte."""
    lengths = [255, 65_535, 255, 255, 65_535, 65_535]
    keys = [b"k" * length for length in lengths]
    check_keyed(build_batch([b"v"] * len(keys), keys=keys))  # type: ignore[arg-type]


def test_a_corrupt_key_length_is_corrupt_before_it_is_a_missing_key() -> None:
    raw = three_records()
    struct.pack_into("<i", raw, SECTION + 4 * (3 + 2 * 3 + 0), -2)
    with pytest.raises(CorruptRecordError, match="key_lengths\\[0\\] = -2 is negative"):
        check_keyed(resign(raw))
