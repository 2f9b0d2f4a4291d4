"""Topic configuration: Kafka's names, defaults, documentation and validation, in one table.

The storage keys (segment.bytes, retention.ms, …) are the log's own: their parsing and
invariants live in `LogConfig`, and a topic config is valid only if `LogConfig.from_properties`
accepts its storage keys together (compression.type among them: the leader recompresses). The
other keys (replication) are checked here.
The controller validates a whole topic's configuration at once, so `max.message.bytes` larger than
`segment.bytes` is refused whichever of the two was changed. The internal topics are held to more
(`validate_internal_topic_configs`): the coordinators write them, and their writes need
what those topics are created with.

Numbers are held to Kafka's types here, at the edge where values come in (CreateTopics,
IncrementalAlterConfigs): a LONG fits in int64, an INT in int32, and both are written in ASCII
digits (Java's parseLong; Python's int() also reads '1_000' and other scripts' digits). Every
client reads a stored value back through DescribeConfigs, so one that Kafka's types cannot hold
must not be stored. `LogConfig` does not check this: a broker replays whatever an older
controller stored, and refusing it there would stop the broker at every start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from samsa.common import limits
from samsa.common.errors import InvalidConfigError
from samsa.metadata.coordinators import INTERNAL_TOPIC_LOG_DEFAULTS
from samsa.metadata.replication_throttles import (
    LEADER_RATE,
    REPLICAS_DOC,
    REPLICAS_KEYS,
    parse_throttled_replicas,
)
from samsa.services.broker.log.config import LONG_MAX, LogConfig


@dataclass(frozen=True)
class ConfigKey:
    """One topic config: its default (as text) and what it does."""

    name: str
    default: str
    documentation: str


def _log_default(name: str) -> str:
    value = getattr(LogConfig(), name)
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    return str(value)


_LOG_DOCS = {
    "segment.bytes": "Size at which the active segment file is closed and a new one started.",
    "segment.ms": "Age at which the active segment is rolled even if it is not full.",
    "index.interval.bytes": "Bytes of log between two entries of the sparse offset index.",
    "retention.ms": "Closed segments older than this are deleted (-1: keep forever).",
    "retention.bytes": "The partition's log is trimmed to this size (-1: no limit).",
    "flush.messages": "fsync the log after this many messages (default: leave it to the OS).",
    "flush.ms": "fsync the log at least this often (default: leave it to the OS).",
    "max.message.bytes": "The largest record batch the topic accepts, after compression.",
    "message.timestamp.type": "CreateTime (the producer's) or LogAppendTime (the broker's).",
    "message.timestamp.before.max.ms": "A CreateTime record older than the broker's clock by "
    "more than this is refused (INVALID_TIMESTAMP).",
    "message.timestamp.after.max.ms": "A CreateTime record ahead of the broker's clock by more "
    "than this is refused (INVALID_TIMESTAMP): one far-future record would hold back time "
    "retention of its segment.",
    "cleanup.policy": "delete (by retention), compact (newest record per key), or both.",
    "delete.retention.ms": "How long tombstones and emptied transactions' COMMIT markers "
    "survive compaction.",
    "min.cleanable.dirty.ratio": "Compact again once this share of the compactable log was "
    "written since the last pass.",
    "compression.type": "producer (keep the producer's codec), zstd or uncompressed: the leader "
    "recompresses batches of another codec.",
}

LOG_KEYS = {f.metadata["key"]: f.name for f in fields(LogConfig)}

TOPIC_KEYS: dict[str, ConfigKey] = {
    key: ConfigKey(key, _log_default(name), _LOG_DOCS.get(key, ""))
    for key, name in LOG_KEYS.items()
}
TOPIC_KEYS |= {
    "min.insync.replicas": ConfigKey(
        "min.insync.replicas",
        "1",
        "With acks=all, a write is refused when fewer replicas than this are in sync.",
    ),
    "unclean.leader.election.enable": ConfigKey(
        "unclean.leader.election.enable",
        "false",
        "Let a replica outside the ISR become leader when no ISR member is alive (may lose data).",
    ),
}
# Replication throttles (KIP-73; metadata/replication_throttles.py): which replicas are throttled.
TOPIC_KEYS |= {
    key: ConfigKey(
        key,
        "",
        REPLICAS_DOC.format(
            side=key.split(".")[0], rate=LEADER_RATE.replace("leader", key.split(".")[0])
        ),
    )
    for key in REPLICAS_KEYS
}


# Kafka's INT keys among the log's (the other integers are LONGs).
INT_KEYS = frozenset({"segment.bytes", "index.interval.bytes", "max.message.bytes"})
INT_MAX = 2**31 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)
_LOG_DEFAULTS = LogConfig()


def _check_kafka_type(key: str, text: str) -> None:
    """Raise when Kafka's type of `key` cannot hold `text` (see the module doc)."""
    default = getattr(_LOG_DEFAULTS, LOG_KEYS[key])
    if isinstance(default, float):
        if not _DECIMAL.fullmatch(text.strip()):
            raise InvalidConfigError(f"{key}={text!r} is not a decimal number (such as 0.5)")
        return
    if not isinstance(default, int):
        return
    largest = INT_MAX if key in INT_KEYS else LONG_MAX
    if not _INTEGER.fullmatch(text.strip()) or not -largest - 1 <= int(text) <= largest:
        kind = "a 32-bit" if key in INT_KEYS else "a 64-bit"
        raise InvalidConfigError(
            f"{key}={text[:40]!r} is not {kind} integer in ASCII digits (at most {largest})"
        )


