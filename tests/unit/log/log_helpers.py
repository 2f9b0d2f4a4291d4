"""Helpers shared by the partition-log tests: batches, configs and whole-log reads.

Not a test module: imported by the tests beside it (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from samsa.common.record.codec import Record, build_batch, build_control_batch, decode_batches
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log


def small_config(**overrides: object) -> LogConfig:
    """Segments of 2 KiB indexed every 128 bytes: rolls and index entries after a few appends."""
    settings: dict[str, object] = {
        "segment_bytes": 2048,
        "index_interval_bytes": 128,
        "max_message_bytes": 1024,
    }
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


def batch(
    *values: bytes | None,
    keys: Sequence[bytes | None] | None = None,
    timestamp: int | Sequence[int] = 1_000,
    **fields: object,
) -> bytes:
    """One batch of `values` (default one value), every record at `timestamp` unless a list."""
    return build_batch(list(values) or [b"v"], keys=keys, timestamps=timestamp, **fields)  # type: ignore[arg-type]


def idempotent_batch(producer_id: int, sequence: int, count: int, *, at: int) -> bytes:
    """An idempotent producer's batch (epoch 0) of `count` random 50-byte values at time `at`."""
    values = [os.urandom(50) for _ in range(count)]
    return batch(
        *values, timestamp=at, producer_id=producer_id, producer_epoch=0, base_sequence=sequence
    )


TXN_NOW = 1_000_000  # the time of the transactional helpers' batches


def txn_append(log: Log, data: bytes) -> int:
    """Append as leader, transactions and markers allowed; the batch's first offset."""
    return log.append_as_leader(
        data, leader_epoch=0, now_ms=TXN_NOW, allow_control_batches=True, allow_transactional=True
    ).first_offset


def txn_opening(pid: int) -> bytes:
    """A transactional batch that opens the producer's transaction (epoch 0)."""
    return build_batch(
        [b"t"],
        timestamps=TXN_NOW,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )


def txn_marker(kind: int, pid: int) -> bytes:
    """The COMMIT or ABORT marker that ends it (KIP-890: at the bumped epoch)."""
    return build_control_batch(
        kind, producer_id=pid, producer_epoch=1, coordinator_epoch=0, timestamp=TXN_NOW
    )


def read_all(log: Log, *, max_bytes: int = 4096) -> list[Record]:
    """Every record from the log start to the log end, read in `max_bytes` fetches."""
    records: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes)
        assert result.records, f"no progress at offset {offset}"
        for stored in decode_batches(result.records):
            records.extend(stored)
        offset = result.next_offset
    return records


def read_batches(log: Log, *, max_bytes: int = 4096) -> list[bytes]:
    """Every stored batch, as the bytes the log returns."""
    stored: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes)
        position = 0
        for decoded in decode_batches(result.records):
            size = decoded.header.size_bytes
            stored.append(result.records[position : position + size])
            position += size
        offset = result.next_offset
    return stored


def file_bytes(directory: Path) -> dict[str, bytes]:
    """Every file of a log directory by name (to prove that nothing changed)."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}
