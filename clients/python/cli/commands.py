"""The cluster commands of `samsa`: topics, produce, consume, cluster — thin over the SDK; the
commands that change a topic's partitions, configs or records are in topic_changes.py, the
groups, transactions and perf commands in group_commands.py, transaction_commands.py and
perf_commands.py, and what they all share (where to connect, tables, times) in command_support.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import grpc

from samsa.cli.command_support import (
    add_connection,
    bootstrap,
    key_value,
    parse_time,
    require_topic,
    table,
)
from samsa.cli.group_commands import add_group_commands, run_groups
from samsa.cli.perf_commands import add_perf_commands, run_perf
from samsa.cli.topic_changes import add_topic_change_parsers, alter_topic, delete_records
from samsa.cli.transaction_commands import add_transaction_commands, run_transactions
from samsa.client import Admin, Consumer, NewTopic, NoBrokersAvailable, Producer
from samsa.client.channels import Channels
from samsa.client.cluster_admin import PartitionInfo
from samsa.client.cluster_metadata import ClusterMetadata, unreachable_reason
from samsa.client.group_admin import TopicPartition
from samsa.common.errors import SamsaError
from samsa.v1 import controller_pb2

PROGRESS_INTERVAL_S = 1.0
# How long a command waits for any controller to answer before saying the cluster cannot be
# reached: a controller restarting is back within it, while a wrong address or a stopped cluster
# is one line within seconds instead of the SDK's retries (10 s for reads, max.block.ms = 60 s
# for a producer's metadata).
CLUSTER_REACH_WAIT_S = 3.0


def add_commands(commands: argparse._SubParsersAction) -> None:
    topics = commands.add_parser("topics", help="create, list, describe, delete topics")
    actions = topics.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=-1)
    create.add_argument("--replication-factor", type=int, default=-1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    listing = actions.add_parser("list", help="list topics")
    describe = actions.add_parser("describe", help="partitions, leaders, replicas, configs")
    describe.add_argument("names", nargs="*")
    delete = actions.add_parser("delete", help="delete topics and their data")
    delete.add_argument("names", nargs="+")
    for parser in (create, listing, describe, delete, *add_topic_change_parsers(actions)):
        add_connection(parser)

    produce = commands.add_parser("produce", help="produce lines from stdin")
    add_topic_argument(produce)
    produce.add_argument("--key-separator", help="split each line into key SEP value")
    produce.add_argument("--partition", type=int)
    produce.add_argument("--compression", choices=("none", "zstd"), default="none")
    produce.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer setting by its Kafka name, e.g. acks=1 or linger.ms=5 (repeatable)",
    )
    add_connection(produce)

    consume = commands.add_parser("consume", help="print records of a topic")
    add_topic_argument(consume)
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int, help="start at this offset (each partition)")
    start.add_argument("--from-time", help="start at this time: ms since epoch or ISO 8601")
    consume.add_argument("--partition", type=int, action="append", help="only these partitions")
    consume.add_argument("--count", "--max-messages", type=int, help="stop after this many records")
    idle = consume.add_mutually_exclusive_group()
    idle.add_argument("--timeout", type=float, help="stop after this many idle seconds")
    idle.add_argument(
        "--timeout-ms",
        dest="timeout",
        type=lambda text: int(text) / 1000,
        metavar="MS",
        help="the same in milliseconds (kafka-console-consumer's flag)",
    )
    consume.add_argument("--format", choices=("value", "kv", "json"), default="value")
    consume.add_argument(
        "--group",
        help="consume as a member of this consumer group: its partitions, from its committed "
        "offsets (--from-beginning where it has none); commits what was printed",
    )
    add_connection(consume)

    add_group_commands(commands, add_connection)
    add_transaction_commands(commands, add_connection)
    add_perf_commands(commands, add_connection)

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


def add_topic_argument(parser: argparse.ArgumentParser) -> None:
    """The topic of `produce` and `consume`: `samsa consume orders`, or `--topic orders` as
    Kafka's console producer and consumer (and `samsa perf`, `samsa groups`) take it."""
    parser.add_argument("topic", nargs="?")
    parser.add_argument("--topic", dest="topic_option", metavar="TOPIC")


def resolve_topic(args: argparse.Namespace) -> str | None:
    """Merge the two spellings of the topic into `args.topic`; what is wrong, or None."""
    given = {name for name in (args.topic, args.topic_option) if name is not None}
    if not given:
        return f"name the topic: samsa {args.command} TOPIC (or --topic TOPIC)"
    if len(given) > 1:
        return f"two topics given ({' and '.join(sorted(given))}): name one"
    args.topic = given.pop()
    return None