def validate_topic_configs(configs: Mapping[str, str], replication_factor: int) -> None:
    """Raise InvalidConfigError naming the key when `configs` is not a valid topic config."""
    if len(configs) > limits.topic_configs_per_request_max:
        raise InvalidConfigError(
            f"{len(configs)} configs; at most {limits.topic_configs_per_request_max} per topic"
        )
    for key, value in configs.items():
        if key not in TOPIC_KEYS:
            raise InvalidConfigError(
                f"unknown topic config {key!r}; known: {', '.join(sorted(TOPIC_KEYS))}"
            )
        if len(value) > limits.config_value_length_max:
            raise InvalidConfigError(
                f"{key}: value of {len(value)} characters; at most {limits.config_value_length_max}"
            )
    for key, value in configs.items():
        if key in LOG_KEYS:
            _check_kafka_type(key, value)
    LogConfig.from_properties({k: v for k, v in configs.items() if k in LOG_KEYS})
    if "min.insync.replicas" in configs:
        text = configs["min.insync.replicas"]
        # isascii: isdigit also takes superscripts and the like, which int() refuses
        digits = text.isascii() and text.isdigit()
        if not digits or not 1 <= int(text) <= max(replication_factor, 1):
            raise InvalidConfigError(
                f"min.insync.replicas={text!r} must be an integer from 1 to the replication "
                f"factor ({replication_factor})"
            )
    for key in REPLICAS_KEYS:
        if key in configs:
            parse_throttled_replicas(key, configs[key])
    if "unclean.leader.election.enable" in configs:
        text = configs["unclean.leader.election.enable"]
        if text not in ("true", "false"):
            raise InvalidConfigError(
                f"unclean.leader.election.enable={text!r} must be true or false"
            )


# What the coordinators' writes to the internal topics need of them. A write a leader refuses
# for its size or timestamps (MESSAGE_TOO_LARGE, INVALID_TIMESTAMP: not retriable) fails the
# coordinator's writer, and with it every group or transactional id of the partition, at each
# retry. They size their batches to the default max.message.bytes (offsets_partition.split_write,
# limits.offset_commit_batch_bytes_max, group_assignment.TARGET_RECORD_BYTES_MAX) and stamp them
# with their own clock, which may run ahead of or behind a broker's (INTERNAL_TOPIC_LOG_DEFAULTS).
INTERNAL_TIMESTAMP_KEYS = ("message.timestamp.after.max.ms", "message.timestamp.before.max.ms")


def validate_internal_topic_configs(configs: Mapping[str, str]) -> None:
    """Raise InvalidConfigError naming the key when an internal topic's `configs` (already
    valid for a topic) would have the coordinators' writes refused (see above)."""
    effective = LogConfig.from_properties(
        {**INTERNAL_TOPIC_LOG_DEFAULTS, **{k: v for k, v in configs.items() if k in LOG_KEYS}}
    )
    if effective.max_message_bytes < limits.max_message_bytes_default:
        raise InvalidConfigError(
            f"max.message.bytes={effective.max_message_bytes}: an internal topic takes at least "
            f"{limits.max_message_bytes_default}, the size of the batches its coordinators write"
        )
    for key in INTERNAL_TIMESTAMP_KEYS:
        if getattr(effective, LOG_KEYS[key]) != LONG_MAX:
            raise InvalidConfigError(
                f"{key}={configs[key]}: an internal topic's records carry the coordinators' clock, "
                f"which may differ from a broker's; it stays {LONG_MAX} (delete the setting)"
            )
