"""`samsa quotas`: client quotas, as Kafka's `kafka-configs.sh --entity-type users|clients` —
thin over Admin.alter_client_quotas and Admin.describe_client_quotas.

    --describe [--user U | --user-defaults] [--client-id X | --client-defaults]
    --alter [--user U | --user-defaults] [--client-id X | --client-defaults]
            [--add producer_byte_rate=N,...] [--delete consumer_byte_rate,...]

An entity is a user, a client.id, or both (a user's quota for one of its client.ids). --describe
without an entity lists every entity with quotas, one line each, as Kafka prints them ("Quota
configs for user-principal 'U', client-id 'X' are producer_byte_rate=1048576.0"); with one, that
entity exactly. --alter sets the --add values and removes the --delete keys of one entity,
together.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from samsa.cli.command_support import client_config
from samsa.client import Admin, QuotaEntity

Quotas = Mapping[QuotaEntity, Mapping[str, float]]


def add_quota_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    quotas = commands.add_parser(
        "quotas",
        help="client quotas: bytes per second a user or client.id may produce or fetch, per "
        "broker (kafka-configs.sh --entity-type users|clients)",
    )
    action = quotas.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the quotas set")
    action.add_argument("--alter", action="store_true", help="set or remove quotas")
    user = quotas.add_mutually_exclusive_group()
    user.add_argument(
        "--user",
        metavar="U",
        help="the user the quotas apply to: a principal's name without 'User:' (CN=alice,O=x)",
    )
    user.add_argument(
        "--user-defaults",
        action="store_true",
        help="the default user: every user without a value of its own",
    )
    client = quotas.add_mutually_exclusive_group()
    client.add_argument("--client-id", metavar="X", help="the client.id the quotas apply to")
    client.add_argument(
        "--client-defaults",
        action="store_true",
        help="the default client: every client.id without a value of its own",
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
    if args.user == "":
        return "--user needs a user (--user-defaults names every other user)"
    if args.describe:
        if args.add is not None or args.delete is not None:
            return "--add and --delete go with --alter"
        return None
    if entity_of(args) == QuotaEntity():
        return (
            "--alter needs an entity: --user U or --user-defaults, and/or --client-id X or "
            "--client-defaults"
        )
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


def entity_of(args: argparse.Namespace) -> QuotaEntity:
    """The entity the arguments name (QuotaEntity(): none)."""
    return QuotaEntity(
        QuotaEntity.DEFAULT if args.user_defaults else args.user,
        QuotaEntity.DEFAULT if args.client_defaults else args.client_id,
    )


def run_quotas(args: argparse.Namespace, bootstrap: str) -> int:
    entity = entity_of(args)
    with Admin(client_config(args, bootstrap)) as admin:
        if args.alter:
            admin.alter_client_quotas({entity: args.changes})
            print(f"Completed updating quotas for {entity_words(entity)}.")
            return 0
        described = admin.describe_client_quotas(
            args.client_id, args.client_defaults, user=args.user, default_user=args.user_defaults
        )
    print(quota_lines(described) or "no client quotas are set")
    return 0


def entity_words(entity: QuotaEntity) -> str:
    """Kafka's words for an entity: "user-principal 'U', client-id 'X'", "the default
    client-id", ..."""
    words = []
    if entity.user is not None:
        words.append(_part_words("user-principal", entity.user))
    if entity.client_id is not None:
        words.append(_part_words("client-id", entity.client_id))
    return ", ".join(words)


def _part_words(kind: str, name: object) -> str:
    return f"the default {kind}" if name is QuotaEntity.DEFAULT else f"{kind} '{name}'"


def quota_lines(described: Quotas) -> str:
    """Kafka's lines: one per entity, its quotas by key."""
    return "\n".join(
        f"Quota configs for {entity_words(entity)} are "
        + ", ".join(f"{key}={value}" for key, value in sorted(values.items()))
        for entity, values in described.items()
    )
