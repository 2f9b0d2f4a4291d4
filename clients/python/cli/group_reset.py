"""`samsa groups reset-offsets`: Kafka's `kafka-consumer-groups.sh --reset-offsets`. Its flags'
checks (before connecting), the partitions in scope, and the plan: printed (a dry run, the
default) or committed with --execute, either only while the group has no members, as Kafka's
tool allows; plan_offset_resets (samsa.client.group_admin) chooses each new offset, and one
clamped to its log gets Kafka's warning on stderr.
group_commands.py declares the flags and runs the command.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from samsa.cli.command_support import (
    client_config,
    offsets_csv,
    parse_duration_ms,
    parse_offsets_csv,
    parse_time,
    require_topic,
    table,
    time_in_range,
)
from samsa.client import Admin, Consumer
from samsa.client.group_admin import (
    GroupError,
    OffsetReset,
    TopicPartition,
    plan_offset_resets,
)
from samsa.common.errors import ErrorCode

# The states in which a group's offsets may be reset (Kafka's tool: Empty, or Dead for a group
# that does not exist, whose offsets the commit creates).
INACTIVE_STATES = ("Empty", "Dead")


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


def partitions_to_reset(
    admin: Admin, args: argparse.Namespace, from_file: Mapping[TopicPartition, int] | None
) -> list[TopicPartition]:
    """The partitions in scope: those of each --topic (checked to exist), with --all-topics
    every partition the group has committed that still exists (Kafka's tool does the same, its
    coordinator having dropped the offsets of deleted topics), or the file's."""
    if from_file is not None:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(from_file):
            topics.setdefault(topic, []).append(partition)
        return named_partitions(admin, list(topics.items()))
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
    return named_partitions(admin, reset_scope(args.topic, args.partitions))


def named_partitions(
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


def reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """Kafka's `kafka-consumer-groups.sh --reset-offsets`: print the plan; commit it with
    --execute. Refused, dry run or not, while the group is active (require_inactive)."""
    strategy, value = reset_strategy(args)
    from_file = None
    if strategy == "from-file":
        from_file = parse_offsets_csv(_read_text(args.from_file), args.from_file)
    require_inactive(admin, args.group)
    partitions = partitions_to_reset(admin, args, from_file)
    committed = admin.list_consumer_group_offsets(args.group, partitions)
    with Consumer(client_config(args)) as consumer:
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
    for line in clamped_lines(plan):
        print(f"samsa groups reset-offsets: warning: {line}", file=sys.stderr)
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
            f"{args.group}",
            file=sys.stderr,
        )
        return 0
    admin.alter_consumer_group_offsets(
        args.group, {(r.topic, r.partition): r.new_offset for r in plan}
    )
    print(f"\ncommitted {len(plan)} offset(s) for group {args.group}", file=sys.stderr)
    return 0


def clamped_lines(plan: Sequence[OffsetReset]) -> list[str]:
    """Kafka's tool's warning for each partition whose chosen offset lay outside its log and
    was clamped to the log's end or start: which partition, and the offset it gets instead."""
    lines = []
    for r in plan:
        if r.clamped_from is None:
            continue
        side = "higher than latest" if r.clamped_from > r.new_offset else "lower than earliest"
        lines.append(
            f"New offset ({r.clamped_from}) is {side} offset for topic partition "
            f"{r.topic}-{r.partition}. Value will be set to {r.new_offset}"
        )
    return lines


def require_inactive(admin: Admin, group_id: str) -> None:
    """Exit (status 1) unless the group is Empty or does not exist (Kafka's Dead), with Kafka's
    line: its tool refuses a dry run as well as --execute for a group with members, since the
    plan of an active group is stale at once (its members go on committing) and could not be
    committed anyway (the coordinator takes an outside commit only while the group has none)."""
    try:
        state = admin.describe_consumer_groups([group_id])[group_id].state
    except GroupError as error:
        if error.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
        state = "Dead"
    if state not in INACTIVE_STATES:
        raise SystemExit(
            f"samsa groups reset-offsets: Assignments can only be reset if the group "
            f"'{group_id}' is inactive, but the current state is {state}: stop its consumers "
            "first"
        )


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as error:
        raise SystemExit(
            f"samsa groups reset-offsets: --from-file {path}: {error.strerror}"
        ) from None
