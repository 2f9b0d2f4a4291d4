"""Goal: Kafka users' settings parse the way Kafka parses them, and every mistake — unknown key,
bad value, incoherent combination — fails with a message that names the key, the value and what
to do.

Method: the defaults are compared with Kafka's documented defaults; each rule gets a table of bad
inputs and the phrase its InvalidConfigError must contain; Kafka's silent adjustments (idempotence
off by acks=1, delivery.timeout.ms raised, auto-commit off without a group) are checked both when
the conflicting key is implicit (adjusted) and explicit (rejected).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from samsa.client.config import ConsumerConfig, ProducerConfig
from samsa.common.errors import ErrorCode, InvalidConfigError

SERVERS = {"bootstrap.servers": "localhost:9092"}


def producer(**settings: object) -> ProducerConfig:
    return ProducerConfig.from_dict({**SERVERS, **_dotted(settings)})


def consumer(**settings: object) -> ConsumerConfig:
    return ConsumerConfig.from_dict({**SERVERS, **_dotted(settings)})


def _dotted(settings: dict[str, object]) -> dict[str, object]:
    return {key.replace("_", "."): value for key, value in settings.items()}


def producer_error(settings: dict[str, object]) -> str:
    with pytest.raises(InvalidConfigError) as raised:
        ProducerConfig.from_dict({**SERVERS, **settings})
    assert raised.value.code is ErrorCode.INVALID_CONFIG
    return str(raised.value)


def consumer_error(settings: dict[str, object]) -> str:
    with pytest.raises(InvalidConfigError) as raised:
        ConsumerConfig.from_dict({**SERVERS, **settings})
    return str(raised.value)


# --- defaults -------------------------------------------------------------------------------------


def test_producer_defaults_are_kafkas() -> None:
    config = ProducerConfig.from_dict(SERVERS)
    assert config.to_dict() == {
        "bootstrap.servers": ("localhost:9092",),
        "client.id": "",
        "acks": -1,
        "batch.size": 16384,
        "linger.ms": 5,
        "compression.type": "none",
        "max.request.size": 1048576,
        "retries": 2147483647,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "delivery.timeout.ms": 120000,
        "request.timeout.ms": 30000,
        "max.block.ms": 60000,
        "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 5,
        "transactional.id": None,
        "transaction.timeout.ms": 60000,
        "partitioner.ignore.keys": False,
        "partitioner.adaptive.partitioning.enable": True,
        "partitioner.availability.timeout.ms": 0,
        "buffer.memory": 33554432,
        "metadata.max.idle.ms": 300000,
        "security.protocol": "PLAINTEXT",
        "ssl.ca.location": None,
        "ssl.certificate.location": None,
        "ssl.key.location": None,
        "sasl.mechanism": None,
        "sasl.username": None,
        "sasl.password": None,
        "sasl.oauthbearer.method": None,
        "sasl.oauthbearer.token.endpoint.url": None,
        "sasl.oauthbearer.client.id": None,
        "sasl.oauthbearer.client.secret": None,
        "sasl.oauthbearer.scope": None,
        "sasl.oauthbearer.extensions": None,
    }


def test_consumer_defaults_are_kafkas() -> None:
    config = ConsumerConfig.from_dict({**SERVERS, "group.id": "g"})
    assert config.to_dict() == {
        "bootstrap.servers": ("localhost:9092",),
        "client.id": "",
        "group.id": "g",
        "group.instance.id": None,
        "auto.offset.reset": "latest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 5000,
        "max.poll.records": 500,
        "fetch.min.bytes": 1,
        "fetch.max.bytes": 52428800,
        "fetch.max.wait.ms": 500,
        "max.partition.fetch.bytes": 1048576,
        "isolation.level": "read_uncommitted",
        "session.timeout.ms": 45000,
        "heartbeat.interval.ms": 3000,
        "client.rack": "",
        "max.poll.interval.ms": 300000,
        "group.remote.assignor": "",
        "default.api.timeout.ms": 60000,
        "retry.backoff.ms": 100,
        "security.protocol": "PLAINTEXT",
        "ssl.ca.location": None,
        "ssl.certificate.location": None,
        "ssl.key.location": None,
        "sasl.mechanism": None,
        "sasl.username": None,
        "sasl.password": None,
        "sasl.oauthbearer.method": None,
        "sasl.oauthbearer.token.endpoint.url": None,
        "sasl.oauthbearer.client.id": None,
        "sasl.oauthbearer.client.secret": None,
        "sasl.oauthbearer.scope": None,
        "sasl.oauthbearer.extensions": None,
    }


@pytest.mark.parametrize(
    "config",
    [
        ProducerConfig.from_dict(SERVERS),
        ProducerConfig.from_dict({**SERVERS, "acks": 1, "linger.ms": 100}),
        ConsumerConfig.from_dict(SERVERS),
        ConsumerConfig.from_dict({**SERVERS, "group.id": "g", "group.instance.id": "i-1"}),
    ],
)
def test_to_dict_round_trips(config: ProducerConfig | ConsumerConfig) -> None:
    assert type(config).from_dict(config.to_dict()) == config


def test_configs_are_frozen() -> None:
    config = ProducerConfig.from_dict(SERVERS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.linger_ms = 7  # type: ignore[misc]


# --- value types ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [5, "5", " 5 ", "+5"])
def test_integers_from_ints_and_strings(value: object) -> None:
    assert producer(linger_ms=value).linger_ms == 5


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), ("true", True), ("TRUE", True), (False, False)]
)
def test_booleans_from_bools_and_strings(value: object, expected: bool) -> None:
    assert producer(partitioner_ignore_keys=value).partitioner_ignore_keys is expected


@pytest.mark.parametrize(
    ("value", "expected"), [("all", -1), ("ALL", -1), (-1, -1), ("-1", -1), (1, 1), ("0", 0)]
)
def test_acks_spellings(value: object, expected: int) -> None:
    # acks other than all turn implicit idempotence off (tested below); that is allowed here.
    assert producer(acks=value).acks == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a:1", ("a:1",)),
        ("a:1, b:2 ,", ("a:1", "b:2")),
        (["a:1", "b:2"], ("a:1", "b:2")),
        (("[::1]:9092",), ("[::1]:9092",)),
    ],
)
def test_bootstrap_servers_spellings(value: object, expected: tuple[str, ...]) -> None:
    assert ProducerConfig.from_dict({"bootstrap.servers": value}).bootstrap_servers == expected


def test_choices_are_case_insensitive_and_normalised() -> None:
    assert producer(compression_type="ZSTD").compression_type == "zstd"
    assert consumer(isolation_level="Read_Uncommitted").isolation_level == "read_uncommitted"
    assert consumer(group_remote_assignor="Range").group_remote_assignor == "range"


def test_read_committed_is_accepted() -> None:
    config = ConsumerConfig.from_dict({**SERVERS, "isolation.level": "read_committed"})
    assert config.isolation_level == "read_committed"


# --- unknown keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("linger_ms", "linger.ms"),
        ("lingr.ms", "linger.ms"),
        ("LINGER.MS", "linger.ms"),
        ("batch_size", "batch.size"),
        ("enable.idempotency", "enable.idempotence"),
        ("bootstrap_servers", "bootstrap.servers"),
    ],
)
def test_unknown_key_suggests_the_closest(key: str, suggestion: str) -> None:
    message = producer_error({key: 1})
    assert f"Unknown producer configuration {key!r}" in message
    assert f"did you mean {suggestion!r}?" in message


def test_unknown_key_without_a_close_match_lists_the_known_keys() -> None:
    message = producer_error({"zzzz": 1})
    assert "'zzzz'" in message and "known keys are" in message and "linger.ms" in message


def test_a_consumer_key_given_to_a_producer_says_so() -> None:
    assert "'group.id': it is a consumer configuration" in producer_error({"group.id": "g"})
    assert "'linger.ms': it is a producer configuration" in consumer_error({"linger.ms": 1})


def test_non_string_key() -> None:
    assert "keys are strings" in producer_error({5: 1})  # type: ignore[dict-item]


def test_not_a_mapping() -> None:
    with pytest.raises(InvalidConfigError, match="dict of Kafka keys"):
        ProducerConfig.from_dict([("linger.ms", 1)])  # type: ignore[arg-type]


def test_missing_bootstrap_servers() -> None:
    for from_dict in (ProducerConfig.from_dict, ConsumerConfig.from_dict):
        with pytest.raises(InvalidConfigError, match="Missing required configuration bootstrap"):
            from_dict({})


# --- bad values -----------------------------------------------------------------------------------

PRODUCER_BAD_VALUES = [
    ("linger.ms", -1, "must be an integer between 0 and 9223372036854775807"),
    ("linger.ms", "5ms", "must be an integer between 0"),
    ("linger.ms", 5.0, "must be an integer between 0"),
    ("linger.ms", True, "must be an integer between 0"),
    ("linger.ms", None, "must be an integer between 0"),
    ("batch.size", 2**31, "must be an integer between 0 and 2147483647"),
    ("batch.size", "", "must be an integer"),
    ("retries", -1, "must be an integer between 0 and 2147483647"),
    ("max.request.size", 2**30, "must be an integer between 0 and 67108864"),
    ("max.in.flight.requests.per.connection", 0, "between 1 and"),
    ("delivery.timeout.ms", 2**31, "between 0 and 2147483647"),
    ("request.timeout.ms", -5, "between 0 and"),
    ("retry.backoff.ms", "x", "must be an integer"),
    ("retry.backoff.max.ms", -1, "must be an integer"),
    ("buffer.memory", -1, "must be an integer"),
    ("metadata.max.idle.ms", 4_999, "between 5000 and 9223372036854775807"),  # Kafka's bound
    ("metadata.max.idle.ms", "5m", "must be an integer"),
    ("max.block.ms", [], "must be an integer"),
    ("transaction.timeout.ms", 0, "between 1 and"),
    ("acks", 2, 'must be one of "all", -1, 0, 1'),
    ("acks", "leader", 'must be one of "all", -1, 0, 1'),
    ("acks", True, 'must be one of "all", -1, 0, 1'),
    ("enable.idempotence", "yes", "must be true or false"),
    ("enable.idempotence", 1, "must be true or false"),
    ("partitioner.ignore.keys", None, "must be true or false"),
    ("compression.type", "brotli", "must be one of none, zstd"),
    ("compression.type", 4, "must be one of none, zstd"),
    ("client.id", 5, "must be a string"),
    ("transactional.id", "", "must be null or a non-empty string"),
    ("transactional.id", 7, "must be null or a non-empty string"),
    ("bootstrap.servers", "", "must be a non-empty list of host:port"),
    ("bootstrap.servers", "localhost", "is not a host:port address"),
    ("bootstrap.servers", "localhost:0", "is not a host:port address"),
    ("bootstrap.servers", "localhost:70000", "is not a host:port address"),
    ("bootstrap.servers", "localhost:x", "is not a host:port address"),
    ("bootstrap.servers", ":9092", "is not a host:port address"),
    ("bootstrap.servers", ["a:1", 5], "must be a non-empty list of host:port"),
    ("bootstrap.servers", 9092, "must be a non-empty list of host:port"),
]


@pytest.mark.parametrize(("key", "value", "allowed"), PRODUCER_BAD_VALUES)
def test_producer_bad_value_names_key_value_and_rule(key: str, value: object, allowed: str) -> None:
    message = producer_error({key: value})
    assert message.startswith(f"Invalid value {value!r} for configuration {key}: ")
    assert allowed in message


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "GZIP"])
def test_kafka_codecs_samsa_lacks_say_use_zstd(codec: str) -> None:
    message = producer_error({"compression.type": codec})
    assert f"{codec.lower()} is not supported by Samsa, use zstd" in message


CONSUMER_BAD_VALUES = [
    ("auto.offset.reset", "smallest", "must be one of latest, earliest, none"),
    ("isolation.level", "serializable", "must be one of read_uncommitted, read_committed"),
    ("enable.auto.commit", "on", "must be true or false"),
    ("max.poll.records", 0, "between 1 and 2147483647"),
    ("fetch.min.bytes", -1, "between 0 and"),
    ("fetch.max.bytes", 2**30, "between 0 and 82837504"),
    ("max.partition.fetch.bytes", 2**30, "between 0 and 67108864"),
    ("fetch.max.wait.ms", "soon", "must be an integer"),
    ("session.timeout.ms", 0, "between 1 and"),
    ("heartbeat.interval.ms", 0, "between 1 and"),
    ("auto.commit.interval.ms", -1, "between 0 and"),
    ("group.id", "", "must be null or a non-empty string"),
    ("group.instance.id", "", "must be null or a non-empty string of at most 249"),
    ("group.instance.id", "has space", "[a-zA-Z0-9._-]"),
    ("group.instance.id", "x" * 250, "at most 249 characters"),
    ("client.rack", None, "must be a string"),
]


@pytest.mark.parametrize(("key", "value", "allowed"), CONSUMER_BAD_VALUES)
def test_consumer_bad_value_names_key_value_and_rule(key: str, value: object, allowed: str) -> None:
    message = consumer_error({"group.id": "g", key: value})
    assert message.startswith(f"Invalid value {value!r} for configuration {key}: ")
    assert allowed in message


# --- combinations: the producer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "phrase"),
    [
        ({"enable.idempotence": True, "acks": 1}, "Must set acks to all"),
        ({"enable.idempotence": "true", "acks": "0"}, "Must set acks to all"),
        ({"enable.idempotence": True, "retries": 0}, "Must set retries to non-zero"),
        ({"max.in.flight.requests.per.connection": 6}, "must be set to at most 5. Current value"),
        (
            {"enable.idempotence": True, "max.in.flight.requests.per.connection": 10},
            "must be set to at most 5",
        ),
        (
            {"transactional.id": "tx", "enable.idempotence": False},
            "Cannot set a transactional.id without also enabling idempotence",
        ),
        (
            {"transactional.id": "tx", "acks": 1},
            "Cannot set a transactional.id without also enabling idempotence",
        ),
        (
            {"delivery.timeout.ms": 30000},
            "delivery.timeout.ms (30000) should be equal to or larger than linger.ms + "
            "request.timeout.ms (5 + 30000)",
        ),
        (
            {"delivery.timeout.ms": 1000, "linger.ms": 0, "request.timeout.ms": 1001},
            "should be equal to or larger than linger.ms + request.timeout.ms",
        ),
        (
            {"batch.size": 2_000_000},
            "batch.size (2000000) must be at most max.request.size (1048576)",
        ),
        (
            {"buffer.memory": 1000},
            "buffer.memory (1000) must be at least batch.size (16384)",
        ),
    ],
)
def test_incoherent_producer_combinations(settings: dict[str, object], phrase: str) -> None:
    assert phrase in producer_error(settings)


@pytest.mark.parametrize(("settings"), [{"acks": 1}, {"acks": 0}, {"retries": 0}])
def test_implicit_idempotence_is_turned_off_by_conflicting_settings(
    settings: dict[str, object],
) -> None:
    """Kafka: enable.idempotence defaults to true but yields to acks != all or retries=0 when the
    user did not ask for idempotence explicitly."""
    assert ProducerConfig.from_dict({**SERVERS, **settings}).enable_idempotence is False


def test_idempotence_off_allows_more_in_flight() -> None:
    config = producer(enable_idempotence=False, max_in_flight_requests_per_connection=20)
    assert config.max_in_flight_requests_per_connection == 20


def test_transactional_producer_with_defaults_is_fine() -> None:
    config = producer(transactional_id="orders-1")
    assert config.transactional_id == "orders-1" and config.enable_idempotence


def test_implicit_delivery_timeout_is_raised_to_linger_plus_request_timeout() -> None:
    """Kafka's configureDeliveryTimeout: only an explicit delivery.timeout.ms is an error."""
    config = producer(linger_ms=100_000, request_timeout_ms=50_000)
    assert config.delivery_timeout_ms == 150_000


