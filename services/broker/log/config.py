"""A partition log's configuration: Kafka's topic-level keys, parsed and checked once.

Theory of operation. `LogConfig` is a frozen dataclass whose fields are Kafka's topic settings
under Python names (`segment.bytes` -> `segment_bytes`). `from_properties` is the edge: it takes
the string map an operator or the controller hands over, rejects unknown keys and bad values with
an InvalidConfigError naming the key, and fills the rest with Kafka's defaults. Every instance is
validated in `__post_init__`, so an incoherent `LogConfig` cannot exist, however it was built.

Invariants of a LogConfig:
- limits.segment_bytes_min <= segment_bytes <= limits.segment_bytes_max (index positions are
  32-bit);
- max_message_bytes <= limits.batch_bytes_max and <= segment_bytes (a maximal batch fits in one
  segment), and at least one batch header;
- retention_ms, retention_bytes >= -1 (-1 = no limit); the time settings are >= 0 (segment.ms and
  flush.messages >= 1);
- message.timestamp.before.max.ms and message.timestamp.after.max.ms >= 0 (KIP-937; the
  after bound defaults to one hour, as in Kafka 4.0);
- cleanup_policy is a non-empty subset of {"delete", "compact"};
- 0 <= min_cleanable_dirty_ratio <= 1 (the share of a compacted log's cleanable bytes written
  since its last compaction pass at which the broker's cleaner compacts it again, as Kafka's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields

from samsa.common import limits
from samsa.common.errors import InvalidConfigError
from samsa.common.record.header import COMPRESSION_NONE, COMPRESSION_ZSTD, HEADER_BYTES

# Kafka's "never": Long.MAX_VALUE, the default of flush.messages and flush.ms.
LONG_MAX = 2**63 - 1
HOUR_MS = 60 * 60 * 1000
DAY_MS = 24 * HOUR_MS

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
TIMESTAMP_TYPES = frozenset({CREATE_TIME, LOG_APPEND_TIME})

# compression.type: `producer` keeps each batch's codec; the others are what the leader stores.
COMPRESSION_PRODUCER = "producer"
COMPRESSION_TYPES = (COMPRESSION_PRODUCER, "zstd", "uncompressed")
_RECORD_COMPRESSION = {"zstd": COMPRESSION_ZSTD, "uncompressed": COMPRESSION_NONE}

POLICY_DELETE = "delete"
POLICY_COMPACT = "compact"
CLEANUP_POLICIES = frozenset({POLICY_DELETE, POLICY_COMPACT})


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(frozen=True)
class LogConfig:
    """One partition log's settings; field metadata "key" is the Kafka configuration key."""

    segment_bytes: int = field(default=limits.segment_bytes_default, metadata=_key("segment.bytes"))
    segment_ms: int = field(default=7 * DAY_MS, metadata=_key("segment.ms"))
    index_interval_bytes: int = field(
        default=limits.index_interval_bytes_default, metadata=_key("index.interval.bytes")
    )
    retention_ms: int = field(default=7 * DAY_MS, metadata=_key("retention.ms"))
    retention_bytes: int = field(default=-1, metadata=_key("retention.bytes"))
    flush_messages: int = field(default=LONG_MAX, metadata=_key("flush.messages"))
    flush_ms: int = field(default=LONG_MAX, metadata=_key("flush.ms"))
    max_message_bytes: int = field(
        default=limits.max_message_bytes_default, metadata=_key("max.message.bytes")
    )
    message_timestamp_type: str = field(
        default=CREATE_TIME, metadata=_key("message.timestamp.type")
    )
    message_timestamp_before_max_ms: int = field(
        default=LONG_MAX, metadata=_key("message.timestamp.before.max.ms")
    )
    message_timestamp_after_max_ms: int = field(
        default=HOUR_MS, metadata=_key("message.timestamp.after.max.ms")
    )
    cleanup_policy: frozenset[str] = field(
        default=frozenset({POLICY_DELETE}), metadata=_key("cleanup.policy")
    )
    delete_retention_ms: int = field(default=DAY_MS, metadata=_key("delete.retention.ms"))
    min_cleanable_dirty_ratio: float = field(
        default=0.5, metadata=_key("min.cleanable.dirty.ratio")
    )
    compression_type: str = field(default=COMPRESSION_PRODUCER, metadata=_key("compression.type"))

    def __post_init__(self) -> None:
        self.validate()

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def timestamp_bounds(self, now_ms: int) -> tuple[int | None, int] | None:
        """The record timestamps a leader accepts at broker time `now_ms`, inclusive (KIP-937):
        (lowest, highest), lowest None under the default before.max.ms (2^63 - 1: any age, and
        no pass over the timestamps to find the smallest); None under LogAppendTime, where the
        broker's clock replaces them."""
        if self.log_append_time:
            return None
        before = self.message_timestamp_before_max_ms
        lowest = None if before == LONG_MAX else now_ms - before
        return lowest, now_ms + self.message_timestamp_after_max_ms

    @property
    def record_compression(self) -> int | None:
        """The codec the leader stores batches in; None: each batch's own (`producer`)."""
        return _RECORD_COMPRESSION.get(self.compression_type)

    @property
    def compact(self) -> bool:
        return POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return POLICY_DELETE in self.cleanup_policy

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> LogConfig:
        """Parse Kafka-named string settings; unspecified keys take Kafka's defaults."""
        by_key = {f.metadata["key"]: f.name for f in fields(cls)}
        values: dict[str, object] = {}
        for key, text in properties.items():
            if key not in by_key:
                known = ", ".join(sorted(by_key))
                raise InvalidConfigError(f"unknown log configuration key {key!r} (known: {known})")
            values[by_key[key]] = _PARSERS.get(key, _parse_int)(key, text)
        return cls(**values)  # type: ignore[arg-type]

    def validate(self) -> None:
        """Reject out-of-range values and incoherent combinations, naming the Kafka key."""
        _at_least("segment.bytes", self.segment_bytes, limits.segment_bytes_min)
        _at_most("segment.bytes", self.segment_bytes, limits.segment_bytes_max)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("retention.bytes", self.retention_bytes, -1)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("max.message.bytes", self.max_message_bytes, HEADER_BYTES)
        _at_most("max.message.bytes", self.max_message_bytes, limits.batch_bytes_max)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("message.timestamp.before.max.ms", self.message_timestamp_before_max_ms, 0)
        _at_least("message.timestamp.after.max.ms", self.message_timestamp_after_max_ms, 0)
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise InvalidConfigError(
                f"min.cleanable.dirty.ratio={ratio!r} must be a number from 0 to 1"
            )
        if self.max_message_bytes > self.segment_bytes:
            raise InvalidConfigError(
                f"max.message.bytes={self.max_message_bytes} exceeds segment.bytes="
                f"{self.segment_bytes}: a maximal batch must fit in one segment"
            )
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise InvalidConfigError(
                f"message.timestamp.type={self.message_timestamp_type!r} must be one of "
                f"{sorted(TIMESTAMP_TYPES)}"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise InvalidConfigError(
                f"compression.type={self.compression_type!r} must be one of "
                f"{', '.join(COMPRESSION_TYPES)} (Samsa supports zstd only among codecs)"
            )
        if not self.cleanup_policy or not self.cleanup_policy <= CLEANUP_POLICIES:
            raise InvalidConfigError(
                f"cleanup.policy={sorted(self.cleanup_policy)} must be a non-empty subset of "
                f"{sorted(CLEANUP_POLICIES)}"
            )


def _at_least(key: str, value: object, smallest: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidConfigError(f"{key} must be an integer, got {value!r}")
    if value < smallest:
        raise InvalidConfigError(f"{key}={value} is below its minimum of {smallest}")


def _at_most(key: str, value: int, largest: int) -> None:
    if value > largest:
        raise InvalidConfigError(f"{key}={value} is above its maximum of {largest}")


def _parse_int(key: str, text: str) -> int:
    try:
        return int(text.strip(), 10)
    except (ValueError, AttributeError):
        raise InvalidConfigError(f"{key}={text!r} is not an integer") from None


def _parse_float(key: str, text: str) -> float:
    try:
        return float(text.strip())
    except (ValueError, AttributeError):
        raise InvalidConfigError(f"{key}={text!r} is not a number") from None


def _parse_timestamp_type(key: str, text: str) -> str:
    if text not in TIMESTAMP_TYPES:
        raise InvalidConfigError(f"{key}={text!r} must be one of {sorted(TIMESTAMP_TYPES)}")
    return text


def _parse_cleanup_policy(key: str, text: str) -> frozenset[str]:
    policies = [part.strip() for part in text.split(",")]
    unknown = [part for part in policies if part not in CLEANUP_POLICIES]
    if unknown or not policies:
        raise InvalidConfigError(
            f'{key}={text!r}: expected delete, compact or "compact,delete" (bad: {unknown})'
        )
    return frozenset(policies)


_PARSERS: dict[str, Callable[[str, str], object]] = {
    "message.timestamp.type": _parse_timestamp_type,
    "cleanup.policy": _parse_cleanup_policy,
    "min.cleanable.dirty.ratio": _parse_float,
    "compression.type": lambda key, text: text,  # checked by validate()
}
