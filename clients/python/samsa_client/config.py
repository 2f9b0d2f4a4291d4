"""Producer and consumer configuration with Kafka's key names, Kafka's defaults and Kafka's rules.

Theory of operation. Users bring their Kafka habits (DESIGN §8): a `dict` such as
`{"bootstrap.servers": "localhost:9092", "linger.ms": "5", "acks": "all"}` becomes a frozen
`ProducerConfig` / `ConsumerConfig` through `from_dict`. Parsing happens in three steps, each with a
message that names the key, the value and what is allowed:

1. every key must be known for that role — an unknown key is an error (Kafka only logs a warning,
   which hides typos such as `linger_ms`); the message suggests the closest known key, and says so
   when the key belongs to the other role (`group.id` given to a producer);
2. every value is parsed by its setting's rule (config_values.py): ints as Python ints or
   decimal strings (`"5"`, Kafka's properties files are all strings), within Java's int or long
   range and the setting's lower bound; booleans as bools or `"true"`/`"false"`; choices
   case-insensitively;
3. the combination is checked with Kafka's own post-processing rules (ProducerConfig
   `postProcessAndValidateIdempotenceConfigs`, KafkaProducer `configureDeliveryTimeout`,
   ConsumerConfig `maybeOverrideEnableAutoCommit`, the heartbeat/session check), plus a few of
   Samsa's own that Kafka leaves to fail later (a full batch must fit one request; sizes must fit
   the hard limits of `samsa.common.limits`).

Where Kafka silently adjusts a setting the user did not give (idempotence turned off by `acks=1`,
`delivery.timeout.ms` raised to `linger.ms + request.timeout.ms`, auto-commit off without a group),
Samsa does the same; where the user gave the conflicting setting explicitly, it is an error.

The dataclass fields are the keys with dots turned into underscores (`linger.ms` -> `linger_ms`);
`to_dict()` gives the effective settings back under Kafka's names. Pure: no I/O, no environment.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from samsa.client.config_values import (
    FETCH_BYTES_MAX,
    IDEMPOTENCE_IN_FLIGHT_MAX,
    INT_MAX,
    LONG_MAX,
    Parse,
    integer_between,
    one_of,
    parse_acks,
    parse_boolean,
    parse_client_id,
    parse_compression,
    parse_optional_id,
    parse_optional_nonempty,
    parse_servers,
    parse_string,
)
from samsa.client.metadata_topics import METADATA_MAX_IDLE_MS
from samsa.common import limits
from samsa.common.errors import InvalidConfigError

__all__ = ["ConsumerConfig", "ProducerConfig"]


class _Required:
    """Marks a setting without a default (Kafka: `bootstrap.servers`)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclasses.dataclass(frozen=True, slots=True)
class _Setting:
    key: str
    parse: Parse
    default: object

    @property
    def attribute(self) -> str:
        return self.key.replace(".", "_")


_INT = integer_between(0, INT_MAX)
_LONG = integer_between(0, LONG_MAX)

# TLS and SASL, as Kafka's clients name them (samsa.common.tls.CLIENT_KEYS), for producers and
# consumers alike. Only their shape is checked here: the client checks them together and reads
# the files they name when it is built (client_tls.py), as this module does no I/O.
TLS_SETTINGS: tuple[_Setting, ...] = (
    _Setting("security.protocol", parse_string, "PLAINTEXT"),
    _Setting("ssl.ca.location", parse_optional_nonempty, None),
    _Setting("ssl.certificate.location", parse_optional_nonempty, None),
    _Setting("ssl.key.location", parse_optional_nonempty, None),
    _Setting("sasl.mechanism", parse_optional_nonempty, None),
    _Setting("sasl.username", parse_optional_nonempty, None),
    _Setting("sasl.password", parse_optional_nonempty, None),
    _Setting("sasl.oauthbearer.method", parse_optional_nonempty, None),
    _Setting("sasl.oauthbearer.token.endpoint.url", parse_optional_nonempty, None),
    _Setting("sasl.oauthbearer.client.id", parse_optional_nonempty, None),
    _Setting("sasl.oauthbearer.client.secret", parse_optional_nonempty, None),
    _Setting("sasl.oauthbearer.scope", parse_optional_nonempty, None),
    _Setting("sasl.oauthbearer.extensions", parse_optional_nonempty, None),
)

