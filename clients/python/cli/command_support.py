"""What the cluster commands share: where to connect, a topic that must exist, times, tables.

Where to connect: `--bootstrap-server host:port,...`, else a `bootstrap.servers` among the
command's --producer-property / --consumer-property items, else $SAMSA_BOOTSTRAP, else the cluster
that `samsa up` runs from `--data-dir` (default ./samsa-data, read from its cluster.json), so that
in the README's flow no address needs to be typed. Every client of a command connects there.

How to connect (TLS, client certificates: common/tls.py's keys): `--command-config FILE`, a
properties file as Kafka's admin tools take (command_config.py), else, when the address comes
from `samsa up`'s cluster.json, that cluster's client settings (`samsa up --tls` or `--sasl` made
them), else
plaintext; a TLS key among the --producer-property / --consumer-property items wins over both.
`client_config` builds every client's configuration with them, so that no command connects
another way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from samsa.cli.cluster_spec import read_spec
from samsa.cli.command_config import CommandConfigError, check_security, read_command_config
from samsa.client import Admin, TopicError
from samsa.client.admin import TopicDescription
from samsa.common import tls
from samsa.common.errors import ErrorCode

# The signals that stop a command as Ctrl-C does (main() installs raise_terminated for them).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C raises KeyboardInterrupt, so that a command
    stopped by `kill`, `timeout`, a service manager or its terminal closing ends as one stopped
    by Ctrl-C, as Kafka's tools' shutdown hooks do: its clients closed (a producer flushes what
    it read, a group consumer commits what it printed and leaves its group). `exit_code` is
    128 + the signal, as a shell reports a command that signal killed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.exit_code = 128 + signum


def raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


# How long produce/consume re-ask about a topic a controller says does not exist. Controllers
# apply the committed log within ~0.1 s of each other, so a topic another command just created is
# visible by then even on a lagging follower; a topic that truly does not exist costs this long.
TOPIC_VISIBLE_WAIT_S = 2.0


def add_connection(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """--bootstrap-server and --data-dir. `inherited`: `parser` is an action of a command that
    has them too (`samsa cluster unregister`): without defaults of its own, since argparse
    copies an action's defaults over what the command's own flags parsed, so the flags count
    on either side of the action's name."""
    parser.add_argument(
        "--bootstrap-server",
        help="brokers or controllers (or both), host:port,...",
        default=argparse.SUPPRESS if inherited else None,
    )
    parser.add_argument(
        "--data-dir",
        help="where `samsa up` runs",
        default=argparse.SUPPRESS if inherited else "samsa-data",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="how to connect: a properties file (KEY=VALUE lines, # comments) of "
        f"{', '.join(tls.CLIENT_KEYS)}; default: the `samsa up` cluster's, when the address "
        "comes from --data-dir (`samsa up --tls` writes DATA_DIR/tls/client.properties)",
        default=argparse.SUPPRESS if inherited else None,
    )


def bootstrap(args: argparse.Namespace) -> str:
    """Where the command's clients connect (the module docstring's order). The flag wins over a
    bootstrap.servers property, as in Kafka's console and perf tools, which set the flag's value
    after the properties; the property, where no flag is given, as in Kafka's perf tools."""
    if args.bootstrap_server:
        return args.bootstrap_server
    if servers := bootstrap_property(args):
        return servers
    if os.environ.get("SAMSA_BOOTSTRAP"):
        return os.environ["SAMSA_BOOTSTRAP"]
    spec_file = Path(args.data_dir) / "cluster.json"
    if spec_file.exists():
        try:
            spec = json.loads(spec_file.read_text())
            return ",".join(f"127.0.0.1:{c['grpc_port']}" for c in spec["controllers"])
        except (OSError, ValueError, LookupError, TypeError):  # truncated, or another program's
            raise SystemExit(
                f"samsa: {spec_file} is not a cluster `samsa up` wrote; pass --bootstrap-server "
                "or set SAMSA_BOOTSTRAP"
            ) from None
    raise SystemExit(
        f"samsa: no cluster to talk to: pass --bootstrap-server, set SAMSA_BOOTSTRAP, or run "
        f"`samsa up` (it writes {spec_file})"
    )


CLIENT_PROPERTY_EXAMPLES = {
    "producer": "acks=all or linger.ms=5",
    "consumer": "fetch.max.wait.ms=100",
}


def add_client_property(parser: argparse.ArgumentParser, client: str) -> None:
    """`--producer-property` or `--consumer-property KEY=VALUE` (repeatable), as Kafka's console
    and perf tools take them: any setting of the SDK client by its Kafka name."""
    parser.add_argument(
        f"--{client}-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a {client} setting by its Kafka name, e.g. {CLIENT_PROPERTY_EXAMPLES[client]} "
        "(repeatable)",
    )


def bootstrap_property(args: argparse.Namespace) -> str | None:
    """The last `bootstrap.servers=...` of the command's --producer-property and
    --consumer-property items (the last of a repeated key wins, as in the settings), or None."""
    found = None
    for client in ("producer", "consumer"):
        flag = f"--{client}-property"
        for item in getattr(args, f"{client}_property", None) or ():
            key, value = key_value(item, flag)
            if key == "bootstrap.servers" and value.strip():
                found = value
    return found


