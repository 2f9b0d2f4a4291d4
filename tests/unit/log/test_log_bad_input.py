"""Goal: a rejected append stores nothing and damages nothing, and says why with the right error.

Method: a log holding a few good batches; each bad append (flipped CRC byte, oversized batch, bad
magic, sparse producer offsets, a good batch followed by a bad one, a follower batch below the log
end) must raise its typed error, and afterwards every file in the directory must be byte-equal to
before and the log must still accept and serve appends. A failing disk write (injected) must cut
the file back to its old size.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from log_helpers import batch, file_bytes, read_all, small_config

from samsa.common.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    RecordTooLargeError,
    SamsaError,
    StorageError,
    UnsupportedFormatError,
)
from samsa.common.record.header import (
    CRC_POSITION,
    MAGIC_POSITION,
    MAX_TIMESTAMP_POSITION,
    compute_crc,
)
from samsa.services.broker.log import segment as segment_module
from samsa.services.broker.log.log import Log


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    for index in range(5):
        log.append_as_leader(batch(b"good %d" % index), leader_epoch=1, now_ms=1)
    log.flush()
    return log


def with_max_timestamp(raw: bytes, max_timestamp: int) -> bytes:
    """The batch with its header's max_timestamp rewritten, correctly re-signed: a writer whose
    header disagrees with its records (the time index, time lookups and retention trust it)."""
    signed = bytearray(raw)
    struct.pack_into("<q", signed, MAX_TIMESTAMP_POSITION, max_timestamp)
    struct.pack_into("<I", signed, CRC_POSITION, compute_crc(signed, 0, len(signed)))
    return bytes(signed)


def corrupt(raw: bytes, position: int) -> bytes:
    damaged = bytearray(raw)
    damaged[position] ^= 0xFF
    return bytes(damaged)


BAD_APPENDS = {
    "flipped payload byte": (lambda: corrupt(batch(b"payload"), -1), CorruptRecordError),
    "flipped crc byte": (lambda: corrupt(batch(b"payload"), 17), CorruptRecordError),
    "too large": (lambda: batch(b"x" * 2000), RecordTooLargeError),
    "bad magic": (lambda: corrupt(batch(b"payload"), MAGIC_POSITION), UnsupportedFormatError),
    "truncated": (lambda: batch(b"payload")[:-3], CorruptRecordError),
    "sparse offsets": (
        lambda: batch(b"a", b"b", offset_deltas=[0, 5]),
        InvalidRecordError,
    ),
    "second batch bad": (
        lambda: batch(b"fine") + corrupt(batch(b"broken"), -2),
        CorruptRecordError,
    ),
    "third batch truncated": (
        lambda: batch(b"fine") + batch(b"also fine") + batch(b"cut")[:40],
        CorruptRecordError,
    ),
    "empty": (lambda: b"", InvalidRecordError),
    "max_timestamp below a record's": (
        lambda: with_max_timestamp(batch(b"a", b"b", timestamp=[5_000, 9_000]), 5_000),
        InvalidRecordError,
    ),
    "max_timestamp above every record's": (
        lambda: with_max_timestamp(batch(b"a", timestamp=5_000), 9_000),
        InvalidRecordError,
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_APPENDS))
def test_a_bad_leader_append_stores_nothing(log: Log, name: str) -> None:
    make, error = BAD_APPENDS[name]
    before = file_bytes(log.directory)
    end_before = log.log_end_offset
    with pytest.raises(error):
        log.append_as_leader(make(), leader_epoch=1, now_ms=2)
    assert file_bytes(log.directory) == before
    assert log.log_end_offset == end_before
    info = log.append_as_leader(batch(b"after"), leader_epoch=1, now_ms=3)
    assert info.first_offset == end_before
    assert [r.value for r in read_all(log)][-2:] == [b"good 4", b"after"]


def test_errors_carry_kafka_codes(log: Log) -> None:
    with pytest.raises(SamsaError) as too_large:
        log.append_as_leader(batch(b"x" * 2000), leader_epoch=1, now_ms=2)
    assert too_large.value.code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(SamsaError) as corrupt_crc:
        log.append_as_leader(corrupt(batch(b"p"), -1), leader_epoch=1, now_ms=2)
    assert corrupt_crc.value.code == ErrorCode.CORRUPT_MESSAGE


def test_an_append_larger_than_a_segment_is_a_record_list_too_large(log: Log) -> None:
    many = b"".join(batch(b"y" * 500) for _ in range(5))  # each fits, all do not
    with pytest.raises(RecordTooLargeError) as raised:
        log.append_as_leader(many, leader_epoch=1, now_ms=2)
    assert raised.value.code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_a_follower_batch_below_the_log_end_is_refused(log: Log) -> None:
    before = file_bytes(log.directory)
    with pytest.raises(InvalidRecordError, match="below 5"):
        log.append_as_follower(batch(b"old", base_offset=4), now_ms=2)
    with pytest.raises(InvalidRecordError, match="below 7"):
        log.append_as_follower(
            batch(b"a", b"b", base_offset=5) + batch(b"overlap", base_offset=6), now_ms=2
        )
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(corrupt(batch(b"x", base_offset=5), -1), now_ms=2)
    assert file_bytes(log.directory) == before


def test_a_failed_disk_write_leaves_the_segment_as_it_was(
    log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = file_bytes(log.directory)

    def half_then_fail(fd: int, pieces: list[bytes], position: int) -> int:
        os.pwrite(fd, bytes(pieces[0])[:30], position)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_module.os, "pwritev", half_then_fail)
    with pytest.raises(StorageError, match="No space left"):
        log.append_as_leader(batch(b"lost"), leader_epoch=1, now_ms=2)
    monkeypatch.undo()
    assert file_bytes(log.directory) == before
    assert log.append_as_leader(batch(b"next"), leader_epoch=1, now_ms=3).first_offset == 5