PRODUCER_SETTINGS: tuple[_Setting, ...] = (
    _Setting("bootstrap.servers", parse_servers, REQUIRED),
    _Setting("client.id", parse_client_id, ""),
    _Setting("acks", parse_acks, -1),  # "all" since Kafka 3.0 (KIP-679)
    _Setting("batch.size", _INT, 16_384),
    _Setting("linger.ms", _LONG, 5),  # 5 since Kafka 4.0 (KIP-1030), was 0
    _Setting("compression.type", parse_compression, "none"),
    _Setting("max.request.size", integer_between(0, limits.batch_bytes_max), 1 * limits.MIB),
    _Setting("retries", _INT, INT_MAX),
    _Setting("retry.backoff.ms", _LONG, 100),
    _Setting("retry.backoff.max.ms", _LONG, 1_000),  # KIP-580
    _Setting("delivery.timeout.ms", _INT, 120_000),
    _Setting("request.timeout.ms", _INT, 30_000),
    _Setting("max.block.ms", _LONG, 60_000),
    _Setting("enable.idempotence", parse_boolean, True),
    _Setting("max.in.flight.requests.per.connection", integer_between(1, INT_MAX), 5),
    _Setting("transactional.id", parse_optional_nonempty, None),
    _Setting("transaction.timeout.ms", integer_between(1, INT_MAX), 60_000),
    _Setting("partitioner.ignore.keys", parse_boolean, False),
    # KIP-794: keyless records go less to partitions whose batches pile up (partitioner.py).
    _Setting("partitioner.adaptive.partitioning.enable", parse_boolean, True),
    _Setting("partitioner.availability.timeout.ms", _LONG, 0),  # 0: off, as in Kafka
    _Setting("buffer.memory", _LONG, 32 * limits.MIB),
    # A topic not produced to for this long leaves the metadata (metadata_topics.py); Kafka's
    # lower bound.
    _Setting("metadata.max.idle.ms", integer_between(5_000, LONG_MAX), METADATA_MAX_IDLE_MS),
    *TLS_SETTINGS,
)

CONSUMER_SETTINGS: tuple[_Setting, ...] = (
    _Setting("bootstrap.servers", parse_servers, REQUIRED),
    _Setting("client.id", parse_client_id, ""),
    _Setting("group.id", parse_optional_nonempty, None),
    _Setting("group.instance.id", parse_optional_id, None),
    _Setting("auto.offset.reset", one_of("latest", "earliest", "none"), "latest"),
    _Setting("enable.auto.commit", parse_boolean, True),
    _Setting("auto.commit.interval.ms", _INT, 5_000),
    _Setting("max.poll.records", integer_between(1, INT_MAX), 500),
    _Setting("fetch.min.bytes", _INT, 1),
    _Setting("fetch.max.bytes", integer_between(0, FETCH_BYTES_MAX), 50 * limits.MIB),
    _Setting("fetch.max.wait.ms", _INT, 500),
    _Setting(
        "max.partition.fetch.bytes",
        integer_between(0, limits.fetch_partition_bytes_max),
        1 * limits.MIB,
    ),
    _Setting("isolation.level", one_of("read_uncommitted", "read_committed"), "read_uncommitted"),
    _Setting("session.timeout.ms", integer_between(1, INT_MAX), 45_000),
    _Setting("heartbeat.interval.ms", integer_between(1, INT_MAX), 3_000),
    _Setting("client.rack", parse_string, ""),
    _Setting("max.poll.interval.ms", integer_between(1, INT_MAX), 300_000),
    _Setting("group.remote.assignor", one_of("", "uniform", "range", "roundrobin"), ""),
    _Setting("default.api.timeout.ms", integer_between(1, INT_MAX), 60_000),
    _Setting("retry.backoff.ms", _INT, 100),
    *TLS_SETTINGS,
)


def _parse_settings(
    role: str,
    settings: tuple[_Setting, ...],
    other_role: str,
    other_settings: tuple[_Setting, ...],
    given: Mapping[str, object],
) -> dict[str, Any]:
    """Steps 1 and 2 of the module doc: known keys, parsed values, defaults filled in."""
    if not isinstance(given, Mapping):
        raise InvalidConfigError(
            f"a {role} configuration is a dict of Kafka keys to values, got {type(given).__name__}"
        )
    by_key = {setting.key: setting for setting in settings}
    values: dict[str, Any] = {}
    for key, value in given.items():
        setting = by_key.get(key) if isinstance(key, str) else None
        if setting is None:
            raise _unknown_key(role, by_key, other_role, other_settings, key)
        values[setting.attribute] = setting.parse(key, value)
    for setting in settings:
        if setting.attribute in values:
            continue
        if setting.default is REQUIRED:
            raise InvalidConfigError(
                f"Missing required configuration {setting.key} which has no default value"
            )
        values[setting.attribute] = setting.default
    return values


