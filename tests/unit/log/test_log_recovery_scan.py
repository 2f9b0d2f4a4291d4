"""Goal: the pure recovery scan keeps exactly the valid prefix of a segment's bytes and stops at
the first bad byte for each kind of damage, whatever the read chunking.

Method: segments assembled from codec batches in memory; each damage is made by hand and the scan's
valid length, next offset and error are compared with what the damage allows. Chunked feeding
(down to 1 byte per read) must give the same answer as one read.
"""

from __future__ import annotations

import pytest

from samsa.common.record.codec import build_batch
from samsa.services.broker.log.recovery import SegmentScan


def segment_bytes(count: int = 6, base_offset: int = 100) -> tuple[bytes, list[int]]:
    batches = [
        build_batch(
            [b"v%d" % i] * (1 + i % 2),
            timestamps=10 * i,
            base_offset=0,
            partition_leader_epoch=i // 2,
        )
        for i in range(count)
    ]
    stamped, ends, offset = [], [], base_offset
    for raw in batches:
        buffer = bytearray(raw)
        buffer[0:8] = offset.to_bytes(8, "little")
        offset += 1 + (len(stamped) % 2)
        stamped.append(bytes(buffer))
        ends.append(sum(map(len, stamped)))
    return b"".join(stamped), ends


def scan(data: bytes, chunk: int | None = None, **kwargs: int) -> SegmentScan:
    scanner = SegmentScan(100, 0, **kwargs)
    chunk = chunk or len(data) or 1
    want = chunk
    while want:
        start = scanner.valid_bytes
        piece = data[start : start + max(want, chunk)]
        want = scanner.feed(piece, end_of_file=start + len(piece) >= len(data))
    return scanner


def test_a_clean_segment_is_kept_whole() -> None:
    data, _ = segment_bytes()
    result = scan(data)
    assert (result.valid_bytes, result.error) == (len(data), None)
    assert result.indexes.next_offset == 109
    assert result.epoch_starts == [(0, 100), (1, 103), (2, 106)]
    assert len(result.indexes.offset_index) == 6, "interval 0: every batch indexed"


@pytest.mark.parametrize("chunk", [1, 7, 61, 100, 1000])
def test_chunking_does_not_change_the_answer(chunk: int) -> None:
    data, _ = segment_bytes()
    whole, chunked = scan(data), scan(data, chunk)
    assert chunked.valid_bytes == whole.valid_bytes
    assert chunked.indexes.offset_index == whole.indexes.offset_index
    assert chunked.indexes.time_index == whole.indexes.time_index


def flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x01]) + data[position + 1 :]


def rebase(data: bytes, position: int, base_offset: int) -> bytes:
    return data[:position] + base_offset.to_bytes(8, "little") + data[position + 8 :]


@pytest.mark.parametrize(
    ("name", "damage", "kept_batches", "error"),
    [
        ("torn tail", lambda d, e: d[: e[-1] - 1], 5, "truncated"),
        ("torn header", lambda d, e: d[: e[3] + 30], 4, "truncated"),
        ("zeros appended", lambda d, e: d + bytes(200), 6, "smaller than a header"),
        ("payload flipped", lambda d, e: flip(d, e[2] - 1), 2, "CRC"),
        ("crc flipped", lambda d, e: flip(d, e[2] + 17), 3, "CRC"),
        ("magic flipped", lambda d, e: flip(d, e[1] + 16), 2, "magic"),
        ("length too large", lambda d, e: d[: e[0] + 11] + b"\x7f" + d[e[0] + 12 :], 1, "exceeds"),
        ("offset goes back", lambda d, e: rebase(d, e[3], 100), 4, "offsets must increase"),
        # base_offset sits outside the CRC (the broker stamps it without re-signing): a flip that
        # moves it forward is undetectable in that batch, and caught at the next one.
        ("offset jumps ahead", lambda d, e: flip(d, e[3] + 1), 5, "offsets must increase"),
    ],
)
def test_scan_stops_at_the_first_bad_byte(name: str, damage, kept_batches: int, error: str) -> None:
    data, ends = segment_bytes()
    result = scan(damage(data, ends))
    assert result.valid_bytes == (ends[kept_batches - 1] if kept_batches else 0), name
    assert result.error is not None and error in result.error, result.error


def test_offsets_must_stay_inside_the_segment() -> None:
    data, ends = segment_bytes()
    result = scan(data, next_offset_end=105)
    assert result.valid_bytes == ends[2]
    assert "outside the segment" in (result.error or "")
