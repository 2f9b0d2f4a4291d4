"""Goal: a transaction marker at the epoch of a marker already written is answered as written
(a retry) only when it is of the same type; one of the other type is refused with
INVALID_PRODUCER_EPOCH, and that survives a clean restart (the snapshot keeps the type) and an
unclean one (the replay reads it from the marker).

Before, any marker at that epoch was answered as written: an operator's AbortTransaction wrote
ABORT at the epoch the producer's coordinator would bump to, and the coordinator's COMMIT there
then succeeded without being written, so the transaction counted as committed while the
partition's records were aborted (/tmp/review_hanging/test_marker_type_conflict.py).

Method: a real Log in tmp_path; producer 5 opens a transaction, a marker of one type ends it
at epoch 1, then markers of both types at epoch 1 are appended, before and after reopening.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import small_config

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
)
from samsa.services.broker.log.log import Log

NOW = 1_000_000
CONFIG = small_config(segment_bytes=1 << 20)
KINDS = [(CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT), (CONTROL_TYPE_COMMIT, CONTROL_TYPE_ABORT)]


def marker(log: Log, kind: int) -> int:
    """Append producer 5's marker at epoch 1; how many records were written."""
    data = build_control_batch(
        kind, producer_id=5, producer_epoch=1, coordinator_epoch=0, timestamp=NOW
    )
    info = log.append_as_leader(data, leader_epoch=0, now_ms=NOW, allow_control_batches=True)
    return info.record_count


def ended(directory: Path, kind: int) -> Log:
    log = Log.open(directory, CONFIG, now_ms=NOW)
    data = build_batch(
        [b"v"], timestamps=NOW, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
    )
    log.append_as_leader(data, leader_epoch=0, now_ms=NOW, allow_transactional=True)
    assert marker(log, kind) == 1
    return log


def assert_only_a_retry_passes(log: Log, written: int, other: int) -> None:
    end = log.log_end_offset
    assert marker(log, written) == 0, "a retry: answered as written, nothing stored"
    with pytest.raises(SamsaError) as refused:
        marker(log, other)
    assert refused.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "outcomes conflict" in str(refused.value)
    assert log.log_end_offset == end


@pytest.mark.parametrize(("written", "other"), KINDS)
def test_the_other_marker_type_at_the_same_epoch_is_refused(
    tmp_path: Path, written: int, other: int
) -> None:
    log = ended(tmp_path, written)
    assert_only_a_retry_passes(log, written, other)
    log.close()


@pytest.mark.parametrize(("written", "other"), KINDS)
def test_the_marker_type_survives_a_clean_restart(tmp_path: Path, written: int, other: int) -> None:
    ended(tmp_path, written).close()
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert_only_a_retry_passes(log, written, other)
    log.close()


@pytest.mark.parametrize(("written", "other"), KINDS)
def test_the_marker_type_is_replayed_after_an_unclean_stop(
    tmp_path: Path, written: int, other: int
) -> None:
    log = ended(tmp_path, written)
    log.flush()
    for segment in log._local_log.segments:  # the process dies: no close, no snapshot
        segment.close()
    log = Log.open(tmp_path, CONFIG, now_ms=NOW)
    assert_only_a_retry_passes(log, written, other)
    log.close()
