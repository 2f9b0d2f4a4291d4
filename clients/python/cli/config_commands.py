"""`samsa configs`: the cluster-wide topic defaults and topics' configs, in the shape of Kafka's
`kafka-configs.sh` — thin over Admin.describe_configs and Admin.alter_configs.

    --entity-type brokers --entity-default (--describe [--all] | --alter
            [--add-config k=v,k=v] [--delete-config k,k])
    --entity-type topics --entity-name T (--describe [--all] | --alter ...)
    --entity-type brokers --entity-name ID (--describe [--all] | --alter ...)

The brokers' default entity holds the topic defaults every topic without its own value takes
(log.retention.ms, log.segment.bytes, message.max.bytes, …; KIP-226's --entity-default).
--describe prints what is set, as kafka-configs.sh does (--all: every key, with where its value
comes from); --alter sets the --add-config values and deletes the --delete-config keys together.
A value holding commas is written in brackets, as Kafka's tool takes it:
--add-config log.cleanup.policy=[compact,delete]. A broker id (--entity-name 1) takes only
its replication throttle rates (leader.replication.throttled.rate,
follower.replication.throttled.rate; KIP-73): Samsa keeps topic defaults cluster-wide only.
"""

from __future__ import annotations

import argparse

from samsa.cli.command_support import client_config
from samsa.client import BROKER_DEFAULTS, Admin, ConfigResource

SOURCE_WORDS = {
    "dynamic": "DYNAMIC_TOPIC_CONFIG",
    "dynamic default": "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "default": "DEFAULT_CONFIG",
}


def add_config_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    configs = commands.add_parser(
        "configs",
        help="cluster-wide topic defaults (--entity-type brokers --entity-default) and topic "
        "configs (kafka-configs.sh)",
    )
    configs.add_argument("--entity-type", choices=("brokers", "topics"), required=True)
    entity = configs.add_mutually_exclusive_group()
    entity.add_argument(
        "--entity-name", metavar="NAME", help="the topic, or a broker id (its throttle rates)"
    )
    entity.add_argument(
        "--entity-default",
        action="store_true",
        help="the brokers' default entity: the topic defaults of the whole cluster",
    )
    action = configs.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the configs set")
    action.add_argument("--alter", action="store_true", help="set or delete configs")
    configs.add_argument("--all", action="store_true", help="with --describe: every key")
    configs.add_argument("--add-config", metavar="K=V,...", help="the values to set")
    configs.add_argument("--delete-config", metavar="K,...", help="the keys to delete")
    add_connection(configs)  # type: ignore[operator]


def configs_usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments (exit 2), or None once they are read into
    `args.resource`, `args.set_configs` and `args.deleted`."""
    if args.entity_type == "brokers":
        if args.entity_name is not None and args.entity_name.isdigit():
            args.resource = ConfigResource("broker", args.entity_name)
        elif not args.entity_default:
            return (
                "--entity-type brokers needs --entity-default (Samsa keeps topic defaults "
                "cluster-wide only: a topic's log must behave the same on every replica) or "
                "--entity-name ID for a broker's replication throttle rates"
            )
        else:
            args.resource = BROKER_DEFAULTS
    else:
        if args.entity_default or not args.entity_name:
            return "--entity-type topics needs --entity-name TOPIC"
        args.resource = ConfigResource("topic", args.entity_name)
    if args.describe and (args.add_config is not None or args.delete_config is not None):
        return "--add-config and --delete-config go with --alter"
    if args.alter and args.add_config is None and args.delete_config is None:
        return "--alter needs --add-config K=V,... and/or --delete-config K,..."
    if args.all and not args.describe:
        return "--all goes with --describe"
    args.set_configs, args.deleted = {}, []
    for item in split_items(args.add_config or ""):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            return f"--add-config {item!r} is not KEY=VALUE"
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        args.set_configs[key.strip()] = value
    for key in split_items(args.delete_config or ""):
        if key in args.set_configs:
            return f"{key} is both added and deleted"
        args.deleted.append(key)
    return None


def split_items(text: str) -> list[str]:
    """Comma-separated items, a comma inside [brackets] kept (Kafka's list values)."""
    items, current, depth = [], "", 0
    for char in text:
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def run_configs(args: argparse.Namespace, bootstrap: str) -> int:
    resource: ConfigResource = args.resource
    kind = "broker" if resource.type == "broker" else "topic"
    words = (
        "default config for brokers in the cluster"
        if resource is BROKER_DEFAULTS
        else f"config for {kind} {resource.name}"
    )
    with Admin(client_config(args, bootstrap)) as admin:
        if args.alter:
            admin.alter_configs(resource, set=args.set_configs, delete=args.deleted)
            print(f"Completed updating {words}.")
            return 0
        entries = admin.describe_configs(resource)
    shown = [e for e in entries.values() if args.all or e.source != "default"]
    title = "All" if args.all else ("Default" if resource is BROKER_DEFAULTS else "Dynamic")
    subject = "brokers in the cluster" if resource is BROKER_DEFAULTS else f"{kind} {resource.name}"
    print(f"{title} configs for {subject} are:")
    for entry in sorted(shown, key=lambda e: e.name):
        source = SOURCE_WORDS.get(entry.source, entry.source)
        print(f"  {entry.name}={entry.value} sensitive=false synonyms={{{source}}}")
    return 0
