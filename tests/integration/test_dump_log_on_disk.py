"""Goal: `samsa dump-log` reads what the real storage engine writes: on a partition log appended
to by the broker's own Log (plain, zstd, idempotent and transactional batches, an ABORT marker;
segments rolled, indexes, a .txnindex and a producer snapshot written at close), the installed
`samsa` command, run as its own process, prints every appended batch with the offsets and counts
the appends were given, the payloads with --print-data-log, index entries the log agrees with,
the aborted transaction and the producer's state — and exits 1 once a byte of a segment is
flipped on disk.

Method: services/broker/log/log.py's Log in tmp_path (small segments so that it rolls), closed
before the dump; `samsa dump-log` in a subprocess, its output parsed line by line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from samsa.common.record.codec import CONTROL_TYPE_ABORT, build_batch, build_control_batch
from samsa.common.record.header import COMPRESSION_ZSTD
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log

SAMSA = Path(sys.executable).with_name("samsa")
BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* crcValid: (\w+)$")
PRODUCER_ID = 77


def dump_log(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SAMSA), "dump-log", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def write_log(directory: Path) -> list[tuple[int, int, int]]:
    """Append batches of every kind through the real Log; (first, last, count) per append."""
    now = time.time_ns() // 1_000_000
    config = LogConfig(segment_bytes=2048, index_interval_bytes=256, max_message_bytes=2048)
    log = Log.open(directory, config, now_ms=now)
    appended = []
    next_sequence = 0
    for number in range(30):
        values = [f"payload {number}-{n}".encode() for n in range(1 + number % 4)]
        keys = [f"key-{number}".encode()] * len(values)
        fields: dict[str, object] = {}
        if number % 3 == 1:
            fields["compression"] = COMPRESSION_ZSTD
        if number % 3 == 2:
            fields.update(producer_id=5, producer_epoch=0, base_sequence=next_sequence)
            next_sequence += len(values)
        raw = build_batch(values, keys=keys, timestamps=now, **fields)  # type: ignore[arg-type]
        info = log.append_as_leader(raw, leader_epoch=3, now_ms=now)
        appended.append((info.first_offset, info.last_offset, info.record_count))
    transactional = build_batch(
        [b"doomed"],
        timestamps=now,
        producer_id=PRODUCER_ID,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    marker = build_control_batch(
        CONTROL_TYPE_ABORT,
        producer_id=PRODUCER_ID,
        producer_epoch=1,
        coordinator_epoch=6,
        timestamp=now,
    )
    for raw in (transactional, marker):
        info = log.append_as_leader(
            raw, leader_epoch=3, now_ms=now, allow_control_batches=True, allow_transactional=True
        )
        appended.append((info.first_offset, info.last_offset, info.record_count))
    log.close()
    return appended


def test_dump_log_prints_what_the_storage_engine_appended(tmp_path: Path) -> None:
    appended = write_log(tmp_path)
    logs = sorted(tmp_path.glob("*.log"))
    assert len(logs) >= 2, "the small segments rolled"

    completed = dump_log("--files", ",".join(map(str, logs)))
    assert completed.returncode == 0, completed.stderr
    printed = [
        BATCH_LINE.match(line).groups()  # type: ignore[union-attr]
        for line in completed.stdout.splitlines()
        if line.startswith("baseOffset:")
    ]
    assert [(int(a), int(b), int(c)) for a, b, c, _ in printed] == appended
    assert {valid for *_, valid in printed} == {"true"}
    assert completed.stdout.count("Dumping ") == len(logs)

    data = dump_log("--files", ",".join(map(str, logs)), "--print-data-log")
    assert data.returncode == 0, data.stderr
    for number in (0, 13, 29):
        assert f"key: key-{number} payload: payload {number}-0" in data.stdout
    assert "key: null payload: doomed" in data.stdout
    assert "endTxnMarker: ABORT coordinatorEpoch: 6" in data.stdout

    indexes = sorted(tmp_path.glob("*.index")) + sorted(tmp_path.glob("*.timeindex"))
    checked = dump_log("--files", ",".join(map(str, indexes)), "--verify-index-only")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("Every entry agrees with") == len(indexes)

    txn_and_snapshots = sorted(tmp_path.glob("*.txnindex")) + sorted(tmp_path.glob("*.snapshot"))
    state = dump_log("--files", ",".join(map(str, txn_and_snapshots)), "--json")
    assert state.returncode == 0, state.stderr
    files = json.loads(state.stdout)["files"]
    aborted = [entry for f in files for entry in f.get("abortedTransactions", [])]
    first, last = appended[-2][0], appended[-1][0]
    assert [(a["producerId"], a["firstOffset"], a["lastOffset"]) for a in aborted] == [
        (PRODUCER_ID, first, last)
    ]
    newest = [f for f in files if f["kind"] == "snapshot"][-1]
    producers = {p["producerId"]: p for p in newest["producers"]}
    sequences = sum(count for number, (_, _, count) in enumerate(appended[:30]) if number % 3 == 2)
    assert producers[5]["lastSequence"] == sequences - 1 and producers[5]["producerEpoch"] == 0
    assert producers[PRODUCER_ID]["currentTxnFirstOffset"] == -1  # aborted: none open


def test_a_flipped_byte_on_disk_makes_dump_log_exit_1(tmp_path: Path) -> None:
    write_log(tmp_path)
    first = sorted(tmp_path.glob("*.log"))[0]
    damaged = bytearray(first.read_bytes())
    damaged[100] ^= 0x04
    first.write_bytes(bytes(damaged))
    completed = dump_log("--files", str(first))
    assert completed.returncode == 1
    assert "crcValid: false" in completed.stdout
    assert "Corrupt: recovery would truncate this segment to 0 bytes" in completed.stdout
