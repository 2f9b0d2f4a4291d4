"""Goal: a leader refuses CreateTime records outside the topic's bounds around its clock
(KIP-937: message.timestamp.before.max.ms / message.timestamp.after.max.ms), with
INVALID_TIMESTAMP and nothing stored, so that one far-future record cannot hold back time
retention of its segment (retention goes by a segment's largest timestamp). Markers, which the
broker writes, and LogAppendTime topics, whose records get the broker's time, are not held to
them.

Method: appends to a real Log on disk with `now_ms` passed in; the config's parsing beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, file_bytes, read_all, small_config

from samsa.common.errors import ErrorCode, InvalidConfigError, InvalidTimestampError
from samsa.common.record.codec import CONTROL_TYPE_COMMIT, build_control_batch
from samsa.services.broker.log.config import HOUR_MS, LONG_MAX, LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.runtime.topic_configs import TOPIC_KEYS, validate_topic_configs

NOW = 1_700_000_000_000  # the broker's clock at every append here


def open_log(tmp_path: Path, **overrides: object) -> Log:
    return Log.open(tmp_path, small_config(**overrides), now_ms=NOW)


def append(log: Log, data: bytes) -> int:
    return log.append_as_leader(data, leader_epoch=0, now_ms=NOW).first_offset


def test_the_defaults_are_kafka_4s() -> None:
    config = LogConfig()
    assert config.message_timestamp_before_max_ms == LONG_MAX
    assert config.message_timestamp_after_max_ms == HOUR_MS
    assert TOPIC_KEYS["message.timestamp.after.max.ms"].default == "3600000"
    assert TOPIC_KEYS["message.timestamp.before.max.ms"].default == str(LONG_MAX)


def test_a_record_more_than_an_hour_ahead_is_refused_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    append(log, batch(b"first", timestamp=NOW))
    before = file_bytes(log.directory)
    with pytest.raises(InvalidTimestampError) as refused:
        append(log, batch(b"a", b"b", timestamp=[NOW, NOW + HOUR_MS + 1]))
    assert refused.value.code is ErrorCode.INVALID_TIMESTAMP
    message = str(refused.value)
    assert str(NOW + HOUR_MS + 1) in message and str(NOW + HOUR_MS) in message
    assert "message.timestamp.after.max.ms" in message
    assert file_bytes(log.directory) == before
    assert log.log_end_offset == 1
    assert append(log, batch(b"at the bound", timestamp=NOW + HOUR_MS)) == 1  # inclusive


def test_records_far_in_the_past_pass_by_default_and_not_below_a_set_bound(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "default")
    assert append(log, batch(b"epoch", timestamp=0)) == 0
    log = open_log(tmp_path / "bounded", message_timestamp_before_max_ms=1_000)
    assert append(log, batch(b"just in", timestamp=NOW - 1_000)) == 0
    with pytest.raises(InvalidTimestampError, match=r"message\.timestamp\.before\.max\.ms"):
        append(log, batch(b"old", timestamp=NOW - 1_001))
    assert log.log_end_offset == 1


def test_every_record_counts_not_only_the_batchs_base_timestamp(tmp_path: Path) -> None:
    """A record's delta below the batch's first timestamp is checked too (the batch's
    smallest), and the largest anywhere in the batch."""
    log = open_log(tmp_path, message_timestamp_before_max_ms=HOUR_MS)
    with pytest.raises(InvalidTimestampError):
        append(log, batch(b"a", b"b", b"c", timestamp=[NOW, NOW - 2 * HOUR_MS, NOW]))
    with pytest.raises(InvalidTimestampError):
        append(log, batch(b"a", b"b", b"c", timestamp=[NOW, NOW + 2 * HOUR_MS, NOW]))
    assert log.log_end_offset == 0


def test_one_bad_batch_refuses_the_whole_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    good = batch(b"good", timestamp=NOW)
    far = batch(b"far", timestamp=NOW + 10 * HOUR_MS)
    with pytest.raises(InvalidTimestampError, match=f"position {len(good)}"):
        append(log, good + far)
    assert log.log_end_offset == 0


def test_a_log_append_time_topic_takes_any_producer_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    append(log, batch(b"far", timestamp=NOW + 10 * HOUR_MS))
    assert [record.timestamp for record in read_all(log)] == [NOW]


def test_a_marker_is_not_held_to_the_bounds(tmp_path: Path) -> None:
    """The broker writes markers with the coordinator's time; the bounds are the producers'."""
    log = open_log(tmp_path, message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
    data = batch(
        b"t", timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True
    )
    log.append_as_leader(data, leader_epoch=0, now_ms=NOW, allow_transactional=True)
    marker = build_control_batch(
        CONTROL_TYPE_COMMIT,
        producer_id=7,
        producer_epoch=1,  # the coordinator's bumped epoch (KIP-890)
        coordinator_epoch=0,
        timestamp=NOW + 10 * HOUR_MS,
    )
    log.append_as_leader(marker, leader_epoch=0, now_ms=NOW, allow_control_batches=True)
    assert log.log_end_offset == 2


@pytest.mark.parametrize(
    "key", ["message.timestamp.before.max.ms", "message.timestamp.after.max.ms"]
)
def test_the_bounds_are_topic_configs_of_at_least_zero(key: str) -> None:
    validate_topic_configs({key: "0"}, replication_factor=1)
    assert LogConfig.from_properties({key: "5000"}).timestamp_bounds(NOW) is not None
    with pytest.raises(InvalidConfigError, match=key):
        validate_topic_configs({key: "-1"}, replication_factor=1)


def test_the_bounds_around_the_clock() -> None:
    config = LogConfig(message_timestamp_before_max_ms=10, message_timestamp_after_max_ms=20)
    assert config.timestamp_bounds(1_000) == (990, 1_020)
    assert LogConfig(message_timestamp_after_max_ms=20).timestamp_bounds(1_000) == (None, 1_020)
    assert LogConfig(message_timestamp_type="LogAppendTime").timestamp_bounds(1_000) is None
