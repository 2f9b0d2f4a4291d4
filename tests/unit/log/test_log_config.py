"""Goal: LogConfig speaks Kafka's keys with Kafka's defaults, and no bad setting gets through.

Method: parse string maps as an operator would send them; every rejection must be an
InvalidConfigError whose message names the offending key.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.services.broker.log.config import LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    day_ms = 86_400_000
    assert config.segment_bytes == 1024**3
    assert config.segment_ms == 7 * day_ms
    assert config.index_interval_bytes == 4096
    assert (config.retention_ms, config.retention_bytes) == (7 * day_ms, -1)
    assert config.flush_messages == config.flush_ms == 2**63 - 1
    assert config.max_message_bytes == 1024 * 1024 + 12
    assert config.message_timestamp_type == "CreateTime" and not config.log_append_time
    assert config.cleanup_policy == {"delete"} and config.delete and not config.compact
    assert config.delete_retention_ms == day_ms
    assert config.min_cleanable_dirty_ratio == 0.5
    assert LogConfig.from_properties({}) == config


def test_every_key_parses() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": "4096",
            "segment.ms": "60000",
            "index.interval.bytes": "0",
            "retention.ms": "-1",
            "retention.bytes": "100000",
            "flush.messages": "1",
            "flush.ms": "1000",
            "max.message.bytes": "2048",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact,delete",
            "delete.retention.ms": "0",
            "min.cleanable.dirty.ratio": "0.25",
        }
    )
    assert (config.segment_bytes, config.segment_ms, config.index_interval_bytes) == (
        4096,
        60000,
        0,
    )
    assert (config.retention_ms, config.retention_bytes) == (-1, 100000)
    assert (config.flush_messages, config.flush_ms, config.max_message_bytes) == (1, 1000, 2048)
    assert config.log_append_time and config.compact and config.delete
    assert config.delete_retention_ms == 0
    assert config.min_cleanable_dirty_ratio == 0.25


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "12"),
        ("segment.bytes", str(2**31)),
        ("segment.bytes", "lots"),
        ("segment.ms", "0"),
        ("index.interval.bytes", "-1"),
        ("retention.ms", "-2"),
        ("retention.bytes", "1.5"),
        ("flush.messages", "0"),
        ("flush.ms", "-1"),
        ("max.message.bytes", "10"),
        ("max.message.bytes", str(2**30)),
        ("message.timestamp.type", "createtime"),
        ("cleanup.policy", "compact,shred"),
        ("cleanup.policy", ""),
        ("delete.retention.ms", "-5"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("min.cleanable.dirty.ratio", "half"),
        ("min.cleanable.dirty.ratio", "nan"),
        ("retention.hours", "1"),
    ],
)
def test_bad_settings_name_their_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")) as raised:
        LogConfig.from_properties({key: value})
    assert raised.value.code == ErrorCode.INVALID_CONFIG


def test_a_maximal_batch_must_fit_a_segment() -> None:
    with pytest.raises(InvalidConfigError, match=r"max\.message\.bytes=.*segment\.bytes"):
        LogConfig.from_properties({"segment.bytes": "4096", "max.message.bytes": "8192"})


def test_construction_is_validated_too() -> None:
    with pytest.raises(InvalidConfigError, match=r"segment\.ms"):
        LogConfig(segment_ms=-3)
    with pytest.raises(InvalidConfigError, match=r"cleanup\.policy"):
        LogConfig(cleanup_policy=frozenset())