def run(args: argparse.Namespace) -> int:
    """Run one cluster command; every failure is one line on stderr and exit code 1 (a usage
    error, code 2, as argparse's own)."""
    if args.command in ("produce", "consume") and (problem := resolve_topic(args)):
        print(f"samsa {args.command}: {problem}", file=sys.stderr)
        return 2
    servers = bootstrap(args)
    try:
        _check_reachable(servers)
        if args.command == "topics":
            return _topics(args)
        if args.command == "produce":
            return _produce(args)
        if args.command == "consume":
            return _consume(args)
        if args.command == "groups":
            return run_groups(args)
        if args.command == "transactions":
            return run_transactions(args, servers)
        if args.command == "cluster":
            return _cluster(args)
        if args.command == "perf":
            return run_perf(args)
    except NoBrokersAvailable as error:
        if not isinstance(error.__cause__, grpc.Call):
            print(f"samsa {args.command}: {error} ({error.code.name})", file=sys.stderr)
        else:
            print(_unreachable(servers, error.__cause__), file=sys.stderr)
        return 1
    except SamsaError as error:
        print(f"samsa {args.command}: {error} ({error.code.name})", file=sys.stderr)
        return 1
    except grpc.RpcError as error:
        assert isinstance(error, grpc.Call)
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            print(_unreachable(servers, error), file=sys.stderr)
        else:
            print(f"samsa {args.command}: {error.details()} ({error.code().name})", file=sys.stderr)
        return 1
    return 2


def _check_reachable(servers: str) -> None:
    """Ask any controller to describe the cluster, for at most CLUSTER_REACH_WAIT_S: raises
    NoBrokersAvailable (caused by the last gRPC error) when none answers."""
    channels = Channels()
    try:
        endpoints = [e.strip() for e in servers.split(",") if e.strip()]
        ClusterMetadata(endpoints, channels).read(
            "DescribeCluster", controller_pb2.DescribeClusterRequest(), CLUSTER_REACH_WAIT_S
        )
    finally:
        channels.close()


def _unreachable(servers: str, error: grpc.Call) -> str:
    """One line for a cluster that does not answer: why, in words, and what to check."""
    reason, _ = unreachable_reason(error)
    return (
        f"samsa: cannot reach the cluster at {servers} ({reason}); is `samsa up` running? "
        "check --bootstrap-server or $SAMSA_BOOTSTRAP"
    )


def _topics(args: argparse.Namespace) -> int:
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
        if args.action == "create":
            configs = dict(key_value(item, "--config") for item in args.config)
            admin.create_topics(
                [NewTopic(args.name, args.partitions, args.replication_factor, configs)]
            )
            info = admin.describe_topics([args.name])[args.name]
            print(f"created {args.name} with {len(info.partitions)} partition(s)")
        elif args.action == "list":
            for name in admin.list_topics():
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
                rows = [
                    (
                        p.partition,
                        p.leader if p.leader >= 0 else "offline",
                        p.leader_epoch,
                        ",".join(map(str, p.replicas)),
                        ",".join(map(str, p.isr)),
                    )
                    for p in info.partitions
                ]
                print(table(("partition", "leader", "epoch", "replicas", "isr"), rows))
        elif args.action == "alter":
            return alter_topic(admin, args)
        elif args.action == "delete-records":
            return delete_records(admin, args)
        elif args.action == "delete":
            admin.delete_topics(args.names)
            print(f"deleted {', '.join(args.names)}")
    return 0


def _produce(args: argparse.Namespace) -> int:
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
        require_topic(admin, args.topic)
    settings = {"bootstrap.servers": bootstrap(args), "compression.type": args.compression}
    # Kafka's console producer habit: any setting by name, checked by the SDK (an unknown key or
    # a bad value is one line naming it). They win over --compression.
    settings.update(key_value(item, "--producer-property") for item in args.producer_property)
    producer = Producer(settings)
    separator = args.key_separator.encode() if args.key_separator else None
    sent = 0
    started = last_report = time.monotonic()
    futures = []
    with producer:
        for line in sys.stdin.buffer:
            value = line.rstrip(b"\r\n")
            key = None
            if separator is not None and separator in value:
                key, value = value.split(separator, 1)
            futures.append(producer.send(args.topic, value, key=key, partition=args.partition))
            sent += 1
            if time.monotonic() - last_report >= PROGRESS_INTERVAL_S:
                last_report = time.monotonic()
                rate = sent / (last_report - started)
                print(f"\rproduced {sent:,} records ({rate:,.0f}/s)", end="", file=sys.stderr)
        producer.flush()
    failed = [f.exception(timeout=0) for f in futures if f.exception(timeout=0) is not None]
    elapsed = time.monotonic() - started
    print(f"\rproduced {sent - len(failed):,} records in {elapsed:.1f} s", file=sys.stderr)
    if failed:
        print(f"samsa produce: {len(failed)} records failed: {failed[0]}", file=sys.stderr)
        return 1
    return 0


