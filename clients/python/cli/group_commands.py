"""`samsa groups list|describe|lag|reset-offsets|delete|delete-offsets`: consumer groups, as Kafka's
kafka-consumer-groups.sh — thin over Admin's group calls; what they print is group_format.py's.
`list --state` asks the coordinators for the groups in some states only.
`describe`, `lag` and `delete` take group names or --all-groups (every listed group); a group
that fails gets its line on stderr and the others go on. `reset-offsets` is a dry run (the plan,
printed) until --execute, and the coordinator refuses it while the group has members. Its scope
and strategies take Kafka's flags: --topic (repeatable, `topic:0,1` for some partitions) or
--all-topics; --to-earliest, --to-latest, --to-current, --to-offset, --to-datetime,
--by-duration, --shift-by or --from-file (which names the partitions itself); --dry-run or
--execute; --export prints the plan as the CSV --from-file reads.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from samsa.cli.command_support import (
    bootstrap,
    int64,
    offsets_csv,
    parse_duration_ms,
    parse_offsets_csv,
    parse_time,
    require_topic,
    table,
    time_in_range,
)
from samsa.cli.group_format import (
    GROUP_STATES,
    delete_offsets_lines,
    describe_view_lines,
    group_states_of,
    lag_lines,
    listing_lines,
)
from samsa.client import Admin, Consumer
from samsa.client.group_admin import (
    GroupError,
    TopicPartition,
    coordinator_retriable,
    plan_offset_resets,
)


def add_group_commands(
    commands: argparse._SubParsersAction, add_connection: Callable[[argparse.ArgumentParser], None]
) -> None:
    groups = commands.add_parser(
        "groups", help="list, describe, lag, reset or delete offsets of, delete consumer groups"
    )
    actions = groups.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every consumer group: state and member count")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        help=f"only groups in this state (repeatable, or a,b; any case): {', '.join(GROUP_STATES)}",
    )
    describe = actions.add_parser("describe", help="state, epochs, assignor, members")
    view = describe.add_mutually_exclusive_group()
    for flag, what in (
        ("--members", "only the members table"),
        ("--state", "only the state line: state, epochs, assignor, member count"),
        ("--offsets", "only the lag table (what `samsa groups lag` prints)"),
    ):
        view.add_argument(flag, dest="view", action="store_const", const=flag[2:], help=what)
    describe.set_defaults(view="all")
    lag = actions.add_parser("lag", help="committed offset, log end offset and lag per partition")
    lag.set_defaults(view="offsets")
    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets (prints the plan unless --execute)"
    )
    reset.add_argument("group", nargs="?")
    scope = reset.add_mutually_exclusive_group()  # required unless --from-file: reset_scope
    scope.add_argument("--topic", **TOPIC_ARGUMENT)
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has committed"
    )
    reset.add_argument(
        "--partitions", type=_partition_list, help="comma-separated, e.g. 0,1 (default: all)"
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument(
        "--to-current",
        action="store_true",
        help="the committed offset (the log end where none is)",
    )
    target.add_argument("--to-offset", type=int64, metavar="N", help="this offset (each partition)")
    target.add_argument(
        "--to-datetime",
        metavar="TIME",
        help="the first offset at or after TIME (ISO 8601, UTC unless it names a zone; or ms)",
    )
    target.add_argument(
        "--by-duration",
        metavar="DURATION",
        help="the first offset at or after now minus DURATION (ISO 8601: PT1H, P1DT12H)",
    )
    target.add_argument(
        "--shift-by", type=int64, metavar="N", help="the committed offset plus N (may be negative)"
    )
    target.add_argument(
        "--from-file",
        metavar="FILE",
        help="the offsets of a topic,partition,offset file (--export writes one); names the scope",
    )
    reset.add_argument(
        "--export", action="store_true", help="print the plan as topic,partition,offset lines"
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the plan")
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    delete = actions.add_parser("delete", help="delete empty groups and their committed offsets")
    for parser in (describe, lag, delete):
        parser.add_argument("groups", nargs="*", metavar="GROUP")
        parser.add_argument("--all-groups", action="store_true", help="every group listed")
        parser.add_argument(
            "--group", dest="group_flags", action="append", default=[], help=GROUP_FLAG_HELP
        )
    delete_offsets = actions.add_parser(
        "delete-offsets",
        help="delete a group's committed offsets of topics its members do not subscribe to",
    )
    delete_offsets.add_argument("group", nargs="?")
    for parser in (reset, delete_offsets):
        parser.add_argument(
            "--group", dest="group_flags", action="append", default=[], help=GROUP_FLAG_HELP
        )
    delete_offsets.add_argument("--topic", required=True, **TOPIC_ARGUMENT)
    for parser in (listing, describe, lag, reset, delete, delete_offsets):
        add_connection(parser)


def _topic_scope(text: str) -> tuple[str, list[int] | None]:
    """`--topic orders` (every partition) or `--topic orders:0,2`, as Kafka's tool reads it."""
    name, colon, partitions = text.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"{text!r}: name the topic, as topic or topic:0,1")
    return name, _partition_list(partitions) if colon else None


