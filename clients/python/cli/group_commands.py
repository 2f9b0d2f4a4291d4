"""`samsa groups list|describe|lag|reset-offsets|delete|delete-offsets`: consumer groups, as Kafka's
kafka-consumer-groups.sh — thin over Admin's group calls; what they print is group_format.py's.
`list --state` asks the coordinators for the groups in some states only.
`describe`, `lag` and `delete` take group names or --all-groups (every listed group); a group
that fails gets its line on stderr and the others go on. `reset-offsets` is a dry run (the plan,
printed) until --execute, and refuses both while the group has members (as Kafka's). Its scope
and strategies take Kafka's flags: --topic (repeatable, `topic:0,1` for some partitions) or
--all-topics; --to-earliest, --to-latest, --to-current, --to-offset, --to-datetime,
--by-duration, --shift-by or --from-file (which names the partitions itself); --dry-run or
--execute; --export prints the plan as the CSV --from-file reads (group_reset.py runs it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from samsa.cli.command_support import client_config, int64
from samsa.cli.group_format import (
    GROUP_STATES,
    delete_offsets_lines,
    describe_view_lines,
    group_states_of,
    lag_lines,
    listing_lines,
)
from samsa.cli.group_reset import named_partitions, reset_offsets, reset_usage_error
from samsa.client import Admin
from samsa.client.group_admin import GroupError, coordinator_retriable


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
    with Admin(client_config(args)) as admin:
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
            return reset_offsets(admin, args)
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


def _delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """Kafka's `kafka-consumer-groups.sh --delete-offsets`: per partition, deleted or why not;
    exit status 1 when any offset stays."""
    partitions = named_partitions(admin, args.topic)
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