def _consume(args: argparse.Namespace) -> int:
    if args.group is not None:
        return _consume_in_group(args)
    reset = "earliest" if args.from_beginning else "latest"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap(args), "auto.offset.reset": reset, "max.poll.records": 5000}
    )
    with consumer:
        with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
            info = require_topic(admin, args.topic)
        partitions = args.partition or [p.partition for p in info.partitions]
        assigned = [(args.topic, p) for p in partitions]
        consumer.assign(assigned)
        if args.offset is not None:
            for tp in assigned:
                consumer.seek(tp, args.offset)
        elif args.from_time is not None:
            at_ms = parse_time(args.from_time, "--from-time")
            found = consumer.offsets_for_times({tp: at_ms for tp in assigned})
            for tp, at in found.items():
                if at is None:
                    consumer.seek_to_end([tp])
                else:
                    consumer.seek(tp, at.offset)
        return _print_records(consumer, args)


def _consume_in_group(args: argparse.Namespace) -> int:
    if args.partition or args.offset is not None or args.from_time is not None:
        raise SystemExit(
            "samsa consume: --group takes no --partition, --offset or --from-time: the group "
            "decides what each member reads, from its committed offsets"
        )
    config = {
        "bootstrap.servers": bootstrap(args),
        "group.id": args.group,
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "enable.auto.commit": False,
        "max.poll.records": 5000,
    }
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
        require_topic(admin, args.topic)
    printed_up_to: dict[TopicPartition, int] = {}
    with Consumer(config) as consumer:
        consumer.subscribe([args.topic])
        try:
            return _print_records(consumer, args, printed_up_to)
        finally:
            consumer.commit(printed_up_to)  # exactly what was printed, not what was fetched


def _print_records(
    consumer: Consumer, args: argparse.Namespace, printed_up_to: dict | None = None
) -> int:
    """Print records until --count or --timeout; `printed_up_to` gets each partition's next
    offset after the last record printed."""
    printed = 0
    idle_since = time.monotonic()
    out = sys.stdout.buffer
    try:
        while args.count is None or printed < args.count:
            records = consumer.poll(timeout=0.5)
            if not records:
                if args.timeout is not None and time.monotonic() - idle_since >= args.timeout:
                    break
                continue
            idle_since = time.monotonic()
            for record in records[: None if args.count is None else args.count - printed]:
                out.write(_format(record, args.format) + b"\n")
                printed += 1
                if printed_up_to is not None:
                    printed_up_to[(record.topic, record.partition)] = record.offset + 1
            out.flush()
    except KeyboardInterrupt:
        pass
    print(f"consumed {printed:,} records", file=sys.stderr)
    return 0


def _format(record: object, style: str) -> bytes:
    value = record.value or b""  # type: ignore[attr-defined]
    if style == "value":
        return value
    key = record.key or b""  # type: ignore[attr-defined]
    if style == "kv":
        return key + b"\t" + value
    return json.dumps(
        {
            "partition": record.partition,  # type: ignore[attr-defined]
            "offset": record.offset,  # type: ignore[attr-defined]
            "timestamp": record.timestamp,  # type: ignore[attr-defined]
            "key": key.decode(errors="replace"),
            "value": value.decode(errors="replace"),
            "headers": {k: (v or b"").decode(errors="replace") for k, v in record.headers},  # type: ignore[attr-defined]
        }
    ).encode()


def partition_status(partition: PartitionInfo) -> str:
    if partition.leader < 0:
        return "OFFLINE"
    if len(partition.isr) < len(partition.replicas):
        return "under-replicated"
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


def _cluster(args: argparse.Namespace) -> int:
    """The cluster at a glance: its members, one line per topic, and the partitions that need
    attention (every partition with --partitions), as Kafka's kafka-topics --describe
    --under-replicated-partitions / --unavailable-partitions would list them."""
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
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