def _partition_list(text: str) -> list[int]:
    """`--partitions 0,1,3` as sorted partition numbers."""
    try:
        numbers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers"
        ) from None
    if not numbers or numbers[0] < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: partitions are numbers from 0")
    return numbers


# `--topic` of reset-offsets and delete-offsets: Kafka's `topic` or `topic:0,1`, repeatable.
TOPIC_ARGUMENT: dict[str, Any] = {
    "action": "append",
    "type": _topic_scope,
    "metavar": "TOPIC[:P,...]",
    "help": "a topic, or some of its partitions as topic:0,1 (repeatable)",
}


GROUP_FLAG_HELP = "a group, as Kafka's kafka-consumer-groups names it (the same as GROUP)"


def groups_usage_error(args: argparse.Namespace) -> str | None:
    """A usage error argparse cannot see, for `run` to report before connecting (exit 2). Folds
    Kafka's `--group` flags into the positional GROUP(s) first."""
    flags = getattr(args, "group_flags", [])
    if args.action in ("describe", "lag", "delete"):
        args.groups = list(dict.fromkeys([*args.groups, *flags]))
    elif args.action in ("reset-offsets", "delete-offsets"):
        named = list(dict.fromkeys([*([args.group] if args.group else []), *flags]))
        if len(named) != 1:
            problem = "two groups given" if named else "no group given"
            return (
                f"{args.action}: {problem}; name one: samsa groups {args.action} GROUP "
                "(or --group GROUP)"
            )
        args.group = named[0]
    if args.action == "reset-offsets":
        problem = reset_usage_error(args)
        return None if problem is None else f"reset-offsets: {problem}"
    if args.action == "list":
        _, unknown = group_states_of(args.state)
        if unknown:
            names = ", ".join(repr(state) for state in unknown)
            return f"list: no state {names}: the states are {', '.join(GROUP_STATES)}"
    if args.action in ("describe", "lag", "delete") and bool(args.groups) == args.all_groups:
        if args.all_groups:
            return f"{args.action}: name groups or give --all-groups, not both"
        return f"{args.action}: name one or more groups, or give --all-groups"
    return None


def run_groups(args: argparse.Namespace) -> int:
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
        if not any(not x.fenced for x in admin.describe_cluster().coordinators):
            raise SystemExit(
                "samsa groups: no coordinator is live, and consumer groups live on coordinators "
                "(`samsa up --coordinators 2` runs two)"
            )
        if args.action == "list":
            states, _ = group_states_of(args.state)  # groups_usage_error refused unknown ones
            print(listing_lines(admin.list_consumer_groups(sorted(states))))
        elif args.action in ("describe", "lag", "delete"):
            group_ids = args.groups or [x.group_id for x in admin.list_consumer_groups()]
            if not group_ids:
                print("no groups")
            elif args.action == "delete":
                return _delete_groups(admin, group_ids)
            else:
                return _describe_groups(admin, args, group_ids)
        elif args.action == "reset-offsets":
            return _reset_offsets(admin, args)
        elif args.action == "delete-offsets":
            return _delete_offsets(admin, args)
    return 0