def client_settings(args: argparse.Namespace, items: list[str], flag: str) -> dict[str, str]:
    """The --producer-property or --consumer-property items as a client's settings, with
    bootstrap.servers where the command connects (`bootstrap`): the flag wins over the item;
    and how it connects (`security`)."""
    settings = dict(key_value(item, flag) for item in items)
    return settings | client_config(args)


def client_config(args: argparse.Namespace, servers: str | None = None) -> dict[str, str]:
    """Where and how a command's client connects: bootstrap.servers (`servers`, else
    `bootstrap`) and the security settings (`security`). Every Admin, Producer and Consumer
    of a command is configured from it."""
    return {"bootstrap.servers": servers or bootstrap(args), **security(args)}


def security(args: argparse.Namespace) -> dict[str, str]:
    """How the command connects (the module docstring's order), checked as a client's TLS:
    exits with one line naming where a wrong setting came from."""
    sources = []
    settings: dict[str, str] = {}
    command_config = getattr(args, "command_config", None)
    try:
        if command_config:
            settings = read_command_config(Path(command_config))
            sources.append(f"--command-config {command_config}")
        elif (spec_security := _cluster_json_security(args)) is not None:
            settings = spec_security
            sources.append(str(Path(args.data_dir) / "cluster.json"))
        for client in ("producer", "consumer"):
            flag = f"--{client}-property"
            for item in getattr(args, f"{client}_property", None) or ():
                key, value = key_value(item, flag)
                if key in tls.CLIENT_KEYS:
                    settings[key] = value
                    if flag not in sources:
                        sources.append(flag)
        check_security(settings, " and ".join(sources) or "the settings")
    except CommandConfigError as error:
        raise SystemExit(f"samsa: {error}") from None
    return settings


def _cluster_json_security(args: argparse.Namespace) -> dict[str, str] | None:
    """The client settings of the `samsa up` cluster the command connects to (TLS, a SASL login
    as admin, or none for plaintext); None when the address does not come from its
    cluster.json (`bootstrap`'s order)."""
    if args.bootstrap_server or bootstrap_property(args) or os.environ.get("SAMSA_BOOTSTRAP"):
        return None
    data_dir = Path(args.data_dir)
    try:
        return read_spec(data_dir / "cluster.json").client_security(data_dir)
    except (OSError, ValueError):  # bootstrap() says what is wrong with it
        return None


def key_value(item: str, flag: str) -> tuple[str, str]:
    """KEY=VALUE split at the first `=`, or exit saying which flag was malformed."""
    if "=" not in item:
        raise SystemExit(f"samsa: {flag} {item!r} is not KEY=VALUE")
    key, value = item.split("=", 1)
    return key, value


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns, as people read them in a terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def require_topic(admin: Admin, topic: str) -> TopicDescription:
    """The topic, or exit with one line saying how to create it.

    Checked here rather than left to the producer, which (like Kafka's) waits max.block.ms, 60 s,
    for an unknown topic's metadata: right for an application racing a topic's creation, a silent
    minute for a person who mistyped a name. A short max.block.ms would also cut the producer's
    wait for buffer space, which `samsa produce` of a large file needs."""
    deadline = time.monotonic() + TOPIC_VISIBLE_WAIT_S
    while True:
        try:
            return admin.describe_topics([topic])[topic]
        except TopicError as error:
            if error.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise
            if time.monotonic() >= deadline:
                raise SystemExit(
                    f"samsa: topic {topic!r} does not exist "
                    f"(create it with `samsa topics create {topic}`)"
                ) from None
        time.sleep(0.2)


# Java's Duration.parse, which Kafka's --by-duration reads: P, then days, then T and hours, minutes,
# seconds (fractions allowed), each optional and each signed; upper or lower case.
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>[-+]?[0-9]+)D)?"
    r"(?P<time>T(?:(?P<hours>[-+]?[0-9]+)H)?(?:(?P<minutes>[-+]?[0-9]+)M)?"
    r"(?:(?P<seconds>[-+]?[0-9]+)(?:[.,](?P<fraction>[0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def _bounded_int(text: str, largest: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not -largest - 1 <= value <= largest:
        raise argparse.ArgumentTypeError(f"{text} does not fit {what} (at most {largest})")
    return value


def int32(text: str) -> int:
    """An argparse type for what the wire carries as int32 (partitions, broker ids, epochs,
    counts of partitions and replicas): a larger number is a usage error, not a traceback."""
    return _bounded_int(text, INT32_MAX, "a 32-bit field")