def _unknown_key(
    role: str,
    by_key: Mapping[str, _Setting],
    other_role: str,
    other_settings: tuple[_Setting, ...],
    key: object,
) -> InvalidConfigError:
    if not isinstance(key, str):
        return InvalidConfigError(f"{role} configuration keys are strings, got {key!r}")
    message = f"Unknown {role} configuration {key!r}"
    if any(setting.key == key for setting in other_settings):
        return InvalidConfigError(f"{message}: it is a {other_role} configuration")
    # Users write linger_ms or LINGER.MS as often as they misspell: compare in Kafka's spelling.
    spelled = key.strip().lower().replace("_", ".")
    close = difflib.get_close_matches(spelled, list(by_key), n=1, cutoff=0.6)
    if close:
        return InvalidConfigError(f"{message}: did you mean {close[0]!r}?")
    return InvalidConfigError(f"{message}: known keys are {', '.join(sorted(by_key))}")


def _validate_idempotence(values: dict[str, Any], given: Mapping[str, object]) -> None:
    """Kafka's ProducerConfig.postProcessAndValidateIdempotenceConfigs, rule for rule."""
    explicit = "enable.idempotence" in given
    if values["enable_idempotence"]:
        if values["retries"] == 0:
            if explicit:
                raise InvalidConfigError(
                    "Must set retries to non-zero when using the idempotent producer "
                    "(enable.idempotence=true)"
                )
            values["enable_idempotence"] = False  # Kafka: idempotence disabled by retries=0
        if values["acks"] != -1:
            if explicit:
                raise InvalidConfigError(
                    f"Must set acks to all in order to use the idempotent producer "
                    f"(enable.idempotence=true, acks={values['acks']}): otherwise idempotence "
                    "cannot be guaranteed"
                )
            values["enable_idempotence"] = False  # Kafka: idempotence disabled by acks != all
        in_flight = values["max_in_flight_requests_per_connection"]
        if in_flight > IDEMPOTENCE_IN_FLIGHT_MAX:
            raise InvalidConfigError(
                f"To use the idempotent producer, max.in.flight.requests.per.connection must be "
                f"set to at most {IDEMPOTENCE_IN_FLIGHT_MAX}. Current value is {in_flight} "
                "(or set enable.idempotence=false)"
            )
    if values["transactional_id"] is not None and not values["enable_idempotence"]:
        raise InvalidConfigError(
            "Cannot set a transactional.id without also enabling idempotence "
            "(enable.idempotence=true, acks=all, retries > 0)"
        )


def _validate_producer(values: dict[str, Any], given: Mapping[str, object]) -> None:
    _validate_idempotence(values, given)
    # KafkaProducer.configureDeliveryTimeout: a record must get at least one full attempt.
    linger_and_request_timeout_ms = min(values["linger_ms"] + values["request_timeout_ms"], INT_MAX)
    if values["delivery_timeout_ms"] < linger_and_request_timeout_ms:
        if "delivery.timeout.ms" in given:
            raise InvalidConfigError(
                f"delivery.timeout.ms ({values['delivery_timeout_ms']}) should be equal to or "
                f"larger than linger.ms + request.timeout.ms ({values['linger_ms']} + "
                f"{values['request_timeout_ms']})"
            )
        values["delivery_timeout_ms"] = linger_and_request_timeout_ms
    # Samsa's own: a full batch must fit in one request, or it could never be sent.
    if values["batch_size"] > values["max_request_size"]:
        raise InvalidConfigError(
            f"batch.size ({values['batch_size']}) must be at most max.request.size "
            f"({values['max_request_size']}): a full batch must fit in one request"
        )
    if values["buffer_memory"] < values["batch_size"]:
        raise InvalidConfigError(
            f"buffer.memory ({values['buffer_memory']}) must be at least batch.size "
            f"({values['batch_size']}): the producer must be able to buffer one full batch"
        )


