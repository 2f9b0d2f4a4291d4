"""The cluster commands of `samsa`: topics and cluster — thin over the SDK; `run` dispatches them
all. The console producer and consumer (produce, consume) are in console_commands.py, the
commands that change a topic's partitions, configs or records in topic_changes.py, the groups,
transactions, perf, reassign, log-dirs, leader-election, quotas, acls, metadata-quorum, configs
and users commands in group_commands.py, transaction_commands.py, perf_commands.py,
reassign_commands.py, log_dirs_commands.py, election_commands.py, quota_commands.py,
acl_commands.py, quorum_commands.py, config_commands.py and user_commands.py, and what they all
share (where to connect, tables, times) in command_support.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence

import grpc

from samsa.cli.acl_commands import acls_usage_error, add_acl_command, run_acls
from samsa.cli.command_support import (
    add_connection,
    bootstrap,
    client_config,
    int32,
    key_value,
    replica_assignment,
    security,
    table,
)
from samsa.cli.config_commands import add_config_command, configs_usage_error, run_configs
from samsa.cli.console_commands import (
    CONSOLE_COMMANDS,
    add_console_commands,
    prepare_console,
    run_console,
)
from samsa.cli.election_commands import (
    add_election_command,
    election_usage_error,
    run_election,
)
from samsa.cli.group_commands import add_group_commands, groups_usage_error, run_groups
from samsa.cli.log_dirs_commands import add_log_dirs_command, log_dirs_usage_error, run_log_dirs
from samsa.cli.perf_commands import add_perf_commands, run_perf
from samsa.cli.quorum_commands import add_quorum_command, quorum_usage_error, run_quorum
from samsa.cli.quota_commands import add_quota_command, quotas_usage_error, run_quotas
from samsa.cli.reassign_commands import add_reassign_command, prepare_reassign, run_reassign
from samsa.cli.topic_changes import add_topic_change_parsers, alter_topic, delete_records
from samsa.cli.topic_offsets import add_topic_offsets_parser, topic_offsets
from samsa.cli.transaction_commands import (
    add_transaction_commands,
    run_transactions,
    transactions_usage_error,
)
from samsa.cli.user_commands import add_users_command, run_users, users_usage_error
from samsa.client import Admin, NewTopic, NoBrokersAvailable, TopicError
from samsa.client.channels import Channels
from samsa.client.client_tls import client_security
from samsa.client.cluster_admin import PartitionInfo
from samsa.client.cluster_metadata import ClusterMetadata, unreachable_reason
from samsa.client.errors import KafkaError
from samsa.common.errors import SamsaError
from samsa.v1 import controller_pb2

# How long a command waits for any controller to answer before saying the cluster cannot be
# reached: a controller restarting is back within it, while a wrong address or a stopped cluster
# is one line within seconds instead of the SDK's retries (10 s for reads, max.block.ms = 60 s
# for a producer's metadata).
CLUSTER_REACH_WAIT_S = 3.0


def add_commands(commands: argparse._SubParsersAction) -> None:
    topics = commands.add_parser("topics", help="create, list, describe, delete topics; offsets")
    actions = topics.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int32, help="default: the cluster's num.partitions")
    create.add_argument(
        "--replication-factor", type=int32, help="default: the cluster's default.replication.factor"
    )
    create.add_argument(
        "--replica-assignment",
        type=replica_assignment,
        metavar="B:B,B:B",
        help="each partition's broker ids, the first the preferred leader (1:2,2:3: two "
        "partitions of two replicas); instead of --partitions and --replication-factor",
    )
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    listing = actions.add_parser("list", help="list topics")
    listing.add_argument(
        "--exclude-internal", action="store_true", help="leave out __consumer_offsets and the like"
    )
    describe = actions.add_parser("describe", help="partitions, leaders, replicas, configs")
    describe.add_argument("names", nargs="*")
    delete = actions.add_parser("delete", help="delete topics and their data")
    delete.add_argument("names", nargs="+")
    offsets = add_topic_offsets_parser(actions)
    for parser in (create, listing, describe, delete, offsets, *add_topic_change_parsers(actions)):
        add_connection(parser)

    add_console_commands(commands, add_connection)
    add_group_commands(commands, add_connection)
    add_transaction_commands(commands, add_connection)
    add_perf_commands(commands, add_connection)
    add_reassign_command(commands, add_connection)
    add_log_dirs_command(commands, add_connection)
    add_election_command(commands, add_connection)
    add_quota_command(commands, add_connection)
    add_acl_command(commands, add_connection)
    add_quorum_command(commands, add_connection)
    add_config_command(commands, add_connection)
    add_users_command(commands, add_connection)

    cluster = commands.add_parser(
        "cluster",
        help="controllers, brokers, coordinators, topics and the partitions needing attention",
    )
    cluster.add_argument(
        "--partitions",
        action="store_true",
        help="list every partition (leader, replicas, ISR), not only those under-replicated "
        "or offline",
    )
    add_connection(cluster)
    # Optional: `samsa cluster` alone describes the cluster, as it always has.
    cluster_actions = cluster.add_subparsers(dest="cluster_action", metavar="{unregister}")
    unregister = cluster_actions.add_parser(
        "unregister",
        help="forget a broker stopped for good that holds no replica (kafka-cluster.sh unregister)",
    )
    unregister.add_argument("--id", type=int32, required=True, dest="broker_id")
    add_connection(unregister, inherited=True)


def run(args: argparse.Namespace) -> int:
    """Run one cluster command; every failure is one line on stderr and exit code 1 (a usage
    error, code 2, as argparse's own)."""
    problem = _usage_problem(args)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    servers = bootstrap(args)
    settings = security(args)
    tls = settings.get("security.protocol", "").upper() in ("SSL", "SASL_SSL")
    try:
        _check_reachable(servers, settings)
        if args.command == "topics":
            return _topics(args)
        if args.command in CONSOLE_COMMANDS:
            return run_console(args)
        if args.command == "groups":
            return run_groups(args)
        if args.command in SERVER_COMMANDS:
            return SERVER_COMMANDS[args.command](args, servers)
        if args.command == "cluster" and args.cluster_action == "unregister":
            return _unregister_broker(args)
        if args.command == "cluster":
            return _cluster(args)
        if args.command == "perf":
            return run_perf(args)
    except NoBrokersAvailable as error:
        if not isinstance(error.__cause__, grpc.Call):
            print(f"samsa {args.command}: {error} ({error.code.name})", file=sys.stderr)
        else:
            print(_unreachable(servers, error.__cause__, tls), file=sys.stderr)
        return 1
    except SamsaError as error:
        print(f"samsa {args.command}: {error} ({error.code.name})", file=sys.stderr)
        return 1
    except grpc.RpcError as error:
        assert isinstance(error, grpc.Call)
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            print(_unreachable(servers, error, tls), file=sys.stderr)
        else:
            print(f"samsa {args.command}: {error.details()} ({error.code().name})", file=sys.stderr)
        return 1
    return 2


def _check_reachable(servers: str, settings: dict[str, str]) -> None:
    """Ask any controller to describe the cluster, for at most CLUSTER_REACH_WAIT_S, connecting
    as the command's clients do (`settings`: security's): raises NoBrokersAvailable (caused by
    the last gRPC error) when none answers."""
    channels = Channels(security=client_security(settings))  # with SASL_SSL: logs in
    try:
        endpoints = [e.strip() for e in servers.split(",") if e.strip()]
        ClusterMetadata(endpoints, channels).read(
            "DescribeCluster", controller_pb2.DescribeClusterRequest(), CLUSTER_REACH_WAIT_S
        )
    finally:
        channels.close()


def _unreachable(servers: str, error: grpc.Call, tls: bool = False) -> str:
    """One line for a cluster that does not answer: why, in words, and what to check (with
    TLS, the settings too: gRPC reports a refused certificate as a broken connection)."""
    reason, _ = unreachable_reason(error)
    check = ", and --command-config (the CA, a client certificate it signed)" if tls else ""
    return (
        f"samsa: cannot reach the cluster at {servers} ({reason}); is `samsa up` running? "
        f"check --bootstrap-server or $SAMSA_BOOTSTRAP{check}"
    )


def _topics(args: argparse.Namespace) -> int:
    with Admin(client_config(args)) as admin:
        if args.action == "create":
            configs = dict(key_value(item, "--config") for item in args.config)
            partitions, factor = args.partitions, args.replication_factor
            admin.create_topics(
                [
                    NewTopic(
                        args.name,
                        -1 if partitions is None else partitions,
                        -1 if factor is None else factor,
                        configs,
                        replica_assignments=args.replica_assignment,
                    )
                ]
            )
            info = admin.describe_topics([args.name])[args.name]
            print(f"created {args.name} with {len(info.partitions)} partition(s)")
        elif args.action == "list":
            for name in admin.list_topics(list_internal=not args.exclude_internal):
                print(name)
        elif args.action == "describe":
            topics = admin.describe_topics(args.names or None)
            for name, info in topics.items():
                configs = {
                    k: e.value
                    for k, e in admin.describe_configs(name).items()
                    if e.source != "default"
                }
                print(f"{name}  id={info.topic_id.hex()}  configs={configs or '{}'}")
                print(partitions_table(info.partitions))
        elif args.action == "alter":
            return alter_topic(admin, args)
        elif args.action == "delete-records":
            return delete_records(admin, args)
        elif args.action == "offsets":
            return topic_offsets(admin, args)
        elif args.action == "delete":
            return delete_topics(admin, args.names)
    return 0


def topics_usage_error(args: argparse.Namespace) -> str | None:
    """Why a `samsa topics` command line cannot run, or None: `create` takes its partitions
    from --replica-assignment or from --partitions and --replication-factor, never both (Kafka's
    kafka-topics.sh refuses the mix too: which would win?)."""
    if args.action != "create" or args.replica_assignment is None:
        return None
    given = [
        flag
        for flag, value in (
            ("--partitions", args.partitions),
            ("--replication-factor", args.replication_factor),
        )
        if value is not None
    ]
    if given:
        return (
            f"{' and '.join(given)} cannot be used with --replica-assignment, which sets the "
            "partitions and their replicas: leave them out"
        )
    return None


# The commands that run with the bootstrap servers they were given.
SERVER_COMMANDS: dict[str, Callable[[argparse.Namespace, str], int]] = {
    "transactions": run_transactions,
    "reassign": run_reassign,
    "log-dirs": run_log_dirs,
    "leader-election": run_election,
    "quotas": run_quotas,
    "acls": run_acls,
    "metadata-quorum": run_quorum,
    "configs": run_configs,
    "users": run_users,
}
# Each command's check of its arguments before the cluster is asked: a usage error, or None.
USAGE_CHECKS: dict[str, Callable[[argparse.Namespace], str | None]] = {
    "groups": groups_usage_error,
    "transactions": transactions_usage_error,
    "topics": topics_usage_error,
    "reassign": prepare_reassign,
    "log-dirs": log_dirs_usage_error,
    "leader-election": election_usage_error,
    "quotas": quotas_usage_error,
    "acls": acls_usage_error,
    "metadata-quorum": quorum_usage_error,
    "configs": configs_usage_error,
    "users": users_usage_error,
}


def _usage_problem(args: argparse.Namespace) -> str | None:
    """The usage error `args` make, as the line to print, or None. The groups and transactions
    checks' problems begin with the subcommand they are about; topics' are about args.action."""
    command = args.command
    check = prepare_console if command in CONSOLE_COMMANDS else USAGE_CHECKS.get(command)
    problem = None if check is None else check(args)
    if problem is None:
        return None
    if command in ("groups", "transactions"):
        return f"samsa {command} {problem}"
    if command == "topics":
        return f"samsa topics {args.action}: {problem}"
    return f"samsa {command}: {problem}"


def partitions_table(partitions: Sequence[PartitionInfo]) -> str:
    """`topics describe`'s partition table; with the replicas a reassignment adds and removes
    when one is in progress (Kafka's describe shows "Adding Replicas" and "Removing Replicas")."""
    headers = ["partition", "leader", "epoch", "replicas", "isr"]
    moving = any(p.adding_replicas or p.removing_replicas for p in partitions)
    rows = []
    for p in partitions:
        row = [p.partition, p.leader if p.leader >= 0 else "offline", p.leader_epoch]
        row += [",".join(map(str, p.replicas)), ",".join(map(str, p.isr))]
        if moving:
            row += [",".join(map(str, p.adding_replicas)) or "-"]
            row += [",".join(map(str, p.removing_replicas)) or "-"]
        rows.append(row)
    return table(headers + ["adding", "removing"] * moving, rows)


def delete_topics(admin: Admin, names: list[str]) -> int:
    """Delete the topics in one request and say what became of each: the controller deletes
    those it can even when it refuses another (an unknown name), so the deleted ones get their
    line on stdout and each refused one its line on stderr (exit status 1)."""
    names = list(dict.fromkeys(names))
    try:
        admin.delete_topics(names)
        refused: Mapping[Hashable, KafkaError] = {}
    except TopicError as error:
        if not error.errors:  # the request as a whole failed: nothing is known deleted
            raise
        refused = error.errors
    deleted = [name for name in names if name not in refused]
    if deleted:
        print(f"deleted {', '.join(deleted)}")
    for error in refused.values():
        print(f"samsa topics: {error} ({error.code.name})", file=sys.stderr)
    return 1 if refused else 0


def partition_status(partition: PartitionInfo) -> str:
    """OFFLINE, under-replicated, reassigning or ok. Replicas a reassignment is adding are still
    catching up, so they are not counted missing from the ISR (as Kafka's --describe leaves
    them out of its under-replicated check); the partition is listed as reassigning instead."""
    if partition.leader < 0:
        return "OFFLINE"
    assigned = [r for r in partition.replicas if r not in partition.adding_replicas]
    if not set(assigned) <= set(partition.isr):
        return "under-replicated"
    if partition.adding_replicas or partition.removing_replicas:
        return "reassigning"
    return "ok"


def partition_row(topic: str, partition: PartitionInfo, status: str) -> tuple[object, ...]:
    return (
        topic,
        partition.partition,
        partition.leader if partition.leader >= 0 else "-",
        ",".join(map(str, partition.replicas)),
        ",".join(map(str, partition.isr)),
        status,
    )


def _unregister_broker(args: argparse.Namespace) -> int:
    """Retire a broker for good (Kafka's kafka-cluster.sh unregister --id N); the controller's
    refusal (still running, still holding replicas) is run()'s one line on stderr."""
    with Admin(client_config(args)) as admin:
        admin.unregister_broker(args.broker_id)
    print(f"broker {args.broker_id} unregistered")
    return 0


def _cluster(args: argparse.Namespace) -> int:
    """The cluster at a glance: its members, one line per topic, and the partitions that need
    attention (every partition with --partitions), as Kafka's kafka-topics --describe
    --under-replicated-partitions / --unavailable-partitions would list them."""
    with Admin(client_config(args)) as admin:
        cluster = admin.describe_cluster()
        print(f"cluster {cluster.cluster_id}  metadata offset {cluster.metadata_offset}\n")
        print(
            table(
                ("controller", "endpoint", "role"),
                [
                    (c.node_id, c.endpoint, "active (Raft leader)" if c.active else "follower")
                    for c in cluster.controllers
                ],
            )
        )
        print()
        print(
            table(
                ("broker", "endpoint", "rack", "epoch", "state"),
                [
                    (
                        b.broker_id,
                        b.endpoint,
                        b.rack or "-",
                        b.broker_epoch,
                        "fenced" if b.fenced else "unfenced",
                    )
                    for b in cluster.brokers
                ],
            )
        )
        print()
        coordinators = [
            (
                x.coordinator_id,
                x.endpoint,
                x.coordinator_epoch,
                "fenced" if x.fenced else "live",
                x.owned_partitions,
            )
            for x in cluster.coordinators
        ]
        headers = ("coordinator", "endpoint", "epoch", "state", "partitions")
        print(table(headers, coordinators) if coordinators else "no coordinators")
        topics = admin.describe_topics()
    print()
    summaries, rows = [], []
    under_replicated = offline = 0
    for name, info in sorted(topics.items()):
        topic_offline = topic_under = 0
        for p in info.partitions:
            status = partition_status(p)
            topic_offline += status == "OFFLINE"
            topic_under += status == "under-replicated"
            if args.partitions or status != "ok":
                rows.append(partition_row(name, p, status))
        offline += topic_offline
        under_replicated += topic_under
        replication = max((len(p.replicas) for p in info.partitions), default=0)
        summaries.append((name, len(info.partitions), replication, topic_under, topic_offline))
    headers = ("topic", "partitions", "replication", "under-replicated", "offline")
    print(table(headers, summaries) if summaries else "no topics")
    if rows:
        print()
        print(table(("topic", "partition", "leader", "replicas", "isr", "status"), rows))
    print(f"\n{offline} offline, {under_replicated} under-replicated partition(s)")
    return 0
