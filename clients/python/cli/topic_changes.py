"""`samsa topics alter` and `samsa topics delete-records`: the topic commands that change what
a topic holds (partitions, configs, records), thin over Admin."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Hashable, Mapping

from samsa.cli.command_support import (
    INT64_MAX,
    int32,
    key_value,
    replica_assignment,
    require_topic,
    table,
)
from samsa.client import Admin, TopicError
from samsa.client.errors import KafkaError

HIGH_WATERMARK = -1  # DeleteRecords' offset for "every committed record"
# Kafka's kafka-topics.sh says as much when it adds partitions: the default partitioner hashes a
# key over the partition count, so many keys now go to another partition than their past records.
KEYED_PARTITIONS_WARNING = (
    "WARNING: if the topic's records have keys, many keys now go to another partition: their "
    "records from before stay where they were (a consumer may read a key's new records before "
    "its old ones, and a compacted topic keeps a key's old value beside its new one)"
)


def add_topic_change_parsers(actions: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """Add `alter` and `delete-records` under `samsa topics`; returns their parsers."""
    alter = actions.add_parser(
        "alter", help="add partitions, set or reset configs (Kafka's kafka-topics/kafka-configs)"
    )
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int32, help="the new partition count (only grows)")
    alter.add_argument(
        "--replica-assignment",
        type=replica_assignment,
        metavar="B:B,B:B",
        help="with --partitions: every partition's broker ids, the existing ones first (they "
        "stay where they are), the first of each the preferred leader, as Kafka's kafka-topics",
    )
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="back to default"
    )
    delete_records = actions.add_parser(
        "delete-records",
        help="delete the records below an offset (Kafka's kafka-delete-records)",
    )
    delete_records.add_argument("name")
    delete_records.add_argument(
        "--offset",
        required=True,
        help="records below it are deleted; `latest` (or -1): every committed record",
    )
    delete_records.add_argument(
        "--partition",
        type=int32,
        action="append",
        default=[],
        help="a partition to delete from (repeatable); default: every partition",
    )
    return [alter, delete_records]


def alter_topic(admin: Admin, args: argparse.Namespace) -> int:
    """Configs first, then partitions: each is one controller write, validated whole (a bad
    config changes nothing); what changed is printed, one line each, and added partitions get
    Kafka's warning about keyed records on stderr. When both change, the partitions are checked
    first (validate_only), so that a refused count or placement leaves the configs as they were
    too (only a change made by someone else in between can still refuse them after)."""
    configs = dict(key_value(item, "--config") for item in args.config)
    if args.replica_assignment is not None and args.partitions is None:
        raise SystemExit(
            "samsa topics alter: --replica-assignment places added partitions: give the new "
            "count with --partitions N too (to move existing ones, see `samsa reassign`)"
        )
    if args.partitions is None and not configs and not args.delete_config:
        raise SystemExit(
            "samsa topics alter: say what to change: --partitions N, --config KEY=VALUE or "
            "--delete-config KEY"
        )
    both = sorted(set(configs) & set(args.delete_config))
    if both:
        raise SystemExit(f"samsa topics alter: {', '.join(both)} both set and deleted: choose one")
    before = len(require_topic(admin, args.name).partitions)
    placed = added_assignments(args.replica_assignment, before)
    plans = None if placed is None else {args.name: placed}
    adding = args.partitions is not None and args.partitions != before
    if configs or args.delete_config:
        if adding:  # refused now rather than after the configs changed
            admin.create_partitions(
                {args.name: args.partitions}, validate_only=True, replica_assignments=plans
            )
        admin.alter_configs(args.name, set=configs, delete=args.delete_config)
        for key, value in configs.items():
            print(f"{args.name}: set {key}={value}")
        for key in args.delete_config:
            print(f"{args.name}: {key} back to its default")
    if adding:
        admin.create_partitions({args.name: args.partitions}, replica_assignments=plans)
        print(f"{args.name}: partitions {before} -> {args.partitions}")
        print(KEYED_PARTITIONS_WARNING, file=sys.stderr)
    elif args.partitions is not None:
        print(f"{args.name}: already has {before} partition(s)")
    return 0


def added_assignments(plan: dict[int, list[int]] | None, current: int) -> list[list[int]] | None:
    """The lists of the partitions to add, from a --replica-assignment that lists every
    partition, the `current` ones first (Kafka's kafka-topics skips them: an alter adds
    partitions and moves none), or exit saying it lists no new partition."""
    if plan is None:
        return None
    if len(plan) <= current:
        raise SystemExit(
            f"samsa topics alter: --replica-assignment lists {len(plan)} partition(s), but the "
            f"topic has {current} already: list every partition, the existing ones first, then "
            "one per partition to add"
        )
    return [plan[p] for p in range(current, len(plan))]


def delete_records(admin: Admin, args: argparse.Namespace) -> int:
    """Each partition's new low watermark, in a table, once its in-sync replicas reached it; a
    refused partition gets its line on stderr (exit status 1). The leaders delete the records
    of the partitions they accept even when another is refused, so those are shown too, as
    Kafka's kafka-delete-records.sh shows each partition's outcome: their log start offset,
    asked of their leaders (a refusal carries no low watermark)."""
    offset = records_offset(args.offset)
    count = len(require_topic(admin, args.name).partitions)
    partitions = args.partition or list(range(count))
    unknown = sorted(p for p in partitions if not 0 <= p < count)
    if unknown:
        raise SystemExit(
            f"samsa topics delete-records: {args.name} has partitions 0 to {count - 1}, "
            f"not {', '.join(map(str, unknown))}"
        )
    asked = [(args.name, p) for p in dict.fromkeys(partitions)]
    refused: Mapping[Hashable, KafkaError] = {}
    try:
        low = admin.delete_records(dict.fromkeys(asked, offset))
    except TopicError as error:
        if not error.errors:  # nothing known of any partition: run()'s error line
            raise
        refused = error.errors
        kept = [key for key in asked if key not in refused]
        starts = admin.list_offsets(dict.fromkeys(kept, "earliest")) if kept else {}
        low = {key: found.offset for key, found in starts.items()}
    if low:
        rows = [(partition, start) for (_, partition), start in low.items()]
        print(table(("partition", "low watermark"), rows))
    for error in refused.values():
        print(f"samsa topics delete-records: {error} ({error.code.name})", file=sys.stderr)
    return 1 if refused else 0


def records_offset(text: str) -> int:
    """--offset: a non-negative offset, or `latest` / -1 for the high watermark."""
    if text.strip().lower() == "latest":
        return HIGH_WATERMARK
    try:
        offset = int(text)
    except ValueError:
        offset = -2
    if not HIGH_WATERMARK <= offset <= INT64_MAX:
        raise SystemExit(
            f"samsa topics delete-records: --offset {text!r} must be an offset (0 or more), "
            "or latest (-1) for every committed record"
        )
    return offset
