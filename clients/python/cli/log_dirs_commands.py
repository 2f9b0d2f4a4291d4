"""`samsa log-dirs`: what each broker stores, as Kafka's kafka-log-dirs.sh — thin over
Admin.describe_log_dirs.

    --describe [--broker-list 1,2] [--topic-list a,b] [--json]

A table by default: one row per replica (broker, log dir, partition, size in bytes, offset lag),
then one row per log dir with its totals (replicas, their bytes, the disk's total and usable
bytes, its error). --json prints Kafka's JSON instead ({"version":1,"brokers":[{"broker":1,
"logDirs":[{"logDir":...,"error":null,"partitions":[{"partition":"t-0","size":...,
"offsetLag":0,"isFuture":false}]}]}]}), each log dir with KIP-827's "totalBytes" and
"usableBytes" beside Kafka's keys.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping

from samsa.cli.command_support import client_config, table
from samsa.client import Admin
from samsa.client.log_dirs import LogDirDescription

Described = Mapping[int, Mapping[str, LogDirDescription]]


def add_log_dirs_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    log_dirs = commands.add_parser(
        "log-dirs",
        help="each broker's log dir: its disk space and the size of each replica "
        "(kafka-log-dirs.sh)",
    )
    log_dirs.add_argument(
        "--describe", action="store_true", required=True, help="describe the log dirs"
    )
    log_dirs.add_argument(
        "--broker-list", metavar="1,2", help="the brokers to describe (default: all registered)"
    )
    log_dirs.add_argument(
        "--topic-list", metavar="a,b", help="the topics whose replicas to list (default: all)"
    )
    log_dirs.add_argument("--json", action="store_true", help="Kafka's JSON instead of tables")
    add_connection(log_dirs)  # type: ignore[operator]


def log_dirs_usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with --broker-list or --topic-list (for `run` to report, exit 2), or None
    once they are read into `args.brokers` and `args.topics` (None: all)."""
    args.brokers = args.topics = None
    if args.broker_list is not None:
        items = [item.strip() for item in args.broker_list.split(",")]
        if not all(item.isdigit() and int(item) < 2**31 for item in items):
            return f"--broker-list {args.broker_list!r} is not a list of broker ids such as 1,2"
        args.brokers = [int(item) for item in items]
    if args.topic_list is not None:
        args.topics = [item.strip() for item in args.topic_list.split(",")]
        if not all(args.topics):
            return f"--topic-list {args.topic_list!r} is not a list of topics such as a,b"
    return None


def run_log_dirs(args: argparse.Namespace, bootstrap: str) -> int:
    with Admin(client_config(args, bootstrap)) as admin:
        described = admin.describe_log_dirs(args.brokers, args.topics)
    print(log_dirs_json(described) if args.json else log_dirs_tables(described))
    failed = [d.error for dirs in described.values() for d in dirs.values() if d.error]
    for error in failed:
        print(f"samsa log-dirs: {error} ({error.code.name})", file=sys.stderr)
    return 1 if failed else 0


def log_dirs_json(described: Described) -> str:
    """Kafka's kafka-log-dirs.sh JSON of `described`, brokers and partitions in order."""
    brokers = [
        {
            "broker": broker_id,
            "logDirs": [
                {
                    "logDir": path,
                    "error": None if d.error is None else d.error.code.name,
                    "partitions": [
                        {
                            "partition": f"{topic}-{number}",
                            "size": replica.size,
                            "offsetLag": replica.offset_lag,
                            "isFuture": replica.is_future,
                        }
                        for (topic, number), replica in sorted(d.replicas.items())
                    ],
                    "totalBytes": d.total_bytes,
                    "usableBytes": d.usable_bytes,
                }
                for path, d in sorted(dirs.items())
            ],
        }
        for broker_id, dirs in sorted(described.items())
    ]
    return json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"))


def log_dirs_tables(described: Described) -> str:
    """The replicas' table, then the log dirs' totals."""
    replicas = [
        (broker_id, path, f"{topic}-{number}", replica.size, replica.offset_lag)
        for broker_id, dirs in sorted(described.items())
        for path, d in sorted(dirs.items())
        for (topic, number), replica in sorted(d.replicas.items())
    ]
    totals = [
        (
            broker_id,
            path,
            len(d.replicas),
            sum(replica.size for replica in d.replicas.values()),
            d.total_bytes,
            d.usable_bytes,
            "-" if d.error is None else d.error.code.name,
        )
        for broker_id, dirs in sorted(described.items())
        for path, d in sorted(dirs.items())
    ]
    parts = []
    if replicas:
        parts.append(table(("broker", "dir", "partition", "size", "lag"), replicas))
    else:
        parts.append("no replicas")
    headers = ("broker", "dir", "replicas", "size", "total bytes", "usable bytes", "error")
    parts.append(table(headers, totals))
    return "\n\n".join(parts)
