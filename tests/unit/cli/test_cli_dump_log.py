"""Goal: `samsa dump-log` prints kafka-dump-log.sh's lines (or one JSON document) for each file it
is given and says by its exit status whether they are sound: 0, 1 for a corrupt region or an
index the log contradicts, 2 for a usage error such as a suffix it does not read (named with
the ones it does). Keys and payloads are one line of unambiguous text whatever their bytes.

Method: `samsa` main() on files written into tmp_path from the real codec's batches (stamped as
appends stamp them) and the real indexer's index bytes, capturing stdout and stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samsa.cli.dump_log_format import printable
from samsa.cli.main import main as samsa_main
from samsa.common.record.codec import CONTROL_TYPE_ABORT, build_batch, build_control_batch
from samsa.common.record.header import read_header, stamp_offsets
from samsa.services.broker.log.segment_index import SegmentIndexes

T0 = 1_700_000_000_000
BASE = "00000000000000000000"


def write_segment(directory: Path, *batches: bytes) -> tuple[Path, bytes]:
    """`<BASE>.log` holding the batches at consecutive offsets, and its `.index`."""
    data = bytearray()
    indexes = SegmentIndexes(0, 1)
    for raw in batches:
        stamped = bytearray(raw)
        stamp_offsets(stamped, 0, indexes.next_offset, 2)
        header = read_header(stamped)
        indexes.on_batch(
            len(data), header.base_offset, header.last_offset, header.max_timestamp, len(stamped)
        )
        data += stamped
    (directory / f"{BASE}.index").write_bytes(indexes.offset_index.encode())
    path = directory / f"{BASE}.log"
    path.write_bytes(bytes(data))
    return path, bytes(data)


def three_batches() -> list[bytes]:
    return [
        build_batch([b"a", b"b", b"c"], keys=[b"k", None, b"k2"], timestamps=T0),
        build_batch(
            [b"line\nbreak \xff"],
            timestamps=T0 + 1,
            headers=[[("h1", b"x"), ("h2", None)]],
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        ),
        build_control_batch(
            CONTROL_TYPE_ABORT, producer_id=5, producer_epoch=1, coordinator_epoch=8, timestamp=T0
        ),
    ]


def test_a_sound_log_prints_kafkas_lines_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = write_segment(tmp_path, *three_batches())
    assert samsa_main(["dump-log", "--files", str(path), "--print-data-log"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2] == (
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 2 isTransactional: false isControl: false "
        f"position: 0 CreateTime: {T0} size: {read_header(three_batches()[0]).size_bytes} "
        "magic: 1 compresscodec: none crcValid: true"
    )
    assert lines[3] == (
        f"| offset: 0 CreateTime: {T0} keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] "
        "key: k payload: a"
    )
    assert lines[4].endswith(
        "keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] key: null payload: b"
    )
    assert "isTransactional: true" in lines[6] and "producerId: 5" in lines[6]
    assert lines[7].endswith(
        "sequence: 0 headerKeys: [h1,h2] key: null payload: line\\nbreak \\xff"
    )
    assert "isControl: true" in lines[8]
    assert lines[9].endswith("endTxnMarker: ABORT coordinatorEpoch: 8")
    assert len(lines) == 10


def test_deep_iteration_without_data_prints_records_but_not_their_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = write_segment(tmp_path, *three_batches())
    assert samsa_main(["dump-log", "--files", str(path), "--deep-iteration"]) == 0
    records = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(records) == 5 and not any("payload:" in line for line in records)


def test_a_flipped_crc_byte_prints_crc_invalid_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, data = write_segment(tmp_path, *three_batches())
    second = read_header(data).size_bytes
    damaged = bytearray(data)
    damaged[second + 65] ^= 0x10
    path.write_bytes(bytes(damaged))
    assert samsa_main(["dump-log", "--files", str(path)]) == 1
    out = capsys.readouterr().out
    assert [line.endswith("crcValid: false") for line in out.splitlines()[2:5]] == [
        False,
        True,
        False,
    ]
    assert f"Corrupt: recovery would truncate this segment to {second} bytes" in out


def test_an_index_the_log_contradicts_exits_1_and_names_each_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_segment(tmp_path, *three_batches())
    index = tmp_path / f"{BASE}.index"
    assert samsa_main(["dump-log", "--files", str(index)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"Every entry agrees with {BASE}.log."
    entries = bytearray(index.read_bytes())
    entries[4] += 1  # the first entry's position now points inside a batch
    index.write_bytes(bytes(entries))
    assert samsa_main(["dump-log", "--files", str(index), "--verify-index-only"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"Mismatches in {index} against {BASE}.log:"
    assert "which is not at a batch of the log" in lines[2] and len(lines) == 3
    assert samsa_main(["dump-log", "--files", str(index), "--index-sanity-check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{index} passed sanity check."


def test_json_is_one_document_for_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = write_segment(tmp_path, *three_batches())
    files = f"{path},{tmp_path / f'{BASE}.index'}"
    assert samsa_main(["dump-log", "--files", files, "--print-data-log", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    log, index = document["files"]
    assert [b["count"] for b in log["batches"]] == [3, 1, 1]
    assert log["batches"][1]["records"][0]["payload"] == "line\\nbreak \\xff"
    assert log["batches"][2]["records"][0]["endTxnMarker"] == "ABORT"
    assert log["verdict"]["recoveryError"] is None
    assert index["kind"] == "index" and index["mismatches"] == []


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            "segment.dat",
            "samsa dump-log: segment.dat is not a file dump-log reads: its name must end with "
            "one of .log, .index, .timeindex, .txnindex, .snapshot",
        ),
        (",", "samsa dump-log: --files names no file: give F[,F...]"),
    ],
)
def test_a_usage_error_exits_2_before_reading_anything(
    files: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samsa_main(["dump-log", "--files", files]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message + "\n")


def test_max_bytes_must_be_positive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert samsa_main(["dump-log", "--files", "x.log", "--max-bytes", "0"]) == 2
    assert capsys.readouterr().err == "samsa dump-log: --max-bytes 0 must be at least 1\n"


def test_a_missing_file_is_named_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samsa_main(["dump-log", "--files", str(tmp_path / "gone.log")]) == 1
    assert capsys.readouterr().err.startswith(f"samsa dump-log: cannot read {tmp_path}/gone.log")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (None, "null"),
        (b"", ""),
        (b"plain text", "plain text"),
        ("caf\u00e9".encode(), "caf\u00e9"),
        (b"a\\b", "a\\\\b"),
        (b"tab\there\r\n", "tab\\there\\r\\n"),
        (b"\x00\x7f\xff\xc3", "\\x00\\x7f\\xff\\xc3"),
    ],
)
def test_keys_and_payloads_are_one_unambiguous_line(raw: bytes | None, shown: str) -> None:
    assert printable(raw) == shown
