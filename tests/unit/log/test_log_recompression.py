"""Goal: a topic's compression.type is honoured, not just accepted. With `zstd` or `uncompressed`,
the leader stores every data batch in that codec whatever the producer sent, with the same
records, timestamps, producer fields and transactional bits, a valid CRC, and the size checked
against max.message.bytes after recompression (too large: nothing stored); with `producer` (the
default) the bytes are stored as sent; markers are never rewritten; followers store the
leader's bytes as they come.

Method: `codec.recompress_batch` on batches built by the codec, then a real Log in tmp_path with
small segments, read back and decoded; `LogConfig.from_properties` for the setting's parsing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, read_batches, small_config

from samsa.common.errors import InvalidConfigError, RecordTooLargeError
from samsa.common.record.codec import (
    CONTROL_TYPE_COMMIT,
    build_control_batch,
    decode_batch,
    recompress_batch,
)
from samsa.common.record.header import (
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    check_batch,
    read_header,
)
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log


def records_of(raw: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_batch(raw)]


@pytest.mark.parametrize(
    ("sent", "target"), [(COMPRESSION_NONE, COMPRESSION_ZSTD), (COMPRESSION_ZSTD, COMPRESSION_NONE)]
)
def test_recompress_batch_keeps_every_record_and_field(sent: int, target: int) -> None:
    raw = batch(
        b"a" * 50,
        None,
        keys=[b"k", None],
        timestamp=[5, 9],
        headers=[[("h", b"1")], []],
        compression=sent,
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
        transactional=True,
    )
    before = read_header(raw)
    again = recompress_batch(raw, 0, before, target)
    after = check_batch(again, 0, max_batch_bytes=1 << 20)  # framing and CRC hold
    assert after.compression == target
    assert records_of(again) == records_of(raw)
    kept = ("last_offset_delta", "base_timestamp", "max_timestamp", "producer_id")
    kept += ("producer_epoch", "base_sequence", "record_count")
    assert [getattr(after, name) for name in kept] == [getattr(before, name) for name in kept]
    assert after.is_transactional and not after.is_control


def test_compression_type_is_parsed_and_checked() -> None:
    assert LogConfig.from_properties({}).record_compression is None
    assert LogConfig.from_properties({"compression.type": "zstd"}).record_compression == (
        COMPRESSION_ZSTD
    )
    uncompressed = LogConfig.from_properties({"compression.type": "uncompressed"})
    assert uncompressed.record_compression == COMPRESSION_NONE
    with pytest.raises(InvalidConfigError, match=r"compression\.type=.gzip. must be one of"):
        LogConfig.from_properties({"compression.type": "gzip"})


@pytest.mark.parametrize(
    ("topic_codec", "stored"), [("zstd", COMPRESSION_ZSTD), ("uncompressed", COMPRESSION_NONE)]
)
def test_the_leader_stores_the_topics_codec_whatever_the_producer_sent(
    tmp_path: Path, topic_codec: str, stored: int
) -> None:
    log = Log.open(tmp_path, small_config(compression_type=topic_codec), now_ms=0)
    sent = [
        batch(b"x" * 100, b"y", compression=COMPRESSION_NONE),
        batch(b"z" * 100, compression=COMPRESSION_ZSTD, producer_id=3, producer_epoch=0,
              base_sequence=0),
    ]  # fmt: skip
    for raw in sent:
        log.append_as_leader(raw, leader_epoch=1, now_ms=10)
    several = sent[0] + batch(b"w" * 100, compression=COMPRESSION_ZSTD)
    log.append_as_leader(several, leader_epoch=1, now_ms=11)  # several batches in one append
    read = read_batches(log)
    assert [read_header(raw).compression for raw in read] == [stored] * 4
    assert [[r.value for r in decode_batch(raw)] for raw in read] == [
        [b"x" * 100, b"y"],
        [b"z" * 100],
        [b"x" * 100, b"y"],
        [b"w" * 100],
    ]
    assert [read_header(raw).base_offset for raw in read] == [0, 2, 3, 5]
    assert read_header(read[1]).producer_id == 3
    retry = log.append_as_leader(sent[1], leader_epoch=1, now_ms=12)  # same sequence again
    assert retry.record_count == 0, "the producer state saw the recompressed batch's fields"


def test_with_producer_the_bytes_are_stored_as_sent(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    raw = batch(b"x" * 100, compression=COMPRESSION_NONE)
    log.append_as_leader(raw, leader_epoch=0, now_ms=1)
    (stored,) = read_batches(log)
    assert stored[21:] == raw[21:], "nothing the producer signed was rewritten"


def test_a_batch_too_large_once_inflated_is_refused_and_nothing_stored(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(compression_type="uncompressed"), now_ms=0)
    compact = batch(b"a" * 2_000, compression=COMPRESSION_ZSTD)  # ~80 bytes as zstd
    assert len(compact) < 1024, "fits max.message.bytes as sent"
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(compact, leader_epoch=0, now_ms=1)
    assert log.log_end_offset == 0 and read_batches(log) == []


def test_markers_are_never_rewritten_and_followers_store_the_leaders_bytes(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path / "leader", small_config(compression_type="zstd"), now_ms=0)
    data = batch(b"t" * 50, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    log.append_as_leader(data, leader_epoch=0, now_ms=1, allow_transactional=True)
    marker = build_control_batch(
        CONTROL_TYPE_COMMIT, producer_id=9, producer_epoch=1, coordinator_epoch=0, timestamp=2
    )
    log.append_as_leader(marker, leader_epoch=0, now_ms=2, allow_control_batches=True)
    stored = read_batches(log)
    assert read_header(stored[0]).compression == COMPRESSION_ZSTD
    assert read_header(stored[1]).is_control
    assert stored[1][21:] == marker[21:], "the marker is stored as the broker wrote it"
    config = small_config(compression_type="uncompressed")
    follower = Log.open(tmp_path / "follower", config, now_ms=0)
    follower.append_as_follower(b"".join(stored), now_ms=3)
    assert read_batches(follower) == stored, "a follower never recompresses"
