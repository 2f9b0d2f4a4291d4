"""`samsa reassign`: move partitions' replicas between brokers, as Kafka's
kafka-reassign-partitions.sh — thin over Admin.alter_partition_reassignments,
list_partition_reassignments and describe_topics. reassignment_plan.py reads and writes its
files and words.

    --generate --topics-to-move-json-file F --broker-list 1,2,3   print a plan (writes nothing)
    --execute --reassignment-json-file F [--additional]          print the current assignment
              [--throttle B/s]                                   (to roll back), then start it
    --verify --reassignment-json-file F       complete / still in progress; exit 1 until all are
             [--preserve-throttles]           (once all are, removes the throttles)
    --cancel --reassignment-json-file F       drop the replicas being added, keep the old ones
    --list                                    every reassignment in progress

The files are read, and refused when wrong, before the cluster is asked anything. The
replication throttles (--throttle, KIP-73) are set and cleared by reassign_throttle.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path

from samsa.cli.command_support import client_config, table
from samsa.cli.reassign_throttle import clear_throttles, parse_throttle, set_throttles
from samsa.cli.reassignment_plan import (
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_to_move,
    plan_json,
    propose_assignment,
    verify_lines,
)
from samsa.client import Admin, TopicError
from samsa.client.cluster_admin import PartitionInfo
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode

TopicPartition = tuple[str, int]
MODES = ("generate", "execute", "verify", "cancel", "list")
# The flags each mode takes beside the connection's (any other is a usage error, not ignored).
MODE_FLAGS = {
    "generate": {"topics_to_move_json_file", "broker_list"},
    "execute": {"reassignment_json_file", "additional", "throttle"},
    "verify": {"reassignment_json_file", "preserve_throttles"},
    "cancel": {"reassignment_json_file"},
    "list": set(),
}
FLAG_NAMES = {
    "topics_to_move_json_file": "--topics-to-move-json-file FILE",
    "broker_list": "--broker-list 1,2,3",
    "reassignment_json_file": "--reassignment-json-file FILE",
    "additional": "--additional",
    "throttle": "--throttle B/s",
    "preserve_throttles": "--preserve-throttles",
}
OPTIONAL_FLAGS = {"additional", "throttle", "preserve_throttles"}


def add_reassign_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    reassign = commands.add_parser(
        "reassign",
        help="move partitions' replicas to other brokers, as kafka-reassign-partitions.sh",
    )
    mode = reassign.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--generate", action="store_true", help="print a plan spreading topics over brokers"
    )
    mode.add_argument(
        "--execute", action="store_true", help="start the reassignment the JSON file names"
    )
    mode.add_argument(
        "--verify", action="store_true", help="has each partition reached its target?"
    )
    mode.add_argument("--cancel", action="store_true", help="cancel the file's reassignments")
    mode.add_argument("--list", action="store_true", help="the reassignments in progress")
    reassign.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}',
    )
    reassign.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='with --generate: {"version":1,"topics":[{"topic":"t"}]}',
    )
    reassign.add_argument(
        "--broker-list", metavar="1,2,3", help="with --generate: the brokers to spread over"
    )
    reassign.add_argument(
        "--additional",
        action="store_true",
        help="with --execute: start even while other reassignments are in progress",
    )
    reassign.add_argument(
        "--throttle",
        metavar="B/s",
        help="with --execute: cap the move's replication at this many bytes per second per "
        "broker (KIP-73's throttles; --verify removes them once the move is complete)",
    )
    reassign.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="with --verify: keep the throttles after the move is complete",
    )
    add_connection(reassign)  # type: ignore[operator]


def prepare_reassign(args: argparse.Namespace) -> str | None:
    """A usage error (for `run` to report, exit 2), or None once the files are read into
    `args.targets`, `args.topics` and `args.brokers`: a file that cannot be read or is not the
    JSON expected exits here (1), before the cluster is asked anything."""
    mode = next(m for m in MODES if getattr(args, m))
    for flag, name in FLAG_NAMES.items():
        given = getattr(args, flag) not in (None, False)
        if given and flag not in MODE_FLAGS[mode]:
            return f"{name.split()[0]} does not go with --{mode}"
        if not given and flag in MODE_FLAGS[mode] and flag not in OPTIONAL_FLAGS:
            return f"--{mode} needs {name}"
    args.throttle_rate = parse_throttle(getattr(args, "throttle", None))
    if args.reassignment_json_file is not None:
        path = args.reassignment_json_file
        args.targets = parse_reassignment_json(_read(path), path)
    if mode == "generate":
        path = args.topics_to_move_json_file
        args.topics = parse_topics_to_move(_read(path), path)
        args.brokers = parse_broker_list(args.broker_list)
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise SystemExit(f"samsa reassign: cannot read {path}: {reason}") from None


def run_reassign(args: argparse.Namespace, bootstrap: str) -> int:
    with Admin(client_config(args, bootstrap)) as admin:
        return reassign(admin, args)


def reassign(admin: Admin, args: argparse.Namespace) -> int:
    """Run the mode `args` names against `admin`; the exit status."""
    if args.list:
        return _list(admin)
    if args.generate:
        return _generate(admin, args.topics, args.brokers)
    if args.verify:
        lines, done = verify_lines(args.targets, _described(admin, args.targets))
        print("\n".join(["Status of partition reassignment:", *lines]))
        if done and not args.preserve_throttles:
            clear_throttles(admin, (topic for topic, _ in args.targets))
        return 0 if done else 1
    if args.cancel:
        return _cancel(admin, args.targets)
    return _execute(admin, args.targets, args.additional, args.throttle_rate)


def _described(admin: Admin, keys: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionInfo]:
    """The partitions named, as described now; exits naming one that does not exist (TopicError
    for a topic that does not)."""
    keys = list(keys)
    topics = admin.describe_topics(dict.fromkeys(topic for topic, _ in keys))
    found = {(name, p.partition): p for name, info in topics.items() for p in info.partitions}
    for topic, number in keys:
        if (topic, number) not in found:
            count = len(topics[topic].partitions)
            raise SystemExit(
                f"samsa reassign: topic {topic!r} has no partition {number} (it has {count}: "
                f"0 to {count - 1})"
            )
    return found


def _names(keys: Iterable[TopicPartition]) -> str:
    return ",".join(f"{topic}-{number}" for topic, number in keys)


def _alter(
    admin: Admin, wanted: Mapping[TopicPartition, tuple[int, ...] | None]
) -> Mapping[Hashable, KafkaError]:
    """Each partition refused, by (topic, partition); the others were done."""
    try:
        admin.alter_partition_reassignments(wanted)
    except TopicError as error:
        if not error.errors:  # refused whole: nothing is known done
            raise
        return error.errors
    return {}


def _execute(
    admin: Admin,
    targets: dict[TopicPartition, tuple[int, ...]],
    additional: bool,
    throttle: int | None = None,
) -> int:
    current = _described(admin, targets)
    moving = admin.list_partition_reassignments()
    if moving and not additional:
        raise SystemExit(
            f"samsa reassign: {len(moving)} partition(s) are being reassigned already "
            f"({_names(sorted(moving)[:5])}{', ...' if len(moving) > 5 else ''}): --list or "
            "--verify them, or pass --additional to start these too"
        )
    print("Current partition replica assignment\n")
    print(plan_json({key: current[key].replicas for key in targets}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle is not None:
        set_throttles(admin, throttle, {key: current[key].replicas for key in targets}, targets)
    refused = _alter(admin, targets)
    if started := [key for key in targets if key not in refused]:
        print(f"Successfully started partition reassignments for {_names(started)}")
    for error in refused.values():
        print(f"samsa reassign: {error} ({error.code.name})", file=sys.stderr)
    return 1 if refused else 0


def _cancel(admin: Admin, targets: dict[TopicPartition, tuple[int, ...]]) -> int:
    """Cancel each partition's reassignment; one with none in progress (it completed, or never
    began) is said so on stdout, as nothing is left to cancel; other refusals are errors."""
    refused = _alter(admin, dict.fromkeys(targets))
    idle = [k for k, e in refused.items() if e.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
    if cancelled := [key for key in targets if key not in refused]:
        print(f"Successfully cancelled partition reassignments for: {_names(cancelled)}")
    for topic, number in idle:
        print(f"No reassignment of partition {topic}-{number} is in progress.")
    failed = [e for k, e in refused.items() if k not in idle]
    for error in failed:
        print(f"samsa reassign: {error} ({error.code.name})", file=sys.stderr)
    return 1 if failed else 0


def _list(admin: Admin) -> int:
    found = admin.list_partition_reassignments()
    if not found:
        print("no reassignments in progress")
        return 0
    rows = [
        (
            topic,
            number,
            ",".join(map(str, r.replicas)),
            ",".join(map(str, r.adding_replicas)) or "-",
            ",".join(map(str, r.removing_replicas)) or "-",
        )
        for (topic, number), r in sorted(found.items())
    ]
    print(table(("topic", "partition", "replicas", "adding", "removing"), rows))
    return 0


def _generate(admin: Admin, topics: list[str], brokers: list[int]) -> int:
    registered = sorted(b.broker_id for b in admin.describe_cluster().brokers)
    if unknown := [b for b in brokers if b not in registered]:
        raise SystemExit(
            f"samsa reassign: --broker-list names broker(s) {','.join(map(str, unknown))} that "
            f"are not registered (registered: {','.join(map(str, registered)) or 'none'})"
        )
    current = {
        (name, p.partition): p.replicas
        for name, info in admin.describe_topics(topics).items()
        for p in info.partitions
    }
    print("Current partition replica assignment")
    print(plan_json(current))
    print("\nProposed partition reassignment configuration")
    print(plan_json(propose_assignment(current, brokers)))
    return 0
