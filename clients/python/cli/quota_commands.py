"""`samsa quotas`: client quotas, as Kafka's `kafka-configs.sh --entity-type clients` — thin over
Admin.alter_client_quotas and Admin.describe_client_quotas.

    --describe [--client-id X | --client-defaults]
    --alter (--client-id X | --client-defaults) [--add producer_byte_rate=N,...]
            [--delete consumer_byte_rate,...]

--describe without an entity lists every entity with quotas, one line each, as Kafka prints
them ("Quota configs for client-id 'X' are producer_byte_rate=1048576.0"); --alter sets the
--add values and removes the --delete keys of one entity, together.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from samsa.cli.command_support import client_config
from samsa.client import Admin

Quotas = Mapping[str | None, Mapping[str, float]]


def add_quota_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    quotas = commands.add_parser(
        "quotas",
        help="client quotas: bytes per second a client.id may produce or fetch, per broker "
        "(kafka-configs.sh --entity-type clients)",
    )
    action = quotas.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the quotas set")
    action.add_argument("--alter", action="store_true", help="set or remove quotas")
    entity = quotas.add_mutually_exclusive_group()
    entity.add_argument("--client-id", metavar="X", help="the client.id the quotas apply to")
    entity.add_argument(
        "--client-defaults",
        action="store_true",
        help="the default entity: every client.id without a value of its own",
    )
    quotas.add_argument(
        "--add", metavar="KEY=N,...", help="producer_byte_rate=N and/or consumer_byte_rate=N"
    )
    quotas.add_argument("--delete", metavar="KEY,...", help="the quota keys to remove")
    add_connection(quotas)  # type: ignore[operator]


def quotas_usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments (for `run` to report, exit 2), or None once --add and
    --delete are read into `args.changes` (key -> value, None: remove)."""
    args.changes = {}
    if args.client_id == "":
        return "--client-id needs a client.id (--client-defaults names every other client)"
    if args.describe:
        if args.add is not None or args.delete is not None:
            return "--add and --delete go with --alter"
        return None
    if args.client_id is None and not args.client_defaults:
        return "--alter needs --client-id X or --client-defaults"
    if args.add is None and args.delete is None:
        return "--alter needs --add KEY=N,... and/or --delete KEY,..."
    for item in _items(args.add):
        key, equals, value = item.partition("=")
        try:
            args.changes[key.strip()] = float(value)
        except ValueError:
            return f"--add {item!r} is not KEY=N with N a number (bytes per second)"
        if not equals:
            return f"--add {item!r} is not KEY=N"
    for key in _items(args.delete):
        if key in args.changes:
            return f"{key} is both added and deleted"
        args.changes[key] = None
    return None


def _items(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def run_quotas(args: argparse.Namespace, bootstrap: str) -> int:
    entity = None if args.client_defaults else args.client_id
    with Admin(client_config(args, bootstrap)) as admin:
        if args.alter:
            admin.alter_client_quotas({entity: args.changes})
            print(f"Completed updating quotas for {entity_words(entity)}.")
            return 0
        described = admin.describe_client_quotas(args.client_id, args.client_defaults)
    print(quota_lines(described) or "no client quotas are set")
    return 0


def entity_words(entity: str | None) -> str:
    return "the default client-id" if entity is None else f"client-id '{entity}'"


def quota_lines(described: Quotas) -> str:
    """Kafka's lines: one per entity, its quotas by key."""
    return "\n".join(
        f"Quota configs for {entity_words(entity)} are "
        + ", ".join(f"{key}={value}" for key, value in sorted(values.items()))
        for entity, values in described.items()
    )