def _validate_consumer(values: dict[str, Any], given: Mapping[str, object]) -> None:
    if values["heartbeat_interval_ms"] >= values["session_timeout_ms"]:
        raise InvalidConfigError(
            f"heartbeat.interval.ms ({values['heartbeat_interval_ms']}) must be lower than "
            f"session.timeout.ms ({values['session_timeout_ms']}); Kafka advises at most a third"
        )
    if values["group_id"] is None:
        if values["enable_auto_commit"] and "enable.auto.commit" in given:
            raise InvalidConfigError(
                "enable.auto.commit cannot be set to true when no group.id is set: "
                "offsets are committed for a group"
            )
        values["enable_auto_commit"] = False  # Kafka: no group, nothing to commit to
        if values["group_instance_id"] is not None:
            raise InvalidConfigError("group.instance.id (static membership) requires a group.id")


def _to_dict(config: object, settings: tuple[_Setting, ...]) -> dict[str, object]:
    return {setting.key: getattr(config, setting.attribute) for setting in settings}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig:
    """The producer's settings (Kafka's names with underscores); build it with `from_dict`."""

    SETTINGS: ClassVar[tuple[_Setting, ...]] = PRODUCER_SETTINGS

    bootstrap_servers: tuple[str, ...]
    client_id: str
    acks: int
    batch_size: int
    linger_ms: int
    compression_type: str
    max_request_size: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    max_block_ms: int
    enable_idempotence: bool
    max_in_flight_requests_per_connection: int
    transactional_id: str | None
    transaction_timeout_ms: int
    partitioner_ignore_keys: bool
    partitioner_adaptive_partitioning_enable: bool
    partitioner_availability_timeout_ms: int
    buffer_memory: int
    metadata_max_idle_ms: int
    security_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    sasl_mechanism: str | None
    sasl_username: str | None
    sasl_password: str | None = dataclasses.field(repr=False)  # in no log line
    sasl_oauthbearer_method: str | None
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_oauthbearer_client_id: str | None
    sasl_oauthbearer_client_secret: str | None = dataclasses.field(repr=False)  # in no log line
    sasl_oauthbearer_scope: str | None
    sasl_oauthbearer_extensions: str | None

    @classmethod
    def from_dict(cls, settings: Mapping[str, object]) -> Self:
        """Parse Kafka-named settings; InvalidConfigError names the key, value and the rule."""
        values = _parse_settings(
            "producer", PRODUCER_SETTINGS, "consumer", CONSUMER_SETTINGS, settings
        )
        _validate_producer(values, settings)
        return cls(**values)

    def to_dict(self) -> dict[str, object]:
        """The effective settings under Kafka's names."""
        return _to_dict(self, PRODUCER_SETTINGS)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    """The consumer's settings (Kafka's names with underscores); build it with `from_dict`."""

    SETTINGS: ClassVar[tuple[_Setting, ...]] = CONSUMER_SETTINGS

    bootstrap_servers: tuple[str, ...]
    client_id: str
    group_id: str | None
    group_instance_id: str | None
    auto_offset_reset: str
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    max_poll_records: int
    fetch_min_bytes: int
    fetch_max_bytes: int
    fetch_max_wait_ms: int
    max_partition_fetch_bytes: int
    isolation_level: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    client_rack: str
    max_poll_interval_ms: int
    group_remote_assignor: str
    default_api_timeout_ms: int
    retry_backoff_ms: int
    security_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    sasl_mechanism: str | None
    sasl_username: str | None
    sasl_password: str | None = dataclasses.field(repr=False)  # in no log line
    sasl_oauthbearer_method: str | None
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_oauthbearer_client_id: str | None
    sasl_oauthbearer_client_secret: str | None = dataclasses.field(repr=False)  # in no log line
    sasl_oauthbearer_scope: str | None
    sasl_oauthbearer_extensions: str | None

    @classmethod
    def from_dict(cls, settings: Mapping[str, object]) -> Self:
        """Parse Kafka-named settings; InvalidConfigError names the key, value and the rule."""
        values = _parse_settings(
            "consumer", CONSUMER_SETTINGS, "producer", PRODUCER_SETTINGS, settings
        )
        _validate_consumer(values, settings)
        return cls(**values)

    def to_dict(self) -> dict[str, object]:
        """The effective settings under Kafka's names."""
        return _to_dict(self, CONSUMER_SETTINGS)


# Every setting has a field and every field a setting: a key added to one list but not the
# dataclass (or the reverse) fails at import, not when a user first sets it.
for _config_class, _settings in (
    (ProducerConfig, PRODUCER_SETTINGS),
    (ConsumerConfig, CONSUMER_SETTINGS),
):
    assert [f.name for f in dataclasses.fields(_config_class)] == [s.attribute for s in _settings]
