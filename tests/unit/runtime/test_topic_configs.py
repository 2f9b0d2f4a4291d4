"""Goal: a topic config value that is not valid is refused as bad input (InvalidConfigError,
which the controller answers INVALID_CONFIG), never with another exception: one escaping
validation ends the CreateTopics or IncrementalAlterConfigs call INTERNAL, logged as a bug.

Method: validate_topic_configs over values that `str.isdigit` takes for digits but `int` does
not read (superscripts), beside a good one.
"""

from __future__ import annotations

import re

import pytest

from samsa.common.errors import InvalidConfigError
from samsa.services.broker.log.config import LogConfig
from samsa.services.runtime.topic_configs import validate_topic_configs


@pytest.mark.parametrize("value", ["²", "1²", "0", "4", "-1", "", " 1"])
def test_a_bad_min_insync_replicas_is_an_invalid_config(value: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"^min\.insync\.replicas="):
        validate_topic_configs({"min.insync.replicas": value}, 3)


def test_a_min_insync_replicas_within_the_replication_factor_is_accepted() -> None:
    validate_topic_configs({"min.insync.replicas": "3"}, 3)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", str(2**63)),  # Kafka's LONG ends at 2**63 - 1
        ("segment.ms", "9" * 40),
        ("flush.messages", str(2**64)),
        ("flush.ms", str(2**63)),
        ("index.interval.bytes", str(2**31)),  # an INT in Kafka
        ("retention.ms", "1_000"),  # Python's int() reads these; Java's parseLong does not
        ("retention.ms", "١٢٣"),
        ("delete.retention.ms", "１２"),
        ("min.cleanable.dirty.ratio", "0.2_5"),
        ("min.cleanable.dirty.ratio", "٠.٥"),
    ],
)
def test_a_number_kafka_cannot_read_is_an_invalid_config(key: str, value: str) -> None:
    """Every client reads a stored value back (DescribeConfigs) with Kafka's types: one beyond
    int64, or written with digits only Python reads, is refused where it comes in. A broker
    still loads such a value that an older controller stored: refusing it at replay would
    stop the broker at every start."""
    with pytest.raises(InvalidConfigError, match="^" + re.escape(key) + "="):
        validate_topic_configs({key: value}, 3)
    LogConfig.from_properties({key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", str(2**63 - 1)),
        ("retention.bytes", "-1"),
        ("segment.ms", " +60000 "),  # Kafka trims, and parseLong takes a sign
        ("index.interval.bytes", str(2**31 - 1)),
        ("min.cleanable.dirty.ratio", "5e-1"),
        ("min.cleanable.dirty.ratio", ".5"),
    ],
)
def test_a_number_kafka_reads_is_accepted(key: str, value: str) -> None:
    validate_topic_configs({key: value}, 3)
