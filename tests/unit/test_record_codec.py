"""Goal: the record-batch codec round-trips every kind of record, writes exactly what
docs/record-batch.md describes (its worked example included), refuses with a typed error what it
cannot encode, and does no I/O.

Method: round trips through build_batch/decode_batch (plain, zstd, log-append time, control
markers, consecutive batches); byte-for-byte comparison with a reference encoder written from
docs/record-batch.md alone (record_reference.py: per-record struct.pack, no codec code); bad
arguments and batches over the hard limits given to build_batch; the codec modules' imports
parsed with ast; the document's hex example compared with what the codec writes. Corrupted input
is test_record_corruption.py's, hostile input test_record_hostile_sections.py's.
"""

from __future__ import annotations

import ast
import re
import struct
from pathlib import Path

import pytest
import zstandard

from samsa.common import limits
from samsa.common.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from samsa.common.record import header
from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_batches,
    read_control_marker,
)
from tests.unit.record_reference import reference_section, sign, small_batch

REPO = Path(__file__).resolve().parents[2]


# --- round trips -------------------------------------------------------------------------------


def test_round_trip_nulls_empty_bytes_headers_and_unicode() -> None:
    values = [b"v0", None, b"", b"\x00" * 300]
    keys = [None, b"", b"key", b"\xff"]
    headers = [
        [("trace-id", b"abc"), ("nul", None)],
        [],
        [("ключ", b""), ("日本", b"\x01")],
        [("", b"empty key is a key")],
    ]
    batch = decode_batch(build_batch(values, keys=keys, timestamps=[5, 3, 9, 9], headers=headers))
    assert batch.values == values
    assert batch.keys == keys
    assert batch.headers == [tuple(h) for h in headers]
    assert batch.timestamps() == [5, 3, 9, 9]
    assert list(batch) == [
        Record(0, 5, None, b"v0", (("trace-id", b"abc"), ("nul", None))),
        Record(1, 3, b"", None, ()),
        Record(2, 9, b"key", b"", (("ключ", b""), ("日本", b"\x01"))),
        Record(3, 9, b"\xff", b"\x00" * 300, (("", b"empty key is a key"),)),
    ]
    # Null and empty are distinct on the wire: -1 vs 0.
    assert batch.values[1] is None and batch.values[2] == b""


def test_a_column_of_nulls_only_decodes_to_nulls_and_takes_no_bytes() -> None:
    """Keyless records (the common case) and null header values cut nothing from the section;
    the columns after them are read from the right place."""
    values = [b"first", b"", b"third"]
    headers = [[("h", None)], [("h", None), ("i", None)], [("h", None)]]
    batch = decode_batch(build_batch(values, keys=[None, None, None], headers=headers))
    assert batch.keys == [None, None, None]
    assert batch.values == values
    assert batch.headers == [(("h", None),), (("h", None), ("i", None)), (("h", None),)]
    all_null = decode_batch(build_batch([None, None]))
    assert all_null.keys == [None, None] and all_null.values == [None, None]


def test_header_fields_are_filled_from_the_records() -> None:
    raw = build_batch(
        [b"a", b"b", b"c"],
        timestamps=[100, 300, 200],
        base_offset=50,
        partition_leader_epoch=4,
        producer_id=9,
        producer_epoch=2,
        base_sequence=11,
        transactional=True,
    )
    batch_header = header.check_batch(raw)
    assert batch_header.size_bytes == len(raw)
    assert batch_header.base_timestamp == 100  # the first record's, not the smallest
    assert batch_header.max_timestamp == 300
    assert batch_header.last_offset_delta == 2 and batch_header.record_count == 3
    assert (batch_header.base_offset, batch_header.partition_leader_epoch) == (50, 4)
    assert (batch_header.producer_id, batch_header.producer_epoch) == (9, 2)
    assert batch_header.base_sequence == 11
    assert batch_header.is_transactional and not batch_header.is_control
    assert decode_batch(raw).offsets() == [50, 51, 52]


def test_one_timestamp_for_all_records_and_no_keys() -> None:
    batch = decode_batch(build_batch([b"a", b"b"], timestamps=1_700_000_000_000))
    assert batch.timestamps() == [1_700_000_000_000] * 2
    assert batch.keys == [None, None]
    assert list(batch.timestamp_deltas) == [0, 0]


def test_sparse_offset_deltas_after_compaction() -> None:
    raw = build_batch([b"x", b"y", b"z"], offset_deltas=[3, 7, 8], base_offset=100)
    batch = decode_batch(raw)
    assert batch.header.last_offset_delta == 8
    assert batch.header.last_offset == 108
    assert batch.offsets() == [103, 107, 108]
    assert [record.offset for record in batch] == [103, 107, 108]


