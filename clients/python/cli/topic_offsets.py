"""`samsa topics offsets`: each partition's offset at a point of its log, from its leader (Kafka's
kafka-get-offsets.sh), thin over Admin.list_offsets."""

from __future__ import annotations

import argparse

from samsa.cli.command_support import int32, parse_time, require_topic, table
from samsa.client import Admin

# kafka-get-offsets.sh's numbers for its named --time values
TIME_NAMES = {"-1": "latest", "-2": "earliest", "-3": "max_timestamp"}


def add_topic_offsets_parser(actions: argparse._SubParsersAction) -> argparse.ArgumentParser:
    offsets = actions.add_parser(
        "offsets", help="each partition's offset at a point in time (Kafka's kafka-get-offsets)"
    )
    offsets.add_argument("name")
    offsets.add_argument(
        "--time",
        default="latest",
        help="latest (-1, the default: the next offset to be written and read), earliest (-2, "
        "the log start), max-timestamp (-3, the record with the largest timestamp), or a time "
        "(ms since epoch or ISO 8601, UTC unless it names a zone): the first record at or after it",
    )
    offsets.add_argument(
        "--partition",
        type=int32,
        action="append",
        default=[],
        help="a partition to ask about (repeatable); default: every partition",
    )
    offsets.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed: latest is the last stable offset, and records of open "
        "transactions are not found",
    )
    return offsets


def topic_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """A table of partition, offset and the found record's timestamp ("-" when none)."""
    spec = offset_spec(args.time)
    count = len(require_topic(admin, args.name).partitions)
    partitions = list(dict.fromkeys(args.partition)) or list(range(count))
    unknown = sorted(p for p in partitions if not 0 <= p < count)
    if unknown:
        raise SystemExit(
            f"samsa topics offsets: {args.name} has partitions 0 to {count - 1}, "
            f"not {', '.join(map(str, unknown))}"
        )
    listed = admin.list_offsets({(args.name, p): spec for p in partitions}, args.isolation_level)
    rows = [
        (partition, found.offset, found.timestamp if found.timestamp >= 0 else "-")
        for (_, partition), found in listed.items()
    ]
    print(table(("partition", "offset", "timestamp"), rows))
    return 0


def offset_spec(text: str) -> str | int:
    """--time: a named point (or kafka-get-offsets' -1, -2, -3), else a time in ms."""
    name = TIME_NAMES.get(text.strip(), text.strip().lower().replace("-", "_"))
    if name in ("latest", "earliest", "max_timestamp"):
        return name
    unreadable = (  # parse_time's own message names only the time forms
        f"samsa: --time {text!r} is not earliest (-2), latest (-1), max-timestamp (-3), "
        "ms since epoch or ISO 8601"
    )
    return parse_time(text.strip(), "--time", unreadable)