def _describe_groups(admin: Admin, args: argparse.Namespace, group_ids: Sequence[str]) -> int:
    """`describe` (in its view) or `lag` of each group, one block each with a blank line between
    (titled when several, as their tables do not name the group). A group that does not exist
    gets its line on stderr and the others go on (exit status 1); a coordinator that does not
    answer stops the command, as it would for every group after it."""
    titled = args.all_groups or len(group_ids) > 1
    shown = failed = 0
    for group_id in group_ids:
        try:
            if args.view == "offsets":
                rows = admin.describe_consumer_group_lag(group_id)
                block = lag_lines(group_id, rows, titled)
            else:
                group = admin.describe_consumer_groups([group_id])[group_id]
                block = describe_view_lines(group, args.view, titled)
        except GroupError as error:
            if coordinator_retriable(error.code):
                raise
            print(f"samsa groups {args.action}: {error} ({error.code.name})", file=sys.stderr)
            failed += 1
            continue
        print(block if not shown else "\n" + block, flush=True)
        shown += 1
    return 1 if failed else 0


def reset_strategy(args: argparse.Namespace, now_ms: int | None = None) -> tuple[str, int]:
    """The chosen --to-*/--by-duration/--shift-by flag as (strategy, value) for
    plan_offset_resets; --by-duration is a --to-datetime of `now_ms` minus the duration."""
    if args.to_earliest:
        return "to-earliest", 0
    if args.to_latest:
        return "to-latest", 0
    if args.to_current:
        return "to-current", 0
    if args.to_offset is not None:
        return "to-offset", args.to_offset
    if args.to_datetime is not None:
        return "to-datetime", parse_time(args.to_datetime, "--to-datetime")
    if args.by_duration is not None:
        ago_ms = parse_duration_ms(args.by_duration, "--by-duration")
        at_ms = (int(time.time() * 1000) if now_ms is None else now_ms) - ago_ms
        return "to-datetime", time_in_range(at_ms, "--by-duration", args.by_duration)
    if args.from_file is not None:
        return "from-file", 0
    assert args.shift_by is not None, "argparse requires one strategy"
    return "shift-by", args.shift_by


def reset_usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with reset-offsets' scope flags, checked before connecting: one of --topic
    and --all-topics unless --from-file, which names its partitions itself; --partitions only
    beside --topic."""
    if args.from_file is not None:
        if args.topic or args.all_topics or args.partitions is not None:
            return "--from-file names its partitions: drop --topic, --all-topics and --partitions"
        return None
    if not args.topic and not args.all_topics:
        return "name the partitions: --topic (repeatable, topic:0,1), --all-topics or --from-file"
    if args.partitions is not None and (
        args.all_topics or len(args.topic) != 1 or args.topic[0][1] is not None
    ):
        return (
            "--partitions goes with one --topic that names no partitions; name them per topic "
            "instead (--topic orders:0,1 --topic audit:2)"
        )
    return None


def reset_scope(
    topics: Sequence[tuple[str, list[int] | None]], partitions: list[int] | None
) -> list[tuple[str, list[int] | None]]:
    """Each --topic with the partitions it names; --partitions applies to the single topic that
    names none of its own (None: every partition of that topic; reset_usage_error checked the
    flags before connecting)."""
    if partitions is None:
        return list(topics)
    assert len(topics) == 1 and topics[0][1] is None, "reset_usage_error refuses this"
    return [(topics[0][0], partitions)]


def _partitions_to_reset(
    admin: Admin, args: argparse.Namespace, from_file: Mapping[TopicPartition, int] | None
) -> list[TopicPartition]:
    """The partitions in scope: those of each --topic (checked to exist), with --all-topics
    every partition the group has committed that still exists (Kafka's tool does the same, its
    coordinator having dropped the offsets of deleted topics), or the file's."""
    if from_file is not None:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(from_file):
            topics.setdefault(topic, []).append(partition)
        return _named_partitions(admin, list(topics.items()))
    if args.all_topics:
        # A partition deleted since its commit is left out, as Kafka's coordinator drops the
        # offsets of a deleted topic: it has no log offsets to list (they were waited for).
        topics = admin.describe_topics()
        existing = {(name, p.partition) for name, x in topics.items() for p in x.partitions}
        committed = sorted(admin.list_consumer_group_offsets(args.group))
        if gone := [f"{t}-{p}" for t, p in committed if (t, p) not in existing]:
            print(f"left out {', '.join(gone)}: deleted since committed", file=sys.stderr)
        committed = [tp for tp in committed if tp in existing]
        if not committed:
            raise SystemExit(
                f"samsa groups reset-offsets: group {args.group} has committed no offsets of "
                "existing partitions, so --all-topics names nothing: name the topics with --topic"
            )
        return committed
    return _named_partitions(admin, reset_scope(args.topic, args.partitions))