def test_delivery_timeout_equal_to_the_sum_is_enough() -> None:
    assert producer(delivery_timeout_ms=30_005).delivery_timeout_ms == 30_005


def test_backoff_above_its_max_is_accepted_as_static() -> None:
    """Kafka only warns and applies retry.backoff.max.ms as a static backoff."""
    config = producer(retry_backoff_ms=5000)
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms) == (5000, 1000)


def test_batch_size_zero_disables_batching_and_is_valid() -> None:
    assert producer(batch_size=0).batch_size == 0


# --- combinations: the consumer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "phrase"),
    [
        (
            {"group.id": "g", "heartbeat.interval.ms": 45000},
            "heartbeat.interval.ms (45000) must be lower than session.timeout.ms (45000)",
        ),
        (
            {"group.id": "g", "session.timeout.ms": 1000},
            "heartbeat.interval.ms (3000) must be lower than session.timeout.ms (1000)",
        ),
        ({"enable.auto.commit": True}, "enable.auto.commit cannot be set to true when no group"),
        ({"group.instance.id": "i-1"}, "group.instance.id (static membership) requires"),
    ],
)
def test_incoherent_consumer_combinations(settings: dict[str, object], phrase: str) -> None:
    assert phrase in consumer_error(settings)


def test_auto_commit_is_off_without_a_group_unless_asked_for() -> None:
    assert consumer().enable_auto_commit is False
    assert consumer(group_id="g").enable_auto_commit is True
    assert consumer(group_id="g", enable_auto_commit="false").enable_auto_commit is False


def test_every_message_is_actionable() -> None:
    """A sample of each kind reads as a sentence naming the key (no bare 'invalid config')."""
    messages = [
        producer_error({"linger_ms": 1}),
        producer_error({"linger.ms": -1}),
        producer_error({"enable.idempotence": True, "acks": 1}),
        consumer_error({"group.instance.id": "i"}),
    ]
    for message in messages:
        assert re.search(r"[a-z]+\.[a-z.]+", message), message
        assert len(message) > 30, message
