"""Goal: a log whose retention took every segment, the active one too (log start == log end),
keeps what must outlive its records: the idempotent producers' sequences and open transactions
(KIP-360) and its log start, and serves a fetch at its end, also across a restart (clean or
not) with no record left to replay.

Method: a real Log with small segments; time is the `now_ms` passed to each call; a restart
without `close` stands for a crash (nothing unflushed is lost here, but the clean-shutdown
marker is missing and the recovery checkpoint is what the log last wrote).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_helpers import batch, small_config

from samsa.common.errors import SamsaError
from samsa.services.broker.log import log_durability
from samsa.services.broker.log.local_log import LocalLog
from samsa.services.broker.log.log import Log

NOW = 1_000_000
HOUR_MS = 3_600_000
CONFIG = small_config(retention_ms=HOUR_MS, segment_bytes=1 << 20)


def idempotent(pid: int, sequence: int, count: int = 1, **fields: object) -> bytes:
    return batch(
        *[os.urandom(50) for _ in range(count)],
        timestamp=NOW,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=sequence,
        **fields,
    )


def emptied_log(directory: Path, *, leader_epoch: int = 3, transactional: bool = False) -> Log:
    """A log of producer 7's batches (sequences 0..3), every one deleted by retention."""
    log = Log.open(directory, CONFIG, now_ms=NOW)
    log.start_leader_epoch(leader_epoch)
    for sequence in (0, 2):
        log.append_as_leader(
            idempotent(7, sequence, count=2, transactional=transactional),
            leader_epoch=leader_epoch,
            now_ms=NOW,
            allow_transactional=transactional,
        )
    assert log.apply_retention(now_ms=NOW + HOUR_MS + 1, high_watermark=4) == 1
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    return log


@pytest.mark.parametrize("clean", [True, False])
def test_a_live_producer_keeps_its_sequence_across_a_restart(tmp_path: Path, clean: bool) -> None:
    """The producer state at the log end is all that is left of producer 7: a restart right
    after the deletion, even without a clean shutdown, must find it, or the producer's retry of
    its last batch would be stored twice (an unknown producer may start at any sequence)."""
    log = emptied_log(tmp_path)
    if clean:
        log.close()
    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW + HOUR_MS + 2)
    entries = reopened.producer_entries()
    assert [(e.producer_id, e.batches[-1].last_sequence) for e in entries] == [(7, 3)]
    retried = reopened.append_as_leader(idempotent(7, 2, count=2), leader_epoch=3, now_ms=NOW)
    assert retried.record_count == 0, "a retried batch is not stored twice"
    with pytest.raises(SamsaError):
        reopened.append_as_leader(idempotent(7, 9), leader_epoch=3, now_ms=NOW)
    reopened.append_as_leader(idempotent(7, 4), leader_epoch=3, now_ms=NOW)
    assert reopened.log_end_offset == 5
    reopened.close()


@pytest.mark.parametrize("clean", [True, False])
def test_an_open_transaction_stays_open_across_a_restart(tmp_path: Path, clean: bool) -> None:
    log = emptied_log(tmp_path, transactional=True)
    assert log.has_open_transaction(7, 0)
    assert log.last_stable_offset(4) == 4, "never below the log start"
    if clean:
        log.close()
    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW + HOUR_MS + 2)
    assert reopened.has_open_transaction(7, 0)
    reopened.close()


@pytest.mark.parametrize("clean", [True, False])
def test_a_restart_keeps_the_log_start_at_the_log_end(tmp_path: Path, clean: bool) -> None:
    """The epoch of the deleted records starts at the log end now and answers
    OffsetsForLeaderEpoch; a restart forgets it as Kafka's does (truncateFromEnd at the log
    end), and the replica starts its next epoch there when it leads again."""
    log = emptied_log(tmp_path)
    assert log.leader_epoch_entries() == [(3, 4)]
    assert log.end_offset_for_epoch(3) == (3, 4)
    if clean:
        log.close()
    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW + HOUR_MS + 2)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (4, 4)
    assert reopened.apply_retention(now_ms=NOW + 2 * HOUR_MS, high_watermark=4) == 0
    reopened.start_leader_epoch(4)
    assert reopened.end_offset_for_epoch(3) == (3, 4)
    reopened.append_as_leader(batch(b"x", timestamp=NOW), leader_epoch=4, now_ms=NOW)
    assert reopened.read(4, 1000).next_offset == 5
    reopened.close()


def test_a_fetch_at_the_log_end_answers_nothing(tmp_path: Path) -> None:
    log = emptied_log(tmp_path)
    result = log.read(4, 1000, max_offset=4)
    assert (result.records, result.next_offset) == (b"", 4)
    log.close()


def test_the_marker_removal_is_durable_before_the_roll_at_the_log_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention's roll at the log end is the first change to a cleanly opened log's files: the
    clean-shutdown marker's removal must be durable before it, or an OS crash right after could
    bring the marker back over files that are no longer what the close left."""
    log = emptied_log(tmp_path)
    log.append_as_leader(idempotent(7, 4), leader_epoch=3, now_ms=NOW)
    log.close()
    reopened = Log.open(tmp_path, CONFIG, now_ms=NOW)  # consumes the marker, fsync deferred
    events: list[str] = []
    real_fsync, real_roll = log_durability.fsync_directory, LocalLog.roll_at_end

    def fsync(directory: Path) -> None:
        events.append("fsync")
        real_fsync(directory)

    def roll(self: LocalLog, index_interval_bytes: int) -> None:
        events.append("roll")
        real_roll(self, index_interval_bytes)

    monkeypatch.setattr(log_durability, "fsync_directory", fsync)
    monkeypatch.setattr(LocalLog, "roll_at_end", roll)
    assert reopened.apply_retention(now_ms=NOW + HOUR_MS + 1, high_watermark=5) == 1
    assert events[:2] == ["fsync", "roll"]
    reopened.close()
