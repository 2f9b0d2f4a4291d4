"""Goal: the batch header's per-batch operations do what the broker relies on.

Method: hand-built headers (no codec), so that the header module is tested on its own: framing and
field rules raise the typed error naming the field; stamping offsets leaves the CRC valid (the
broker-owned fields sit before it); stamping LogAppendTime re-signs the batch.
"""

from __future__ import annotations

import struct

import crc32c
import pytest

from samsa.common import limits
from samsa.common.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedFormatError,
)
from samsa.common.record import header as h


def make_raw_batch(
    *,
    section: bytes = b"\x00" * 24,
    record_count: int = 1,
    last_offset_delta: int = 0,
    attributes: int = 0,
    magic: int = h.MAGIC,
    base_offset: int = 0,
) -> bytearray:
    """A header plus an opaque records section, with a correct CRC."""
    length = h.HEADER_BYTES - h.LOG_OVERHEAD + len(section)
    fields = (
        base_offset,
        length,
        -1,
        magic,
        0,
        attributes,
        last_offset_delta,
        1000,
        1000,
        -1,
        -1,
        -1,
        record_count,
    )
    buffer = bytearray(h.HEADER.pack(*fields) + section)
    crc = crc32c.crc32c(bytes(buffer[h.CRC_COVERED_FROM :]))
    struct.pack_into("<I", buffer, h.CRC_POSITION, crc)
    return buffer


def test_header_is_61_bytes_and_crc_follows_broker_fields() -> None:
    assert h.HEADER_BYTES == 61
    assert h.CRC_POSITION > h.PARTITION_LEADER_EPOCH_POSITION > h.BASE_OFFSET_POSITION


def test_check_batch_accepts_a_valid_batch() -> None:
    batch = make_raw_batch(record_count=3, last_offset_delta=2)
    header = h.check_batch(batch)
    assert (header.record_count, header.last_offset, header.next_offset) == (3, 2, 3)
    assert header.size_bytes == len(batch)


def test_stamp_offsets_keeps_the_crc_valid() -> None:
    batch = make_raw_batch()
    h.stamp_offsets(batch, 0, base_offset=123_456_789_012, partition_leader_epoch=7)
    header = h.check_batch(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (123_456_789_012, 7)


def test_stamp_log_append_time_resigns_the_batch() -> None:
    batch = make_raw_batch()
    h.stamp_log_append_time(batch, 0, len(batch), 1_700_000_000_000)
    header = h.check_batch(batch)
    assert header.is_log_append_time
    assert header.max_timestamp == 1_700_000_000_000
    assert header.base_timestamp == 1000  # producer's timestamps are left as they were


def test_a_flipped_bit_after_the_crc_is_detected() -> None:
    batch = make_raw_batch()
    batch[h.ATTRIBUTES_POSITION + 10] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        h.check_batch(batch)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"magic": 2}, UnsupportedFormatError, "magic 2"),
        ({"attributes": 0x40}, InvalidRecordError, "unknown bits"),
        ({"attributes": 1}, UnsupportedCompressionError, "codec 1"),
        ({"record_count": 0}, InvalidRecordError, "record_count 0"),
        ({"record_count": 5, "last_offset_delta": 3}, InvalidRecordError, "last_offset_delta 3"),
        ({"base_offset": -5}, InvalidRecordError, "base_offset -5"),
    ],
)
def test_bad_fields_name_themselves(kwargs: dict, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        h.check_batch(make_raw_batch(**kwargs))


def test_truncation_and_bad_lengths_are_corruption() -> None:
    batch = make_raw_batch()
    for cut in (0, 5, h.LOG_OVERHEAD, h.HEADER_BYTES, len(batch) - 1):
        with pytest.raises(CorruptRecordError):
            h.check_batch(batch[:cut])
    too_short = bytearray(batch)
    struct.pack_into("<i", too_short, h.BATCH_LENGTH_POSITION, 10)
    with pytest.raises(CorruptRecordError, match="smaller than a header"):
        h.check_batch(too_short)
    absurd = bytearray(batch)
    struct.pack_into("<i", absurd, h.BATCH_LENGTH_POSITION, limits.batch_bytes_max + 1)
    with pytest.raises(CorruptRecordError, match="hard limit"):
        h.check_batch(absurd)


def test_max_message_bytes_is_enforced_as_message_too_large() -> None:
    batch = make_raw_batch(section=b"\x00" * 500)
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes=100"):
        h.check_batch(batch, max_batch_bytes=100)
    assert RecordTooLargeError("x").code.name == "MESSAGE_TOO_LARGE"


def test_batch_size_at_reports_clean_end() -> None:
    batch = make_raw_batch()
    assert h.batch_size_at(batch, 0) == len(batch)
    assert h.batch_size_at(batch, len(batch)) == 0
    assert h.batch_size_at(batch + b"\x00" * 5, len(batch)) == 0


def test_unreadable_batch_offsets_come_from_the_header_and_never_go_below_the_fetch() -> None:
    from samsa.common.record.codec import build_batch

    data = b"ok" + build_batch([b"a", b"b", b"c"], base_offset=100)
    assert h.unreadable_batch_offsets(data, 2, from_offset=90) == (100, 102)
    assert h.unreadable_batch_offsets(data, 2, from_offset=101) == (101, 102)
    assert h.unreadable_batch_offsets(data, 2, from_offset=200) == (200, 200)
    assert h.unreadable_batch_offsets(data[:20], 2, from_offset=90) == (90, 90)  # no header