def _named_partitions(
    admin: Admin, topics: Sequence[tuple[str, list[int] | None]]
) -> list[TopicPartition]:
    """The partitions each --topic names (None: all of that topic's), checked to exist."""
    chosen: list[TopicPartition] = []
    for topic, wanted in topics:
        existing = [p.partition for p in require_topic(admin, topic).partitions]
        missing = sorted(set(wanted or ()) - set(existing))
        if missing:
            raise SystemExit(
                f"samsa: topic {topic!r} has no partition(s) {missing} "
                f"(it has {len(existing)}: 0 to {len(existing) - 1})"
            )
        chosen += [(topic, p) for p in wanted or existing if (topic, p) not in chosen]
    return chosen


def _reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """Kafka's `kafka-consumer-groups.sh --reset-offsets`: print the plan; commit it with
    --execute (the coordinator refuses while the group has members)."""
    strategy, value = reset_strategy(args)
    from_file = None
    if strategy == "from-file":
        from_file = parse_offsets_csv(_read_text(args.from_file), args.from_file)
    partitions = _partitions_to_reset(admin, args, from_file)
    committed = admin.list_consumer_group_offsets(args.group, partitions)
    with Consumer({"bootstrap.servers": bootstrap(args)}) as consumer:
        earliest = consumer.beginning_offsets(partitions)
        latest = consumer.end_offsets(partitions)
        found: Mapping[TopicPartition, int | None] | None = from_file
        if strategy == "to-datetime":
            at = consumer.offsets_for_times({tp: value for tp in partitions})
            found = {tp: None if x is None else x.offset for tp, x in at.items()}
    try:
        plan = plan_offset_resets(
            partitions,
            {tp: x.offset for tp, x in committed.items()},
            earliest,
            latest,
            strategy,
            value,
            found,
        )
    except ValueError as error:
        raise SystemExit(f"samsa groups reset-offsets: {error}") from None
    if args.export:
        print(offsets_csv((r.topic, r.partition, r.new_offset) for r in plan), end="")
    else:
        rows = [
            (r.topic, r.partition, r.current_offset if r.current_offset >= 0 else "-", r.new_offset)
            for r in plan
        ]
        print(table(("topic", "partition", "current offset", "new offset"), rows))
    if not args.execute:
        print(
            f"\ndry run: nothing changed; add --execute to commit these offsets for group "
            f"{args.group} (its consumers must be stopped)",
            file=sys.stderr,
        )
        return 0
    admin.alter_consumer_group_offsets(
        args.group, {(r.topic, r.partition): r.new_offset for r in plan}
    )
    print(f"\ncommitted {len(plan)} offset(s) for group {args.group}", file=sys.stderr)
    return 0


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as error:
        raise SystemExit(
            f"samsa groups reset-offsets: --from-file {path}: {error.strerror}"
        ) from None


def _delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """Kafka's `kafka-consumer-groups.sh --delete-offsets`: per partition, deleted or why not;
    exit status 1 when any offset stays."""
    partitions = _named_partitions(admin, args.topic)
    try:
        outcomes = admin.delete_consumer_group_offsets(args.group, partitions)
    except GroupError as error:
        raise SystemExit(f"samsa groups delete-offsets: {error} ({error.code.name})") from None
    print(delete_offsets_lines(outcomes))
    refused = [error for error in outcomes.values() if error is not None]
    for message in dict.fromkeys(str(error) for error in refused):  # one line per topic
        print(f"samsa groups delete-offsets: {message}", file=sys.stderr)
    return 1 if refused else 0


def _delete_groups(admin: Admin, group_ids: Sequence[str]) -> int:
    """Each group on its own, so that every one gets its line: deleted, or why not."""
    failed = 0
    for group_id in group_ids:
        try:
            admin.delete_consumer_groups([group_id])
        except GroupError as error:
            print(f"samsa groups delete: {error} ({error.code.name})", file=sys.stderr)
            failed += 1
            continue
        print(f"deleted {group_id}")
    return 1 if failed else 0
