"""Service configuration: one key per setting, read from flags, SAMSA_* variables and a file.

Theory of operation. A service's config is a frozen dataclass (BrokerConfig, ControllerConfig,
CoordinatorConfig) whose fields each carry a `Key` in their metadata: the Kafka-style dotted name
(`broker.id`, `listeners`, `log.dir`), the command-line flags that set it, the parser that turns
text into the field's value, and the words for what it expects. Every setting arrives as text from
one of four places, highest precedence first:

    command line   --broker-id 1               (the flags of before, unchanged)
    environment    SAMSA_BROKER_ID=1           (SAMSA_ + the name upper-cased, dots as _)
    file           broker.id=1                 (`--config FILE`: Kafka's .properties lines)
    default        the dataclass field's default (a field without one is required)

`resolve` picks each key's text by that order, parses it, and builds the dataclass, whose
`__post_init__` then checks the relations between keys. Every error is a `ConfigError` of one
line saying where the text came from, the key, and what is expected:

    SAMSA_BROKER_ID='x' (environment): broker.id must be an integer from 0 to 2147483647

Unknown keys in a file, and unknown SAMSA_* variables, are errors too (with the closest known
key, when one is close): a typo must not silently leave a default in place. Two exceptions for
the environment, since one environment is often shared by every service of a deployment (a
compose file's common block) and by the tools around them: the keys of the other services
(`OTHER_SERVICE_KEYS`) and the variables that are not service configuration
(`NOT_CONFIG_VARIABLES`) are left alone.

No I/O here: the caller hands in the flags (already split by argparse), the environment as a
mapping and the file's text (config_loading.py does the reading).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ENV_PREFIX = "SAMSA_"

# SAMSA_* variables that configure something else than a service's keys: logging, fault
# injection, the clients and CLI, tests and benchmarks. A service ignores them.
NOT_CONFIG_VARIABLES = frozenset(
    {
        "SAMSA_LOG_LEVEL",
        "SAMSA_EVENT_LOOP",  # common/event_loops.py: uvloop or asyncio, services and SDK alike
        "SAMSA_TRACES_FILE",
        "SAMSA_FAULTS",
        "SAMSA_BOOTSTRAP",
        "SAMSA_SLOW",
        "SAMSA_FUZZ_EXAMPLES",
        "SAMSA_HYPOTHESIS_EXAMPLES",
        "SAMSA_SKIP_BUF",
        "SAMSA_BENCH_DIR",
        "SAMSA_ACKS",
        "SAMSA_ACKS_1",
        "SAMSA_ALL_IDEMPOTENT",
        "SAMSA_COLUMNS",
        # deploy/docker-compose*.yml's own variables (the image, its base, the secret file, the
        # TLS overlay's certificate directory, the SASL overlay's bootstrap-file directory)
        "SAMSA_IMAGE",
        "SAMSA_BASE",
        "SAMSA_JAEGER_IMAGE",
        "SAMSA_PROMETHEUS_IMAGE",
        "SAMSA_GRAFANA_IMAGE",
        "SAMSA_CLUSTER_SECRET",
        "SAMSA_TLS_DIR",
        "SAMSA_SASL_DIR",
        # the Node example's SASL login (clients/node/example.js): a client's, not a service's
        "SAMSA_SASL_MECHANISM",
        "SAMSA_SASL_USERNAME",
        "SAMSA_SASL_PASSWORD",
        "SAMSA_SASL_OAUTHBEARER_CLIENT_SECRET",  # and its OAUTHBEARER login's secret
    }
)
NOT_CONFIG_PREFIXES = ("SAMSA_SPARK_",)

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


class ConfigError(ValueError):
    """A setting is missing, malformed, unknown or incoherent; the message is one line."""


class ValueProblem(ValueError):
    """Raised by a parser: its message completes "<key> must be ..." ."""


class RelationProblem(ValueError):
    """Raised by a config's `__post_init__`: keys that do not fit together, and why."""

    def __init__(self, keys: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.keys = keys


@dataclass(frozen=True)
class Key:
    """One setting: its name, how to set it on the command line, and how to read its text."""

    name: str  # Kafka-style, dotted: "broker.id"
    parse: Callable[[str], Any]  # text -> value; raises ValueProblem("be an integer >= 0")
    flags: tuple[str, ...] = ()  # "--broker-id"; the first is the one named in messages
    help: str = ""

    @property
    def env_name(self) -> str:
        return env_name(self.name)


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper().replace(".", "_")


def key(
    name: str,
    parse: Callable[[str], Any],
    *,
    flags: Sequence[str] = (),
    default: Any = dataclasses.MISSING,
    help: str = "",
) -> Any:
    """A dataclass field bound to `name` (the field is required when there is no default)."""
    spec = Key(name, parse, tuple(flags) or ("--" + name.replace(".", "-"),), help)
    return field(default=default, metadata={"key": spec})


def keys_of(config_class: type) -> list[Key]:
    return [f.metadata["key"] for f in dataclasses.fields(config_class) if "key" in f.metadata]


@dataclass(frozen=True)
class Setting:
    """The text of one key and where it came from ("environment", "broker.properties line 3")."""

    text: str
    origin: str
    written_as: str  # how the user wrote the key there: --broker-id, SAMSA_BROKER_ID, broker.id


# --- parsers: text -> value, or ValueProblem completing "<key> must ..." ---------------------


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    if minimum is not None and maximum is not None:
        wanted = f"be an integer from {minimum} to {maximum}"
    elif minimum is not None:
        wanted = f"be an integer >= {minimum}"
    else:
        wanted = "be an integer"

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueProblem(wanted) from None
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise ValueProblem(wanted)
        return value

    return parse


# The ids of the cluster's processes travel as protobuf int32 (broker_id, node_id,
# coordinator_id): a larger one would be accepted here and fail at the first message.
MEMBER_ID_MAX = 2**31 - 1


def member_id(text: str) -> int:
    """broker.id, node.id, coordinator.id: 0 to MEMBER_ID_MAX."""
    return integer(0, MEMBER_ID_MAX)(text)


def text(text: str) -> str:
    return text.strip()


def non_empty(text: str) -> str:
    if not text.strip():
        raise ValueProblem("not be empty")
    return text.strip()


def one_of(choices: Sequence[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.strip() not in choices:
            raise ValueProblem("be one of " + ", ".join(sorted(choices)))
        return text.strip()

    return parse


def split_address(text: str, port_min: int = 1) -> tuple[str, int]:
    """`host:port` (host may be empty, a name, IPv4 or [IPv6]) -> (host, port)."""
    host, colon, port = text.strip().rpartition(":")
    if not colon or not port.isdigit() or not port_min <= int(port) <= 65535:
        raise ValueProblem(f"be host:port with a port from {port_min} to 65535")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueProblem("be host:port (an IPv6 host in brackets: [::1]:9092)")
    return host, int(port)


def address(text: str) -> str:
    """An address to bind (port 0: any free port, as tests ask for)."""
    split_address(text, port_min=0)
    return text.strip()


def advertisable_address(text: str) -> str:
    """An address others can dial: host:port whose host is not a wildcard."""
    host, _ = split_address(text)
    if host in WILDCARD_HOSTS:
        raise ValueProblem("be host:port with a host others can reach, not a wildcard")
    return text.strip()


def optional_address(text: str) -> str | None:
    """An address to bind, or empty for none."""
    return address(text) if text.strip() else None


def optional_advertisable_address(text: str) -> str | None:
    """An address others can dial, or empty for none."""
    return advertisable_address(text) if text.strip() else None


def named_address(text: str) -> str:
    """An address to bind that also names this process to its peers (the Raft port): no
    wildcard host; port 0 is let through, as for any address to bind."""
    host, _ = split_address(text, port_min=0)
    if host in WILDCARD_HOSTS:
        raise ValueProblem("be host:port with a host its peers can reach, not a wildcard")
    return text.strip()


def address_list(text: str) -> tuple[str, ...]:
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    if not items:
        raise ValueProblem("list at least one host:port (comma-separated)")
    for item in items:
        split_address(item)
    return items


def optional_path(text: str) -> str | None:
    """A file path; empty means off."""
    return text.strip() or None


def optional_listen(text: str) -> str | None:
    """HOST:PORT, :PORT or PORT (the metrics endpoint's grammar); empty means off."""
    if not text.strip():
        return None
    _, _, port = text.strip().rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueProblem("be HOST:PORT, :PORT or PORT (0-65535), or empty for off")
    return text.strip()


def with_bound_port(address: str, bound_port: int) -> str:
    """`address` with the port a listener bound in place of port 0 ("any free port"): what a
    service whose `listeners` asked for any port, and which names no `advertised.listeners`,
    tells the others (as Kafka corrects an ephemeral advertised port to the bound one)."""
    host, port = split_address(address, port_min=0)
    return f"{host}:{bound_port}" if port == 0 else address


def is_wildcard(listener: str) -> bool:
    return split_address(listener, port_min=0)[0] in WILDCARD_HOSTS


def check_advertised(listeners: str, advertised: str | None) -> None:
    """A wildcard listener needs an advertised address: others cannot dial 0.0.0.0."""
    if not advertised and is_wildcard(listeners):
        raise RelationProblem(
            ("listeners", "advertised.listeners"),
            f"listeners={listeners!r} binds every interface, so advertised.listeners must say "
            "which host:port others dial (e.g. SAMSA_ADVERTISED_LISTENERS=broker-1:9093)",
        )


def check_internal(listeners: str, internal: str | None, internal_advertised: str | None) -> None:
    """The internal listener is a second port (not the public one), and needs an advertised
    address when it binds every interface; internal.advertised.listeners alone means nothing."""
    if internal is None:
        if internal_advertised is not None:
            raise RelationProblem(
                ("internal.advertised.listeners", "internal.listeners"),
                "internal.advertised.listeners is set without internal.listeners: there is no "
                "internal listener to advertise",
            )
        return
    host, port = split_address(internal, port_min=0)
    public_host, public_port = split_address(listeners, port_min=0)
    same_host = host == public_host or is_wildcard(internal) or is_wildcard(listeners)
    if port != 0 and port == public_port and same_host:
        raise RelationProblem(
            ("internal.listeners", "listeners"),
            f"internal.listeners={internal!r} has the port of listeners={listeners!r}: the "
            "internal listener needs a port of its own",
        )
    if not internal_advertised and is_wildcard(internal):
        raise RelationProblem(
            ("internal.listeners", "internal.advertised.listeners"),
            f"internal.listeners={internal!r} binds every interface, so "
            "internal.advertised.listeners must say which host:port members dial",
        )


# --- the properties file and the environment -> settings ---------------------------------


def parse_properties(content: str, file_name: str) -> dict[str, Setting]:
    """Kafka's .properties subset: `key=value` (or `key: value`) lines, `#`/`!` comments, blank
    lines. A key given twice is an error (which one was meant?)."""
    settings: dict[str, Setting] = {}
    for number, raw in enumerate(content.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separators = [i for i in (line.find("="), line.find(":")) if i >= 0]
        origin = f"{file_name} line {number}"
        if not separators:
            raise ConfigError(f"{origin}: {line!r} is not key=value")
        name, value = line[: min(separators)].strip(), line[min(separators) + 1 :].strip()
        if not name:
            raise ConfigError(f"{origin}: {line!r} has no key before '='")
        if name in settings:
            raise ConfigError(f"{origin}: {name} is set twice (also {settings[name].origin})")
        settings[name] = Setting(value, origin, name)
    return settings


def check_file_keys(settings: Mapping[str, Setting], keys: Sequence[Key], service: str) -> None:
    names = [k.name for k in keys]
    for name, setting in settings.items():
        if name not in names:
            raise ConfigError(
                f"{name} ({setting.origin}): not a {service} key{_suggestion(name, names)}"
            )


def environment_settings(
    environ: Mapping[str, str],
    keys: Sequence[Key],
    service: str,
    other_service_keys: frozenset[str] = frozenset(),
) -> dict[str, Setting]:
    """The SAMSA_* variables of `keys`; ConfigError for one that no service knows."""
    by_env = {k.env_name: k for k in keys}
    ignored = NOT_CONFIG_VARIABLES | {env_name(name) for name in other_service_keys}
    settings: dict[str, Setting] = {}
    for variable, value in sorted(environ.items()):
        if not variable.startswith(ENV_PREFIX):
            continue
        if variable in by_env:
            settings[by_env[variable].name] = Setting(value, "environment", variable)
        elif variable not in ignored and not variable.startswith(NOT_CONFIG_PREFIXES):
            hint = _suggestion(variable, list(by_env))
            raise ConfigError(f"{variable} (environment): not a {service} setting{hint}")
    return settings


def _suggestion(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""


# --- resolution ----------------------------------------------------------------------------


def resolve(
    config_class: type,
    *,
    flags: Mapping[str, Setting],
    environment: Mapping[str, Setting],
    file: Mapping[str, Setting],
) -> Any:
    """Build `config_class` from the three layers (by key name), highest precedence first.

    The dataclass's own checks (relations between keys) raise RelationProblem; it comes out as a
    ConfigError that says where each of its keys was set."""
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for spec_field in dataclasses.fields(config_class):
        spec: Key = spec_field.metadata["key"]
        setting = flags.get(spec.name) or environment.get(spec.name) or file.get(spec.name)
        if setting is None:
            if spec_field.default is dataclasses.MISSING:
                raise ConfigError(
                    f"{spec.name} is required: set {spec.flags[0]}, {spec.env_name}, "
                    f"or {spec.name}= in the --config file"
                )
            origins[spec.name] = "not set" if spec_field.default is None else "default"
            continue
        origins[spec.name] = f"{setting.written_as} ({setting.origin})"
        try:
            values[spec_field.name] = spec.parse(setting.text)
        except ValueProblem as problem:
            raise ConfigError(
                f"{setting.written_as}={setting.text!r} ({setting.origin}): "
                f"{spec.name} must {problem}"
            ) from None
    try:
        return config_class(**values)
    except RelationProblem as problem:
        where = "; ".join(f"{name}: {origins.get(name, '?')}" for name in problem.keys)
        raise ConfigError(f"{problem} ({where})") from None
