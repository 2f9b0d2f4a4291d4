"""The source's options, as Spark's Kafka connector (spark-sql-kafka) names them, parsed and
checked: each error names the option and what to write instead.

- `samsa.bootstrap.servers` (required); every `samsa.*` key is checked here as a consumer checks
  its settings (a misspelt key is an error naming it); `samsa.auto.offset.reset` and
  `samsa.enable.auto.commit` are refused (the source decides those, as the Kafka connector
  does), and `samsa.isolation.level` is the `isolation.level` option. The source reads with an
  Admin and a Consumer on the driver and a range reader in the tasks, which take
  `samsa.client.id`, `samsa.request.timeout.ms` (the Admin's and the tasks'),
  `samsa.default.api.timeout.ms` and `samsa.retry.backoff.ms` (the Consumer's) without the
  prefix (`admin_config`, `consumer_config`); any other key a consumer takes changes nothing
  here, and a warning names it (Kafka's clients warn of a setting supplied but not used).
  TLS (`samsa.security.protocol`, `samsa.ssl.ca.location`, `samsa.ssl.certificate.location`,
  `samsa.ssl.key.location`) and SASL/SCRAM (`samsa.security.protocol=SASL_SSL`,
  `samsa.sasl.mechanism`, `samsa.sasl.username`, `samsa.sasl.password`; for OAUTHBEARER the
  `samsa.sasl.oauthbearer.*` keys instead): the keys of
  samsa.common.tls.CLIENT_KEYS go to every one of those clients, the tasks' producers included,
  which read the files, refuse a setting that cannot work and each log in on its first call.
- Exactly one of `subscribe` (topics, comma-separated), `subscribePattern` (a regex), `assign`
  (JSON `{"topic": [0, 1]}`). The pattern is RE2 matched against whole topic names, internal
  topics (`__*`) never, exactly as a consumer group's regex (samsa.common.topic_regex): the same
  pattern names the same topics here as in a group subscription.
- `startingOffsets`: `earliest` (the batch default), `latest` (the streaming default), or JSON
  `{"topic": {"0": 23, "1": -2}}` (-2 earliest, -1 latest); `endingOffsets`: `latest` (the
  default) or JSON (-1 latest).
- By time (ms since the epoch; each resolves to the first offset whose timestamp is at least
  that): `startingTimestamp` (every partition) or `startingOffsetsByTimestamp` (JSON
  `{"topic": {"0": 1700000000000}}`), which take precedence over `startingOffsets` in that
  order; `startingOffsetsByTimestampStrategy` says what a partition with no record that late
  does: `error` (the default) or `latest`. Likewise `endingTimestamp` /
  `endingOffsetsByTimestamp` (no record that late: the partition's end).
- `includeHeaders` (false), `isolation.level` (`read_committed`, the default, or
  `read_uncommitted`), `failOnDataLoss` (true), `minPartitions` (split large ranges so that there
  are at least this many tasks); streaming: `maxOffsetsPerTrigger` and `minOffsetsPerTrigger`
  (admission control, records per micro-batch; both together: the minimum, at most the
  maximum, min <= max), and `maxTriggerDelay` (15m: how long
  minOffsetsPerTrigger may hold records back; a number with ms, s, m, h or d).

Offsets travel as canonical JSON (sorted keys, no spaces): Spark compares offsets as strings.
The JSON options are read strictly: an offset or timestamp is a JSON integer (true, 12.5 and
"12" are refused, not read as 1, 12 and 12), a partition is a number as Spark writes it ("0",
not "00" or " 0"), and a topic or partition named twice is refused, not the last one taken.
Pure: no I/O.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from samsa.client.config import ConsumerConfig
from samsa.client.controller_calls import admin_timeouts
from samsa.common.errors import InvalidConfigError
from samsa.common.tls import CLIENT_KEYS
from samsa.common.topic_regex import matcher, pattern_error

EARLIEST, LATEST = -2, -1
LONG_LIMIT = 2**63  # offsets and timestamps are longs (int64) on the wire
TopicPartition = tuple[str, int]
Times = int | dict[str, dict[int, int]]  # one timestamp (ms) for all, or per partition
# Internal topics (__consumer_offsets, __transaction_state) match no pattern, as in a group's
# subscription and Kafka's consumer (exclude.internal.topics).
INTERNAL_TOPIC_PREFIX = "__"


# The samsa.* keys (without the prefix) that the source's own clients take (see the module doc).
_ADMIN_KEYS = (
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "default.api.timeout.ms",
    *CLIENT_KEYS,
)
_CONSUMER_KEYS = (
    "bootstrap.servers",
    "client.id",
    "default.api.timeout.ms",
    "retry.backoff.ms",
    *CLIENT_KEYS,
)
USED_CLIENT_KEYS = frozenset(_ADMIN_KEYS + _CONSUMER_KEYS + ("isolation.level",))
log = logging.getLogger(__name__)


class OptionError(ValueError):
    """An option is missing or malformed; the message says which and how to fix it."""


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]  # samsa.* without the prefix
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: str | dict[str, dict[int, int]] | None = None  # None: earliest, or latest streaming
    ending: str | dict[str, dict[int, int]] = "latest"
    starting_times: Times | None = None  # startingTimestamp / startingOffsetsByTimestamp
    ending_times: Times | None = None
    starting_time_strategy: str = "error"  # or "latest": no record that late
    include_headers: bool = False
    isolation: str = "read_committed"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000

    def admin_config(self) -> dict[str, str]:
        """The driver's Admin settings: the samsa.* keys an Admin takes."""
        return {key: value for key, value in self.client.items() if key in _ADMIN_KEYS}

    def consumer_config(self) -> dict[str, str]:
        """The driver's Consumer settings (offsets by time, partition bounds): the samsa.* keys
        it uses, at the read's isolation level."""
        config = {key: value for key, value in self.client.items() if key in _CONSUMER_KEYS}
        return config | {"isolation.level": self.isolation}

    def matches(self, topic: str) -> bool:
        """Whether a topic is read (subscribe or subscribePattern; assign lists partitions)."""
        if self.pattern is not None:
            return not topic.startswith(INTERNAL_TOPIC_PREFIX) and matcher(self.pattern)(topic)
        return topic in self.subscribe


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    lowered = {key.lower(): (key, value) for key, value in options.items()}

    def get(name: str) -> str | None:
        found = lowered.get(name.lower())
        return None if found is None else found[1]

    client = {
        key[len("samsa.") :]: value for key, value in options.items() if key.startswith("samsa.")
    }
    if not client.get("bootstrap.servers"):
        raise OptionError("samsa.bootstrap.servers is required: the brokers' host:port list")
    _check_client(client)
    chosen = [name for name in ("subscribe", "subscribePattern", "assign") if get(name)]
    if len(chosen) != 1:
        raise OptionError(
            "set exactly one of subscribe (topics, comma-separated), subscribePattern (a regex) "
            f'or assign (JSON {{"topic": [0, 1]}}); got {chosen or "none"}'
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[TopicPartition, ...] = ()
    if chosen == ["subscribe"]:
        subscribe = tuple(t.strip() for t in (get("subscribe") or "").split(",") if t.strip())
        if not subscribe:
            raise OptionError(f"subscribe names no topic: {get('subscribe')!r}")
    elif chosen == ["subscribePattern"]:
        pattern = get("subscribePattern") or ""
        error = pattern_error(pattern)
        if error is not None:
            raise OptionError(f"subscribePattern {pattern!r} is not a regex: {error}")
    else:
        assign = _assign(get("assign") or "")
    min_rows = _positive("minOffsetsPerTrigger", get("minOffsetsPerTrigger"))
    max_rows = _positive("maxOffsetsPerTrigger", get("maxOffsetsPerTrigger"))
    if min_rows is not None and max_rows is not None and min_rows > max_rows:
        raise OptionError(
            f"minOffsetsPerTrigger {min_rows} is above maxOffsetsPerTrigger {max_rows}: no "
            "micro-batch could hold it"
        )
    return SourceOptions(
        client=client,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=_offsets("startingOffsets", starting)
        if (starting := get("startingOffsets"))
        else None,
        ending=_offsets("endingOffsets", get("endingOffsets") or "latest", ending=True),
        starting_times=_times(get, "startingTimestamp", "startingOffsetsByTimestamp"),
        ending_times=_times(get, "endingTimestamp", "endingOffsetsByTimestamp"),
        starting_time_strategy=_strategy(get("startingOffsetsByTimestampStrategy")),
        include_headers=_bool("includeHeaders", get("includeHeaders"), False),
        isolation=_isolation(get("isolation.level"), client.get("isolation.level")),
        fail_on_data_loss=_bool("failOnDataLoss", get("failOnDataLoss"), True),
        min_partitions=_positive("minPartitions", get("minPartitions")),
        max_offsets_per_trigger=max_rows,
        min_offsets_per_trigger=min_rows,
        max_trigger_delay_ms=_duration_ms("maxTriggerDelay", get("maxTriggerDelay") or "15m"),
    )


def batch_checked(options: SourceOptions) -> SourceOptions:
    """`options`, refused (as Kafka's connector does) if a batch read would start at latest: it
    would read nothing, which is never what was meant. Starting by time wins over it."""
    if options.starting_times is None and options.starting is not None:
        if options.starting == "latest":
            raise OptionError("a batch read cannot start at latest: use earliest or JSON offsets")
        if isinstance(options.starting, dict):
            for topic, offsets in options.starting.items():
                for partition, offset in offsets.items():
                    if offset == LATEST:
                        raise OptionError(
                            f"startingOffsets: {topic}-{partition} cannot be -1 (latest) in a "
                            "batch read"
                        )
    return options


def stream_checked(options: Mapping[str, str]) -> Mapping[str, str]:
    """`options`, refused (as Kafka's connector does) if they set an ending: a stream has
    none, and ignoring the option would read on past what was asked for."""
    given = {key.lower() for key in options}
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        if name.lower() in given:
            raise OptionError(f"{name} is not valid for a stream: a stream has no end")
    return options


def canonical(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """Offsets as the JSON Spark keeps: sorted keys, no spaces."""
    as_strings = {t: {str(p): o for p, o in sorted(ps.items())} for t, ps in offsets.items()}
    return json.dumps(as_strings, sort_keys=True, separators=(",", ":"))


def _assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise OptionError(f'assign must be JSON like {{"topic": [0, 1]}}: {error}') from None
    if not isinstance(parsed, dict) or not all(
        isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps)
        for ps in parsed.values()
    ):
        raise OptionError('assign must map each topic to a list of partitions: {"topic": [0, 1]}')
    assigned = tuple(sorted({(topic, p) for topic, ps in parsed.items() for p in ps}))
    if not assigned:
        raise OptionError(f"assign names no partition: {text!r}")
    return assigned


def _offsets(name: str, text: str, *, ending: bool = False) -> str | dict[str, dict[int, int]]:
    if text in ("latest", "earliest"):
        if ending and text == "earliest":
            raise OptionError(f"{name} cannot be earliest: use latest or JSON offsets")
        return text
    offsets = _per_partition(
        name,
        text,
        f'{name} must be earliest, latest or JSON like {{"topic": {{"0": 23, "1": -2}}}} '
        "(-2 earliest, -1 latest)",
    )
    floor = LATEST if ending else EARLIEST
    for topic, ps in offsets.items():
        for partition, offset in ps.items():
            if offset < floor:
                raise OptionError(f"{name}: {topic}-{partition} offset {offset} is below {floor}")
    return offsets


def _times(get: Callable[[str], str | None], one: str, each: str) -> Times | None:
    """`one` (a timestamp for every partition) if set, else `each` (JSON per partition)."""
    text = get(one)
    if text is not None:
        if not _DECIMAL.fullmatch(text) or int(text) >= LONG_LIMIT:
            raise OptionError(f"{one} must be milliseconds since the epoch, not {text!r}")
        return int(text)
    text = get(each)
    if text is None:
        return None
    times = _per_partition(
        each,
        text,
        f'{each} must be JSON like {{"topic": {{"0": 1700000000000}}}} (ms since the epoch)',
    )
    for topic, ps in times.items():
        for partition, ms in ps.items():
            if ms < 0:
                raise OptionError(f"{each}: {topic}-{partition} timestamp {ms} is negative")
    return times


_DECIMAL = re.compile(r"[0-9]+")  # ASCII digits only (str.isdigit takes "²", which int refuses)
_PARTITION = re.compile(r"0|[1-9][0-9]*")  # a partition key as canonical() writes it


class _Repeated(ValueError):
    """A JSON object names a key twice (json.loads would keep the last in silence)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Repeated(next(key for key in keys if keys.count(key) > 1))
    return dict(pairs)


def _per_partition(name: str, text: str, expected: str) -> dict[str, dict[int, int]]:
    """`{"topic": {"partition": integer}}` parsed strictly: an integer is a JSON integer that
    fits a long (not true, 12.5 or "12", which int() would turn into 1, 12 and 12), a
    partition is written as a number (not " 1", "01" or "-1", which name no partition as
    Spark's checkpoint writes it), and no topic or partition is named twice (JSON keeps the
    last in silence). `expected` says what to write; the message adds what was given."""
    try:
        parsed = json.loads(text, object_pairs_hook=_unique_keys)
    except _Repeated as repeated:
        raise OptionError(f"{name} names {str(repeated)!r} twice in one object: {text!r}") from None
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        # An offset copied from a stream's checkpoint or progress names its topics' ids beside
        # the positions (stream_offsets.IDS, the only key with a "$": no topic name has one);
        # the positions are what an option takes.
        parsed = {topic: ps for topic, ps in parsed.items() if not topic.startswith("$")}
    if isinstance(parsed, dict) and all(
        isinstance(ps, dict)
        and all(
            _PARTITION.fullmatch(p) and type(n) is int and abs(n) < LONG_LIMIT
            for p, n in ps.items()
        )
        for ps in parsed.values()
    ):
        return {topic: {int(p): n for p, n in ps.items()} for topic, ps in parsed.items()}
    raise OptionError(f"{expected}; got {text!r}")


def _strategy(text: str | None) -> str:
    strategy = (text or "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be error or latest: {text!r}")
    return strategy


def _bool(name: str, text: str | None, default: bool) -> bool:
    if text is None:
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise OptionError(f"{name} must be true or false, not {text!r}")


def _isolation(text: str | None, client: str | None) -> str:
    """isolation.level, or samsa.isolation.level (the Kafka connector's kafka.isolation.level)."""
    if text is not None and client is not None and text != client:
        raise OptionError(
            f"samsa.isolation.level and isolation.level disagree ({client!r}, {text!r}): set one"
        )
    level = text or client or "read_committed"
    if level not in ("read_committed", "read_uncommitted"):
        raise OptionError(f"isolation.level must be read_committed or read_uncommitted: {level!r}")
    return level


# samsa.* keys a consumer takes but the source decides itself (the Kafka connector refuses them).
_DECIDED_BY_THE_SOURCE = {
    "auto.offset.reset": "use startingOffsets (and failOnDataLoss) instead",
    "enable.auto.commit": "the source commits no offsets: Spark's checkpoint holds the position",
}


def _check_client(client: dict[str, str]) -> None:
    """The samsa.* keys, refused here (on the driver) as a consumer would refuse them."""
    for key, why in _DECIDED_BY_THE_SOURCE.items():
        if key in client:
            raise OptionError(f"samsa.{key} is not taken: {why}")
    if "request.timeout.ms" in client:  # the range reader's (a consumer has none)
        _positive("samsa.request.timeout.ms", client["request.timeout.ms"])
    consumer = {key: value for key, value in client.items() if key != "request.timeout.ms"}
    try:
        ConsumerConfig.from_dict(consumer)
    except InvalidConfigError as error:
        culprit = next((key for key in consumer if _refused_alone(consumer, key)), None)
        where = f"samsa.{culprit}" if culprit else "the samsa.* options"
        raise OptionError(f"{where}: {error}") from None
    try:  # the driver's Admin refuses a default.api.timeout.ms below request.timeout.ms
        admin_timeouts({key: value for key, value in client.items() if key in _ADMIN_KEYS})
    except InvalidConfigError as error:
        raise OptionError(f"samsa.default.api.timeout.ms: {error}") from None
    unused = sorted(set(client) - USED_CLIENT_KEYS)
    if unused:
        log.warning(
            "%s: taken by a consumer but not used by the Samsa source, which reads with "
            "samsa.%s only; ignored",
            ", ".join(f"samsa.{key}" for key in unused),
            ", samsa.".join(sorted(USED_CLIENT_KEYS)),
        )


def _refused_alone(client: dict[str, str], key: str) -> bool:
    try:
        ConsumerConfig.from_dict({"bootstrap.servers": "localhost:9092", key: client[key]})
    except InvalidConfigError:
        return True
    return False


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(name: str, text: str) -> int:
    """A duration as Spark writes one (`15m`, `30s`, `500ms`; a bare number is ms)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if match is None or match.group(2) not in {"", *_UNIT_MS}:
        raise OptionError(f"{name} must be a duration like 15m, 30s or 500ms, not {text!r}")
    return int(match.group(1)) * _UNIT_MS.get(match.group(2), 1)


def _positive(name: str, text: str | None) -> int | None:
    if text is None:
        return None
    if not _DECIMAL.fullmatch(text) or int(text) < 1:
        raise OptionError(f"{name} must be a positive integer, not {text!r}")
    return int(text)
