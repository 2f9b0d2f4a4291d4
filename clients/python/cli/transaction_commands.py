"""`samsa transactions list|describe|describe-producers|abort`: hanging-transaction tools, as
Kafka's kafka-transactions.sh (KIP-664) — thin over Admin.list_transactions,
describe_transactions, describe_producers and abort_transaction."""

from __future__ import annotations

import argparse
import time

from samsa.cli.command_support import table
from samsa.client import Admin
from samsa.client.transaction_admin import STATE_NAMES, ProducerState, TransactionDescription


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
    listing.add_argument("--producer-id", type=int, action="append", default=[])
    listing.add_argument(
        "--duration-ms",
        type=int,
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
    abort = actions.add_parser(
        "abort",
        help="abort a hanging transaction on a partition (its producer silent there for "
        "transaction.max.timeout.ms)",
    )
    for parser in (producers, abort):
        parser.add_argument("--topic", required=True)
        parser.add_argument("--partition", type=int, required=True)
    abort.add_argument("--producer-id", type=int, required=True)
    abort.add_argument(
        "--producer-epoch", type=int, required=True, help="as describe-producers shows it"
    )
    for parser in (listing, describe, producers, abort):
        add_connection(parser)  # type: ignore[operator]


def run_transactions(args: argparse.Namespace, bootstrap: str) -> int:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        if args.action == "list":
            try:
                listings = admin.list_transactions(args.state, args.producer_id, args.duration_ms)
            except ValueError as error:
                raise SystemExit(f"samsa transactions list: {error}") from None
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
            rows = [producer_row(state, time.time()) for state in states]
            header = ("producer id", "epoch", "last sequence", "last write", "open txn start")
            print(table(header, rows) if rows else f"no producers on {args.topic}-{args.partition}")
        else:
            admin.abort_transaction(
                args.topic, args.partition, args.producer_id, args.producer_epoch
            )
            print(
                f"aborted the transaction of producer {args.producer_id} (epoch "
                f"{args.producer_epoch}) on {args.topic}-{args.partition}"
            )
    return 0


def producer_row(state: ProducerState, now_s: float) -> tuple[object, ...]:
    last_write = f"{now_s - state.last_timestamp_ms / 1000:.1f}s ago"
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