def test_zstd_round_trip_compresses_the_whole_section() -> None:
    values = [b"the same text again " * 5] * 500
    plain = build_batch(values, keys=[b"k"] * 500)
    packed = build_batch(values, keys=[b"k"] * 500, compression=header.COMPRESSION_ZSTD)
    assert len(packed) < len(plain) // 10
    frame = packed[header.HEADER_BYTES :]
    assert zstandard.frame_content_size(frame) == len(plain) - header.HEADER_BYTES
    batch = decode_batch(packed)
    assert batch.header.compression == header.COMPRESSION_ZSTD
    assert batch.values == values
    assert decode_batch(small_batch(header.COMPRESSION_ZSTD)).values == [b"v0", None, b""]


def test_zstd_frame_without_content_size_is_accepted() -> None:
    """Another client's streaming zstd encoder may omit the content size; it is optional."""
    section = reference_section([b"abc"], [None], [0], [0], [[]])
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(section)
    raw = sign(frame, record_count=1, attributes=header.COMPRESSION_ZSTD)
    assert decode_batch(raw).values == [b"abc"]


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    raw = bytearray(build_batch([b"a", b"b"], timestamps=[10, 20]))
    header.stamp_log_append_time(raw, 0, len(raw), 5_000)
    batch = decode_batch(raw)
    assert batch.header.is_log_append_time
    assert batch.timestamps() == [5_000, 5_000]
    assert [record.timestamp for record in batch] == [5_000, 5_000]
    # The producer's timestamps stay in the section, as in Kafka.
    assert list(batch.timestamp_deltas) == [0, 10]
    assert decode_batch(build_batch([b"a"], timestamps=7, log_append_time=True)).timestamps() == [7]


@pytest.mark.parametrize(
    ("marker_type", "coordinator_epoch"),
    [(CONTROL_TYPE_ABORT, 0), (CONTROL_TYPE_COMMIT, 2**31 - 1)],
)
def test_control_batch_round_trip(marker_type: int, coordinator_epoch: int) -> None:
    raw = build_control_batch(
        marker_type,
        producer_id=77,
        producer_epoch=5,
        coordinator_epoch=coordinator_epoch,
        timestamp=123,
        base_offset=40,
    )
    batch = decode_batch(raw)
    assert batch.header.is_control and batch.header.is_transactional
    assert (batch.header.producer_id, batch.header.producer_epoch) == (77, 5)
    assert batch.keys == [struct.pack("<hh", 0, marker_type)]
    assert batch.values == [struct.pack("<hi", 0, coordinator_epoch)]
    assert read_control_marker(batch) == (marker_type, coordinator_epoch)


def test_control_marker_rejects_what_is_not_a_marker() -> None:
    with pytest.raises(InvalidRecordError, match="not a control batch"):
        read_control_marker(decode_batch(build_batch([b"x"])))
    forged = decode_batch(
        build_batch([b"\x00\x00\x01\x00\x00\x00"], keys=[b"\x00\x00\x07\x00"], control=True)
    )
    with pytest.raises(InvalidRecordError, match="marker type 7"):
        read_control_marker(forged)
    two = decode_batch(build_batch([b"a", b"b"], control=True))
    with pytest.raises(InvalidRecordError, match="exactly one record"):
        read_control_marker(two)
    with pytest.raises(InvalidRecordError, match="marker type 2"):
        build_control_batch(2, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0)


def test_matches_the_reference_encoder_byte_for_byte() -> None:
    values = [b"v0", None, b""]
    keys = [b"k0", b"k1", None]
    headers = [[("h", b"x")], [], [("é", None)]]
    expected_section = reference_section(values, keys, [0, -1, 5], [0, 1, 2], headers)
    raw = small_batch()
    assert raw[header.HEADER_BYTES :] == expected_section
    # arrays, then keys "k0k1", values "v0", header keys "h" "é" (2 bytes), header values "x".
    assert len(expected_section) == 3 * 24 + 2 * 8 + 4 + 2 + 3 + 1


def test_decode_accepts_bytearray_memoryview_and_a_position() -> None:
    raw = small_batch()
    padded = b"\xaa" * 5 + raw
    for buffer in (raw, bytearray(raw), memoryview(raw)):
        assert decode_batch(buffer).values == [b"v0", None, b""]
    assert decode_batch(padded, 5).keys == [b"k0", b"k1", None]
    assert decode_batch(memoryview(padded), 5).keys == [b"k0", b"k1", None]


def test_decode_batches_reads_consecutive_batches() -> None:
    first = build_batch([b"a"], base_offset=0)
    second = build_batch([b"b", b"c"], base_offset=1, compression=header.COMPRESSION_ZSTD)
    batches = decode_batches(first + second)
    assert [batch.offsets() for batch in batches] == [[0], [1, 2]]
    assert decode_batches(b"") == []
    with pytest.raises(CorruptRecordError):
        decode_batches(first + second[:-1])
    with pytest.raises(CorruptRecordError):
        decode_batches(first + b"\x00" * 5)


