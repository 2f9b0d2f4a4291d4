"""How one configuration value is parsed, by Kafka's types and rules: Java's int and long ranges,
booleans and choices as Kafka's properties files spell them, `acks`, `compression.type` and
`bootstrap.servers`. Each parser takes (key, value) and returns the parsed value or raises
InvalidConfigError with a message naming the key, the value and what is allowed. config.py puts
them together into the producer's and the consumer's settings. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from samsa.common import limits
from samsa.common.errors import InvalidConfigError

# Java's int and long ranges: Kafka types each setting as one or the other, and a value a Java
# client would reject must not be accepted here.
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

# The idempotent producer keeps at most this many batches in flight per partition: the broker
# remembers the last 5 batches per producer per partition to answer duplicates (DESIGN §5).
IDEMPOTENCE_IN_FLIGHT_MAX = 5

COMPRESSION_TYPES = ("none", "zstd")
# Kafka's other codecs: named so that the error can say "not supported" rather than "unknown".
COMPRESSION_TYPES_UNSUPPORTED = ("gzip", "snappy", "lz4")

# A fetch response (and its envelope) must fit one gRPC message.
FETCH_ENVELOPE_BYTES = 1 * limits.MIB
FETCH_BYTES_MAX = limits.grpc_message_bytes_max - FETCH_ENVELOPE_BYTES

# Kafka's rule for group.instance.id: a topic name's legal characters and length.
_LEGAL_ID = re.compile(r"[a-zA-Z0-9._-]+")
_ID_LENGTH_MAX = limits.topic_name_length_max

Parse = Callable[[str, object], Any]


def invalid_value(key: str, value: object, allowed: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {value!r} for configuration {key}: {allowed}")


def integer_between(minimum: int, maximum: int) -> Parse:
    """An int (or a decimal string of one) in [minimum, maximum]."""

    def parse(key: str, value: object) -> int:
        allowed = f"must be an integer between {minimum} and {maximum}"
        if isinstance(value, bool):
            raise invalid_value(key, value, allowed)
        if isinstance(value, str):
            text = value.strip()
            if not re.fullmatch(r"[+-]?[0-9]+", text):
                raise invalid_value(key, value, allowed)
            value = int(text)
        if not isinstance(value, int) or not minimum <= value <= maximum:
            raise invalid_value(key, value, allowed)
        return value

    return parse


def parse_boolean(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise invalid_value(key, value, "must be true or false")


def one_of(*options: str) -> Parse:
    def parse(key: str, value: object) -> str:
        if isinstance(value, str) and value.strip().lower() in options:
            return value.strip().lower()
        raise invalid_value(key, value, "must be one of " + ", ".join(options))

    return parse


def parse_string(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise invalid_value(key, value, "must be a string")
    return value


def parse_client_id(key: str, value: object) -> str:
    """A string of at most limits.client_id_length_max characters: brokers count a longer one
    under the default quota entity, and quotas cannot name it."""
    text = parse_string(key, value)
    if len(text) > limits.client_id_length_max:
        raise invalid_value(key, value, f"must be at most {limits.client_id_length_max} characters")
    return text


def parse_optional_id(key: str, value: object) -> str | None:
    """None, or a non-empty string of Kafka's legal id characters."""
    if value is None:
        return None
    allowed = (
        f"must be null or a non-empty string of at most {_ID_LENGTH_MAX} characters "
        "from [a-zA-Z0-9._-]"
    )
    if not isinstance(value, str) or not _LEGAL_ID.fullmatch(value) or len(value) > _ID_LENGTH_MAX:
        raise invalid_value(key, value, allowed)
    return value


def parse_optional_nonempty(key: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise invalid_value(key, value, "must be null or a non-empty string")
    return value


def parse_acks(key: str, value: object) -> int:
    """Kafka's acks: "all" or -1 (the in-sync replicas), 1 (the leader), 0 (no answer)."""
    allowed = 'must be one of "all", -1, 0, 1'
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "all":
            return -1
        if text in ("-1", "0", "1"):
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool) and value in (-1, 0, 1):
        return value
    raise invalid_value(key, value, allowed)


def parse_compression(key: str, value: object) -> str:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in COMPRESSION_TYPES:
            return text
        if text in COMPRESSION_TYPES_UNSUPPORTED:
            raise invalid_value(key, value, f"{text} is not supported by Samsa, use zstd (or none)")
    raise invalid_value(key, value, "must be one of " + ", ".join(COMPRESSION_TYPES))


def parse_servers(key: str, value: object) -> tuple[str, ...]:
    """A comma-separated string or a list of `host:port` (IPv6 as `[::1]:9092`)."""
    allowed = "must be a non-empty list of host:port addresses (a list or a comma-separated string)"
    if isinstance(value, str):
        entries = [entry.strip() for entry in value.split(",")]
    elif isinstance(value, list | tuple):
        entries = [entry.strip() if isinstance(entry, str) else entry for entry in value]
    else:
        raise invalid_value(key, value, allowed)
    entries = [entry for entry in entries if entry != ""]
    if not entries:
        raise invalid_value(key, value, allowed)
    for entry in entries:
        if not isinstance(entry, str):
            raise invalid_value(key, value, allowed)
        host, _, port = entry.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise invalid_value(
                key, value, f"{entry!r} is not a host:port address with a port 1-65535"
            )
    return tuple(entries)
