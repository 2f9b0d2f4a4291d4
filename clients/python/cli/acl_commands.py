"""`samsa acls`: ACL bindings, as Kafka's `kafka-acls.sh` — thin over Admin.create_acls,
describe_acls and delete_acls.

    --add    (--allow-principal P | --deny-principal P)... [--allow-host H]... [--deny-host H]...
             [--operation OP]... | --producer | --consumer     RESOURCES
    --remove [the same]  --force                                RESOURCES
    --list   [--principal P]...                                 [RESOURCES]

RESOURCES: --topic T, --group G, --transactional-id ID (each repeatable) and --cluster, their
names matched as --resource-pattern-type says (literal, the default; prefixed; any and match to
list or remove; the cluster is always literal). Operations by Kafka's names, any case (Read,
Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs,
IdempotentWrite, All; All when none is given). A principal's hosts are * unless
--allow-host/--deny-host say. --producer grants WRITE, DESCRIBE and CREATE on the topics and
IDEMPOTENT_WRITE on the cluster (and WRITE, DESCRIBE on the --transactional-id ones);
--consumer READ and DESCRIBE on the topics and READ on the groups.

--remove without principals removes every ACL of the resources; with them, only the entries they
name. It deletes without asking, so it needs --force. Output is Kafka's, which people grep:
"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders,
patternType=LITERAL)`:" and one "(principal=User:alice, host=*, operation=READ,
permissionType=ALLOW)" line per binding. Bindings a command builds are checked against the core's
rules (samsa.metadata.acls) before any cluster is asked: a usage error, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from itertools import groupby

from samsa.cli.command_support import client_config
from samsa.client import (
    AclBinding,
    AclFilter,
    Admin,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.metadata.acls import CLUSTER_NAME, WILDCARD

Resource = tuple[ResourceType, str]

PRODUCER_TOPIC_OPERATIONS = (Operation.WRITE, Operation.DESCRIBE, Operation.CREATE)
PRODUCER_TRANSACTIONAL_OPERATIONS = (Operation.WRITE, Operation.DESCRIBE)
CONSUMER_TOPIC_OPERATIONS = (Operation.READ, Operation.DESCRIBE)

# Kafka's spelling of each operation (AclOperation's camel case), matched in any case, with or
# without underscores.
_OPERATION_NAMES = {op.name.replace("_", "").lower(): op for op in Operation if op != Operation.ANY}
_KAFKA_NAMES = ", ".join(
    "".join(part.capitalize() for part in op.name.split("_")) for op in _OPERATION_NAMES.values()
)


def add_acl_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    acls = commands.add_parser(
        "acls", help="ACLs: which principals may do what to which resources (kafka-acls.sh)"
    )
    action = acls.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="create ACLs")
    action.add_argument("--remove", action="store_true", help="delete ACLs (needs --force)")
    action.add_argument("--list", action="store_true", help="show ACLs")
    for flag, metavar, what in (
        ("--allow-principal", "P", "a principal (User:NAME) the ACLs allow"),
        ("--deny-principal", "P", "a principal (User:NAME) the ACLs deny"),
        ("--allow-host", "H", "a host the allowed principals may come from (default *)"),
        ("--deny-host", "H", "a host the denied principals are denied from (default *)"),
        ("--operation", "OP", f"an operation: {_KAFKA_NAMES} (default All)"),
        ("--topic", "T", "a topic (or prefix, or * for all)"),
        ("--group", "G", "a consumer group (or prefix, or * for all)"),
        ("--transactional-id", "ID", "a transactional id (or prefix, or * for all)"),
        ("--principal", "P", "--list only the ACLs of this principal"),
    ):
        acls.add_argument(
            flag, action="append", default=[], metavar=metavar, help=f"{what}; repeatable"
        )
    acls.add_argument("--cluster", action="store_true", help="the cluster resource")
    acls.add_argument(
        "--resource-pattern-type",
        choices=("literal", "prefixed", "any", "match"),
        type=str.lower,
        default="literal",
        help="how resource names match (default literal; any and match list or remove)",
    )
    acls.add_argument("--producer", action="store_true", help="a producer's ACLs on --topic")
    acls.add_argument(
        "--consumer", action="store_true", help="a consumer's ACLs on --topic and --group"
    )
    acls.add_argument("--force", action="store_true", help="--remove without asking")
    add_connection(acls)  # type: ignore[operator]


def acls_usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments (exit 2), or None once `args.bindings` (--add) or
    `args.filters` (--list, --remove) are built and checked."""
    args.bindings, args.filters = [], []
    pattern = PatternType[args.resource_pattern_type.upper()]
    resources = _resources(args)
    if args.principal and not args.list:
        return "--principal goes with --list (--add and --remove name --allow/--deny-principal)"
    if args.list:
        changes = args.allow_principal or args.deny_principal or args.producer or args.consumer
        if changes or args.operation or args.force:
            return "--list takes resources, --resource-pattern-type and --principal only"
        args.filters = _list_filters(resources, pattern, args.principal)
        return None
    problem = _change_problem(args, resources, pattern)
    if problem is not None:
        return problem
    try:
        operations = [_operation(name) for name in args.operation] or [Operation.ALL]
    except ValueError as error:
        return str(error)
    if args.remove and not (args.allow_principal or args.deny_principal):
        args.filters = [_resource_filter(resource, pattern) for resource in resources]
        return None
    fields = [
        (kind, name, _pattern_of(kind, pattern), principal, host, operation, permission)
        for (kind, name), ops in _wanted(args, resources, operations)
        for operation in ops
        for principal, host, permission in _entries(args)
    ]
    if args.remove:  # only the entries named, of resources matched as the pattern type says
        args.filters = list(dict.fromkeys(AclFilter(*values) for values in fields))
        return None
    args.bindings = list(dict.fromkeys(AclBinding(*values) for values in fields))
    for binding in args.bindings:
        problem = binding.problem()
        if problem is not None:
            return f"{pattern_text(binding)}: {problem}"
    return None