def test_empty_headers_are_cheap_and_shared() -> None:
    batch = decode_batch(build_batch([b"a"] * 3, headers=[[], [], []]))
    assert batch.headers == [(), (), ()]


# --- encoding errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"values": []}, "at least one record"),
        ({"keys": [b"a"]}, "keys has 1 items but values has 2"),
        ({"timestamps": [1, 2, 3]}, "timestamps has 3 items"),
        ({"headers": [[]]}, "headers has 1 items"),
        ({"offset_deltas": [0]}, "offset_deltas has 1 items"),
        ({"offset_deltas": [1, 1]}, r"offset_deltas\[1\] = 1 follows 1"),
        ({"offset_deltas": [3, 2]}, r"offset_deltas\[1\] = 2 follows 3"),
        ({"offset_deltas": [-1, 2]}, r"offset_deltas\[0\] = -1 is negative"),
        ({"offset_deltas": [0, 2**31]}, "int32"),
        ({"values": [b"a", "text"]}, "must be bytes"),
        ({"values": [b"a", 5]}, r"values\[1\] must be bytes or None, got int"),
        ({"keys": [b"a", 5]}, r"keys\[1\] must be bytes or None"),
        ({"timestamps": [1.5, 2]}, "int64"),
        ({"timestamps": [0, 2**63]}, "int64"),
        ({"headers": [[("k", "v")], []]}, "must be bytes"),
        ({"headers": [[(b"k", b"v")], []]}, "header keys must be str"),
        ({"headers": [[("k",)], []]}, r"\(str key, bytes \| None value\) pair"),
        ({"headers": [[("\ud800", b"")], []]}, "UTF-8"),
        ({"headers": [5, []]}, "per record"),
        ({"compression": 1}, "compression 1 is not supported"),
        ({"producer_epoch": 2**15}, "out of range"),
    ],
)
def test_build_batch_rejects_bad_input(kwargs: dict, match: str) -> None:
    arguments = {"values": [b"a", b"b"], **kwargs}
    with pytest.raises(InvalidRecordError, match=match):
        build_batch(**arguments)


def test_build_batch_rejects_a_memoryview_whose_len_is_not_its_size() -> None:
    wide = memoryview(struct.pack("<2i", 1, 2)).cast("i")
    with pytest.raises(InvalidRecordError, match="joined into"):
        build_batch([b"a", wide])


def test_build_batch_refuses_batches_over_the_hard_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "batch_bytes_max", 1000)
    build_batch([b"x" * 800])
    with pytest.raises(RecordTooLargeError, match="exceeds the hard limit of 1000"):
        build_batch([b"x" * 1000])
    # Compressible data under the compressed limit is fine; the uncompressed limit still holds.
    assert len(build_batch([bytes(5000)], compression=header.COMPRESSION_ZSTD)) < 1000
    monkeypatch.setattr(limits, "batch_uncompressed_bytes_max", 4000)
    with pytest.raises(RecordTooLargeError, match="uncompressed"):
        build_batch([bytes(5000)], compression=header.COMPRESSION_ZSTD)


# --- purity and the document -------------------------------------------------------------------


CODEC_MODULES = (
    "codec.py",
    "record_batch.py",
    "batch_encoding.py",
    "batch_decoding.py",
    "control_batches.py",
)


@pytest.mark.parametrize("module", CODEC_MODULES)
def test_codec_module_does_no_io(module: str) -> None:
    source = (REPO / "common" / "record" / module).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    forbidden = {"os", "io", "time", "threading", "asyncio", "grpc", "socket", "random", "pathlib"}
    assert imported & forbidden == set()


def test_the_documented_hex_example_is_what_the_codec_writes() -> None:
    """docs/record-batch.md pastes a batch's bytes; they must stay true."""
    doc = (REPO / "docs" / "record-batch.md").read_text()
    block = re.search(r"<!-- example-batch -->\s*```text\n(.*?)```", doc, re.S)
    assert block, "the worked example block is missing from docs/record-batch.md"
    documented = bytes.fromhex(
        "".join(line.split("|")[0].split(":", 1)[1] for line in block.group(1).splitlines())
    )
    assert documented == doc_example_batch()
    batch = decode_batch(documented)
    assert batch.keys == [b"k", None] and batch.values == [b"hi", b""]


def doc_example_batch() -> bytes:
    return build_batch(
        [b"hi", b""],
        keys=[b"k", None],
        timestamps=[1_700_000_000_000, 1_700_000_000_005],
        headers=[[("t", b"1")], []],
        base_offset=5,
        partition_leader_epoch=2,
    )
