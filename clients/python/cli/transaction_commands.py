"""`samsa transactions list|describe|describe-producers|find-hanging|abort`: hanging-transaction
tools, as Kafka's kafka-transactions.sh (KIP-664) — thin over Admin.list_transactions,
describe_transactions, describe_producers, find_hanging_transactions and abort_transaction.
`find-hanging` prints what `abort` takes for each transaction it finds."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

from samsa.cli.command_support import client_config, int32, int64, require_topic, table
from samsa.client import Admin
from samsa.client.transaction_admin import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    STATE_NAMES,
    OpenTransaction,
    ProducerState,
    TransactionDescription,
    state_of,
)


def add_transaction_commands(commands: argparse._SubParsersAction, add_connection: object) -> None:
    transactions = commands.add_parser(
        "transactions", help="list and describe transactional ids; find and abort hanging ones"
    )
    actions = transactions.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every transactional id: producer id and state")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        help=f"only ids in this state (repeatable): {', '.join(STATE_NAMES.values())}",
    )
    listing.add_argument("--producer-id", type=int64, action="append", default=[])
    listing.add_argument(
        "--duration-ms",
        type=int64,
        default=0,
        help="only transactions open at least this long (a hanging one stays open)",
    )
    describe = actions.add_parser(
        "describe", help="state, producer id and epoch, timeout, start and partitions"
    )
    describe.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    producers = actions.add_parser(
        "describe-producers",
        help="a partition's producers: epoch, last write, start of the open transaction",
    )
    hanging = actions.add_parser(
        "find-hanging",
        help="open transactions no coordinator will end, silent for the longest timeout",
    )
    scope = hanging.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", help="the partitions of this topic")
    scope.add_argument(
        "--broker-id", type=int32, help="the partitions this broker leads (internal topics too)"
    )
    hanging.add_argument("--partition", type=int32, help="with --topic: only this partition")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=float,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MS / 60_000,
        metavar="MINUTES",
        help="the coordinators' transaction.max.timeout.ms, in minutes (default: %(default)g)",
    )
    abort = actions.add_parser(
        "abort",
        help="abort a hanging transaction on a partition (its producer silent there for "
        "transaction.max.timeout.ms)",
    )
    for parser in (producers, abort):
        parser.add_argument("--topic", required=True)
        parser.add_argument("--partition", type=int32, required=True)
    abort.add_argument("--producer-id", type=int64, required=True)
    abort.add_argument(
        "--producer-epoch", type=int32, required=True, help="as describe-producers shows it"
    )
    for parser in (listing, describe, producers, hanging, abort):
        add_connection(parser)  # type: ignore[operator]


def transactions_usage_error(args: argparse.Namespace) -> str | None:
    """A usage error argparse cannot see, for `run` to report before connecting (exit 2)."""
    if args.action == "list":
        try:
            for name in args.state:
                state_of(name)
        except ValueError as error:
            return f"list: {error}"
    if args.action != "find-hanging":
        return None
    if args.partition is not None and args.topic is None:
        return "find-hanging: --partition goes with --topic"
    if args.partition is not None and args.partition < 0:
        return f"find-hanging: --partition {args.partition}: partitions are numbers from 0"
    if not args.max_transaction_timeout > 0:
        return "find-hanging: --max-transaction-timeout must be more than 0 minutes"
    if not math.isfinite(args.max_transaction_timeout):  # argparse's float takes "inf"
        return "find-hanging: --max-transaction-timeout must be a finite number of minutes"
    return None


def run_transactions(args: argparse.Namespace, bootstrap: str) -> int:
    with Admin(client_config(args, bootstrap)) as admin:
        if args.action == "list":
            listings = admin.list_transactions(args.state, args.producer_id, args.duration_ms)
            rows = [(x.transactional_id, x.producer_id, x.state) for x in listings]
            print(
                table(("transactional id", "producer id", "state"), rows)
                if rows
                else "no transactional ids"
            )
        elif args.action == "describe":
            described = admin.describe_transactions(args.transactional_ids)
            print("\n".join(describe_lines(d, time.time()) for d in described.values()))
        elif args.action == "describe-producers":
            key = (args.topic, args.partition)
            states = admin.describe_producers([key])[key]
            rows = [producer_row(state) for state in states]
            header = ("producer id", "epoch", "last sequence", "last write", "open txn start")
            print(table(header, rows) if rows else f"no producers on {args.topic}-{args.partition}")
        elif args.action == "find-hanging":
            print(_find_hanging(admin, args))
        else:
            admin.abort_transaction(
                args.topic, args.partition, args.producer_id, args.producer_epoch
            )
            print(
                f"aborted the transaction of producer {args.producer_id} (epoch "
                f"{args.producer_epoch}) on {args.topic}-{args.partition}"
            )
    return 0


def _find_hanging(admin: Admin, args: argparse.Namespace) -> str:
    if args.topic is not None:
        numbers = [p.partition for p in require_topic(admin, args.topic).partitions]
        if args.partition is not None and args.partition not in numbers:
            raise SystemExit(
                f"samsa transactions find-hanging: topic {args.topic!r} has no partition "
                f"{args.partition} (it has {len(numbers)})"
            )
        partitions = [(args.topic, n) for n in numbers if args.partition in (None, n)]
    else:
        partitions = [
            (topic.name, p.partition)
            for topic in admin.describe_topics().values()
            for p in topic.partitions
            if p.leader == args.broker_id
        ]
    max_timeout_ms = round(args.max_transaction_timeout * 60_000)
    return hanging_lines(admin.find_hanging_transactions(partitions, max_timeout_ms))


def hanging_lines(found: Sequence[OpenTransaction]) -> str:
    """Kafka's find-hanging table, and how to abort each transaction found."""
    if not found:
        return "no hanging transactions"
    rows = [
        (
            x.topic,
            x.partition,
            x.producer_id,
            x.producer_epoch,
            x.start_offset,
            f"{x.silent_ms / 60_000:.1f}",
        )
        for x in found
    ]
    headers = ("topic", "partition", "producer id", "epoch", "start offset", "silent (min)")
    first = found[0]
    return (
        table(headers, rows)
        + "\n\nabort each with: samsa transactions abort --topic TOPIC --partition P "
        + "--producer-id ID --producer-epoch EPOCH\n(e.g. --topic "
        + f"{first.topic} --partition {first.partition} --producer-id {first.producer_id} "
        + f"--producer-epoch {first.producer_epoch})"
    )


def producer_row(state: ProducerState) -> tuple[object, ...]:
    last_write = f"{state.last_append_age_ms / 1000:.1f}s ago"
    open_at = state.current_txn_start_offset if state.current_txn_start_offset >= 0 else "-"
    return (state.producer_id, state.producer_epoch, state.last_sequence, last_write, open_at)


def describe_lines(described: TransactionDescription, now_s: float) -> str:
    open_for = (
        f"{now_s - described.transaction_start_ms / 1000:.1f}s"
        if described.transaction_start_ms >= 0
        else "-"
    )
    partitions = " ".join(f"{topic}:{number}" for topic, number in described.partitions) or "-"
    return (
        f"transactional id {described.transactional_id}  state {described.state}  "
        f"producer {described.producer_id} epoch {described.producer_epoch}  "
        f"timeout {described.transaction_timeout_ms} ms  open for {open_for}  "
        f"partitions {partitions}"
    )