def replica_assignment(text: str) -> dict[int, list[int]]:
    """An argparse type for Kafka's `--replica-assignment`: partitions separated by commas, the
    broker ids of one partition by colons, the first its preferred leader ("1:2,2:3,3:1": three
    partitions of two replicas). A list that is empty or names a broker twice is a usage error
    here, as in Kafka's tool; whether the brokers exist, and every list is as long, the
    controller says (it knows the brokers)."""
    plan: dict[int, list[int]] = {}
    for partition, part in enumerate(text.split(",")):
        ids = [item.strip() for item in part.split(":")]
        if not all(ids):
            raise argparse.ArgumentTypeError(
                f"partition {partition} ({part.strip()!r}) has an empty broker id: write broker "
                "ids separated by ':', partitions by ',', as in 1:2,2:3"
            )
        brokers = [_bounded_int(item, INT32_MAX, "a broker id") for item in ids]
        if len(set(brokers)) != len(brokers):
            raise argparse.ArgumentTypeError(
                f"partition {partition} ({part.strip()}) names a broker more than once"
            )
        plan[partition] = brokers
    return plan


def int64(text: str) -> int:
    """An argparse type for what the wire carries as int64 (offsets, producer ids, times)."""
    return _bounded_int(text, INT64_MAX, "a 64-bit field")


def seconds(text: str) -> float:
    """An argparse type for a wait in seconds: a finite number, 0 or more ("nan" compared false
    with every deadline, so such a wait never ended; a negative one ended at once)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a wait: give 0 or more seconds")
    return value


def milliseconds_as_seconds(text: str) -> float:
    """An argparse type for a wait given in ms (Kafka's tools' *-ms flags), in seconds."""
    value = _bounded_int(text, INT64_MAX, "a 64-bit field")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a wait: give 0 or more ms")
    return value / 1000


def parse_duration_ms(text: str, flag: str) -> int:
    """An ISO 8601 duration as Kafka's tools take it (`PT1H`, `P1DT12H`, `PT0.5S`), in ms."""
    match = _DURATION.fullmatch(text.strip())
    if (
        match is None
        or match["time"] in ("T", "t")  # a T with no hours, minutes or seconds after it
        or not any(match[unit] for unit in ("days", "hours", "minutes", "seconds"))
    ):
        raise SystemExit(
            f"samsa: {flag} {text!r} is not an ISO 8601 duration such as PT1H, P1DT12H or PT30M"
        )
    days, hours, minutes = (int(match[unit] or 0) for unit in ("days", "hours", "minutes"))
    seconds = match["seconds"] or "0"
    fraction_ms = int((match["fraction"] or "").ljust(3, "0")[:3])
    seconds_ms = int(seconds) * 1000 + (-fraction_ms if seconds.startswith("-") else fraction_ms)
    total_ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds_ms
    return -total_ms if match["sign"] == "-" else total_ms


def offsets_csv(offsets: Iterable[tuple[str, int, int]]) -> str:
    """Kafka's offsets file (kafka-consumer-groups.sh --export): `topic,partition,offset` lines."""
    return "".join(f"{topic},{partition},{offset}\n" for topic, partition, offset in offsets)


def parse_offsets_csv(text: str, source: str) -> dict[tuple[str, int], int]:
    """The offsets of a `topic,partition,offset` file (Kafka's --from-file; a topic name has no
    comma). Exits with one line naming the first bad line."""
    offsets: dict[tuple[str, int], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.strip().split(",")
        try:
            topic, partition, offset = fields[0], int(fields[1]), int(fields[2])
            in_range = 0 <= partition <= INT32_MAX and 0 <= offset <= INT64_MAX
            if len(fields) != 3 or not topic or not in_range:
                raise ValueError
        except (ValueError, IndexError):
            raise SystemExit(
                f"samsa: {source} line {number}: {line.strip()!r} is not topic,partition,offset "
                "(a partition and an offset >= 0)"
            ) from None
        if (topic, partition) in offsets:
            raise SystemExit(f"samsa: {source} line {number}: {topic}-{partition} comes twice")
        offsets[(topic, partition)] = offset
    if not offsets:
        raise SystemExit(f"samsa: {source} names no offsets (lines of topic,partition,offset)")
    return offsets


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time(text: str, flag: str, unreadable: str | None = None) -> int:
    """ms since epoch, or ISO 8601: UTC when it names no zone, as Kafka's tools read it
    (Utils.getDateTime appends "Z"), so a command means the same instant on every machine.
    Exits with `unreadable` (else a line naming these forms) for a text of neither form."""
    if text.isdigit():
        return time_in_range(int(text), flag, text)
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise SystemExit(
            unreadable or f"samsa: {flag} {text!r} is neither ms since epoch nor ISO 8601"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return time_in_range((at - EPOCH) // timedelta(milliseconds=1), flag, text)


def time_in_range(at_ms: int, flag: str, text: str) -> int:
    """`at_ms`, or exit with one line when no record's timestamp can be there: before 1970 or
    past int64 ms (ListOffsets refuses such a target time, as Kafka's offsetsForTimes does)."""
    if not 0 <= at_ms <= INT64_MAX:
        where = "before 1970" if at_ms < 0 else "past the last time ms since epoch can hold"
        raise SystemExit(f"samsa: {flag} {text!r} is {where}: a time is 1970 or later")
    return at_ms
