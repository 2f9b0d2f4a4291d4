"""Topic configuration: Kafka's names, defaults, documentation and validation, in one table.

The storage keys (segment.bytes, retention.ms, …) are the log's own: their parsing and
invariants live in `LogConfig`, and a topic config is valid only if `LogConfig.from_properties`
accepts its storage keys together (compression.type among them: the leader recompresses). The
other keys (replication) are checked here.
The controller validates a whole topic's configuration at once, so `max.message.bytes` larger than
`segment.bytes` is refused whichever of the two was changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from samsa.common import limits
from samsa.common.errors import InvalidConfigError
from samsa.services.broker.log.config import LogConfig


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
    if "unclean.leader.election.enable" in configs:
        text = configs["unclean.leader.election.enable"]
        if text not in ("true", "false"):
            raise InvalidConfigError(
                f"unclean.leader.election.enable={text!r} must be true or false"
            )