def _change_problem(
    args: argparse.Namespace, resources: list[Resource], pattern: PatternType
) -> str | None:
    """--add's and --remove's usage errors, or None."""
    if not resources:
        return "name the resources: --topic, --group, --transactional-id and/or --cluster"
    if args.allow_host and not args.allow_principal:
        return "--allow-host goes with --allow-principal"
    if args.deny_host and not args.deny_principal:
        return "--deny-host goes with --deny-principal"
    if args.remove and not args.force:
        return "--remove deletes ACLs without asking: add --force to confirm"
    if args.add and not (args.allow_principal or args.deny_principal):
        return "--add needs --allow-principal and/or --deny-principal"
    if args.add and pattern in (PatternType.ANY, PatternType.MATCH):
        return "--add takes --resource-pattern-type literal or prefixed"
    if (args.producer or args.consumer) and (args.operation or args.deny_principal):
        return "--producer and --consumer allow their own operations: no --operation, --deny-*"
    if args.producer and not args.topic:
        return "--producer needs --topic"
    if args.consumer and not (args.topic and args.group):
        return "--consumer needs --topic and --group"
    return None


def _entries(args: argparse.Namespace) -> list[tuple[str, str, Permission]]:
    """(principal, host, permission) of each principal and host given (* when none is)."""
    return [
        (principal, host, permission)
        for principals, hosts, permission in (
            (args.allow_principal, args.allow_host or [WILDCARD], Permission.ALLOW),
            (args.deny_principal, args.deny_host or [WILDCARD], Permission.DENY),
        )
        for principal in principals
        for host in hosts
    ]


def _operation(name: str) -> Operation:
    operation = _OPERATION_NAMES.get(name.replace("_", "").replace("-", "").lower())
    if operation is None:
        raise ValueError(f"--operation {name!r} is none of {_KAFKA_NAMES}")
    return operation


