"""Goal: the record-batch decoder detects every corruption it can: every single-bit flip outside
the broker-owned fields and every truncation raises a typed error, plain or zstd; flips in the
broker-owned fields, which the CRC does not cover by design, change only offsets and epochs; and
verify_crc=False skips the CRC and nothing else.

Method: exhaustive single-bit flips and truncations of a small encoded batch (record_reference.py's
`small_batch`), and truncations of its records section wrapped in a correctly signed header
(`sign`), so that the section's own bounds checks are what catches them.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import CorruptRecordError, InvalidRecordError, UnsupportedFormatError
from samsa.common.record import header
from samsa.common.record.codec import decode_batch
from tests.unit.record_reference import sign, small_batch

# Bytes the CRC does not cover, by design: the broker owns them and rewrites them on append
# without re-signing the batch (header.stamp_offsets). A flip there changes which offsets the
# records get, not the records; replication's leader-epoch and offset checks own that risk.
BROKER_OWNED = set(range(0, 8)) | set(range(12, 16))


@pytest.mark.parametrize("compression", [header.COMPRESSION_NONE, header.COMPRESSION_ZSTD])
def test_every_single_bit_flip_outside_broker_fields_is_detected(compression: int) -> None:
    raw = small_batch(compression)
    original = decode_batch(raw)
    for position in range(len(raw)):
        for bit in range(8):
            flipped = bytearray(raw)
            flipped[position] ^= 1 << bit
            if position in BROKER_OWNED:
                continue  # the next test covers these
            with pytest.raises((CorruptRecordError, UnsupportedFormatError)):
                decode_batch(flipped)
    assert decode_batch(raw).values == original.values


def test_bit_flips_in_broker_owned_fields_are_not_covered_by_the_crc() -> None:
    """Documented, not hidden: base_offset and partition_leader_epoch sit before the CRC."""
    raw = small_batch()
    for position in sorted(BROKER_OWNED):
        for bit in range(8):
            flipped = bytearray(raw)
            flipped[position] ^= 1 << bit
            flipped_header = header.read_header(flipped)
            if flipped_header.base_offset < 0:
                # The sign bit of base_offset: the field rule catches it, the CRC does not.
                with pytest.raises(InvalidRecordError, match="base_offset"):
                    decode_batch(flipped)
                continue
            batch = decode_batch(flipped)  # the CRC still verifies
            assert batch.values == [b"v0", None, b""]
            changed = (
                batch.header.base_offset,
                batch.header.partition_leader_epoch,
            ) != (0, -1)
            assert changed


@pytest.mark.parametrize("compression", [header.COMPRESSION_NONE, header.COMPRESSION_ZSTD])
def test_every_truncation_raises_corrupt_record(compression: int) -> None:
    raw = small_batch(compression)
    for length in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:length])
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:length], verify_crc=False)


def test_every_truncation_of_a_correctly_signed_section_raises_corrupt_record() -> None:
    """Past the CRC: a producer that signed a short section must still be caught by bounds."""
    section = small_batch()[header.HEADER_BYTES :]
    for length in range(len(section)):
        with pytest.raises(CorruptRecordError):
            decode_batch(sign(section[:length], record_count=3))


def test_verify_crc_false_skips_only_the_crc() -> None:
    raw = bytearray(small_batch())
    raw[header.CRC_POSITION] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        decode_batch(raw)
    assert decode_batch(raw, verify_crc=False).values == [b"v0", None, b""]
    raw[header.MAGIC_POSITION] = 9
    with pytest.raises(UnsupportedFormatError):
        decode_batch(raw, verify_crc=False)