def _resources(args: argparse.Namespace) -> list[Resource]:
    resources = [(ResourceType.TOPIC, name) for name in args.topic]
    resources += [(ResourceType.GROUP, name) for name in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return list(dict.fromkeys(resources))


def _wanted(
    args: argparse.Namespace, resources: list[Resource], operations: list[Operation]
) -> list[tuple[Resource, tuple[Operation, ...]]]:
    """Each resource's operations: --operation's, or those --producer and --consumer imply."""
    if not (args.producer or args.consumer):
        return [(resource, tuple(operations)) for resource in resources]
    wanted: dict[Resource, tuple[Operation, ...]] = {}
    for resource in resources:
        kind = resource[0]
        ops: tuple[Operation, ...] = ()
        if kind == ResourceType.TOPIC:
            ops += PRODUCER_TOPIC_OPERATIONS if args.producer else ()
            ops += CONSUMER_TOPIC_OPERATIONS if args.consumer else ()
        elif kind == ResourceType.GROUP and args.consumer:
            ops = (Operation.READ,)
        elif kind == ResourceType.TRANSACTIONAL_ID and args.producer:
            ops = PRODUCER_TRANSACTIONAL_OPERATIONS
        wanted[resource] = tuple(dict.fromkeys(ops))
    if args.producer:
        wanted[(ResourceType.CLUSTER, CLUSTER_NAME)] = (Operation.IDEMPOTENT_WRITE,)
    return [(resource, ops) for resource, ops in wanted.items() if ops]


def _resource_filter(resource: Resource, pattern: PatternType, principal: str | None = None):  # type: ignore[no-untyped-def]
    kind, name = resource
    return AclFilter(
        resource_type=kind,
        resource_name=name,
        pattern_type=_pattern_of(kind, pattern),
        principal=principal,
    )


def _list_filters(
    resources: list[Resource], pattern: PatternType, principals: list[str]
) -> list[AclFilter]:
    """--list's filters: each resource (every binding without one) times each principal."""
    who: list[str | None] = list(principals) or [None]
    if not resources:
        return [AclFilter(principal=principal) for principal in who]
    return [_resource_filter(r, pattern, principal) for r in resources for principal in who]


def _pattern_of(kind: ResourceType, pattern: PatternType) -> PatternType:
    """The cluster is one resource, always LITERAL (as Kafka's tool names it)."""
    return PatternType.LITERAL if kind == ResourceType.CLUSTER else pattern


def pattern_text(binding: AclBinding) -> str:
    """Kafka's ResourcePattern as it prints it."""
    return (
        f"ResourcePattern(resourceType={binding.resource_type.name}, "
        f"name={binding.resource_name}, patternType={binding.pattern_type.name})"
    )


def entry_text(binding: AclBinding) -> str:
    """Kafka's AccessControlEntry as it prints it."""
    return (
        f"(principal={binding.principal}, host={binding.host}, "
        f"operation={binding.operation.name}, permissionType={binding.permission.name})"
    )


def acl_lines(heading: str, bindings: Iterable[AclBinding]) -> list[str]:
    """Kafka's listing: per resource pattern, a heading line and one entry per binding."""
    lines: list[str] = []
    ordered = sorted(bindings)
    for _, group in groupby(ordered, key=pattern_text):
        members = list(group)
        lines.append(f"{heading} for resource `{pattern_text(members[0])}`: ")
        lines += [f" \t{entry_text(binding)}" for binding in members]
        lines.append("")
    return lines


def run_acls(args: argparse.Namespace, bootstrap: str) -> int:
    with Admin(client_config(args, bootstrap)) as admin:
        if args.list:
            found: dict[AclBinding, None] = {}
            for acl_filter in args.filters:
                found.update(dict.fromkeys(admin.describe_acls(acl_filter)))
            print("\n".join(acl_lines("Current ACLs", found)) or "no ACLs match")
            return 0
        if args.add:
            print("\n".join(acl_lines("Adding ACLs", args.bindings)))
            refused = {b: e for b, e in admin.create_acls(args.bindings).items() if e is not None}
            for binding, error in refused.items():
                print(
                    f"samsa acls: {pattern_text(binding)} {entry_text(binding)}: {error}",
                    file=sys.stderr,
                )
            return 1 if refused else 0
        status = 0
        removed: list[AclBinding] = []
        for deletion in admin.delete_acls(args.filters):
            if deletion.error is not None:
                print(f"samsa acls: {deletion.error} ({deletion.error.code.name})", file=sys.stderr)
                status = 1
            removed += deletion.deleted
        print("\n".join(acl_lines("Removed ACLs", dict.fromkeys(removed))) or "no ACLs matched")
        return status
