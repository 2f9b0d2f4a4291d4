"""The cluster commands of `samsa`: topics, produce, consume, groups, cluster — thin over the SDK.

Where to connect: `--bootstrap-server host:port,...`, else $SAMSA_BOOTSTRAP, else the cluster that
`samsa up` runs from `--data-dir` (default ./samsa-data, read from its cluster.json), so that in
the README's flow no address needs to be typed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import grpc

from samsa.cli.transaction_commands import add_transaction_commands, run_transactions
from samsa.client import Admin, Consumer, NewTopic, NoBrokersAvailable, Producer, TopicError
from samsa.client.admin import ConsumerGroupDescription, PartitionLag, TopicDescription
from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata, unreachable_reason
from samsa.client.group_admin import GroupError, TopicPartition, plan_offset_resets
from samsa.common.errors import ErrorCode, SamsaError
from samsa.v1 import controller_pb2

PROGRESS_INTERVAL_S = 1.0
# How long a command waits for any controller to answer before saying the cluster cannot be
# reached: a controller restarting is back within it, while a wrong address or a stopped cluster
# is one line within seconds instead of the SDK's retries (10 s for reads, max.block.ms = 60 s
# for a producer's metadata).
CLUSTER_REACH_WAIT_S = 3.0
# How long produce/consume re-ask about a topic a controller says does not exist. Controllers
# apply the committed log within ~0.1 s of each other, so a topic another command just created is
# visible by then even on a lagging follower; a topic that truly does not exist costs this long.
TOPIC_VISIBLE_WAIT_S = 2.0


def bootstrap(args: argparse.Namespace) -> str:
    if args.bootstrap_server:
        return args.bootstrap_server
    if os.environ.get("SAMSA_BOOTSTRAP"):
        return os.environ["SAMSA_BOOTSTRAP"]
    spec_file = Path(args.data_dir) / "cluster.json"
    if spec_file.exists():
        spec = json.loads(spec_file.read_text())
        return ",".join(f"127.0.0.1:{c['grpc_port']}" for c in spec["controllers"])
    raise SystemExit(
        f"samsa: no cluster to talk to: pass --bootstrap-server, set SAMSA_BOOTSTRAP, or run "
        f"`samsa up` (it writes {spec_file})"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns, as people read them in a terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", help="controller endpoints, host:port,...")
    parser.add_argument("--data-dir", default="samsa-data", help="where `samsa up` runs")


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
    for parser in (create, listing, describe, delete):
        add_connection(parser)

    produce = commands.add_parser("produce", help="produce lines from stdin")
    produce.add_argument("topic")
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
    consume.add_argument("topic")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int, help="start at this offset (each partition)")
    start.add_argument("--from-time", help="start at this time: ms since epoch or ISO 8601")
    consume.add_argument("--partition", type=int, action="append", help="only these partitions")
    consume.add_argument("--count", type=int, help="stop after this many records")
    consume.add_argument("--timeout", type=float, help="stop after this many idle seconds")
    consume.add_argument("--format", choices=("value", "kv", "json"), default="value")
    consume.add_argument(
        "--group",
        help="consume as a member of this consumer group: its partitions, from its committed "
        "offsets (--from-beginning where it has none); commits what was printed",
    )
    add_connection(consume)

    add_group_commands(commands)
    add_transaction_commands(commands, add_connection)

    cluster = commands.add_parser(
        "cluster", help="controllers, brokers, coordinators and partitions"
    )
    add_connection(cluster)


def add_group_commands(commands: argparse._SubParsersAction) -> None:
    groups = commands.add_parser(
        "groups", help="list, describe, lag, reset offsets of, delete consumer groups"
    )
    actions = groups.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every consumer group: state and member count")
    describe = actions.add_parser("describe", help="state, epochs, assignor, members")
    describe.add_argument("group")
    lag = actions.add_parser("lag", help="committed offset, log end offset and lag per partition")
    lag.add_argument("group")
    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets (prints the plan unless --execute)"
    )
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    reset.add_argument(
        "--partitions", type=_partition_list, help="comma-separated, e.g. 0,1 (default: all)"
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument("--to-offset", type=int, metavar="N", help="this offset (each partition)")
    target.add_argument(
        "--to-datetime", metavar="TIME", help="the first offset at or after TIME (ISO 8601 or ms)"
    )
    target.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)"
    )
    reset.add_argument("--execute", action="store_true", help="commit the plan (else: dry run)")
    delete = actions.add_parser("delete", help="delete empty groups and their committed offsets")
    delete.add_argument("groups", nargs="+")
    for parser in (listing, describe, lag, reset, delete):
        add_connection(parser)


def _partition_list(text: str) -> list[int]:
    """`--partitions 0,1,3` as sorted partition numbers."""
    try:
        numbers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers"
        ) from None
    if not numbers or numbers[0] < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: partitions are numbers from 0")
    return numbers


def run(args: argparse.Namespace) -> int:
    """Run one cluster command; every failure is one line on stderr and exit code 1."""
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
            return _groups(args)
        if args.command == "transactions":
            return run_transactions(args, servers)
        if args.command == "cluster":
            return _cluster(args)
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


def _require_topic(admin: Admin, topic: str) -> TopicDescription:
    """The topic, or exit with one line saying how to create it.

    Checked here rather than left to the producer, which (like Kafka's) waits max.block.ms, 60 s,
    for an unknown topic's metadata: right for an application racing a topic's creation, a silent
    minute for a person who mistyped a name. A short max.block.ms would also cut the producer's
    wait for buffer space, which `samsa produce` of a large file needs."""
    deadline = time.monotonic() + TOPIC_VISIBLE_WAIT_S
    while True:
        try:
            return admin.describe_topics([topic])[topic]
        except TopicError as error:
            if error.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise
            if time.monotonic() >= deadline:
                raise SystemExit(
                    f"samsa: topic {topic!r} does not exist "
                    f"(create it with `samsa topics create {topic}`)"
                ) from None
        time.sleep(0.2)


def _topics(args: argparse.Namespace) -> int:
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
        if args.action == "create":
            configs = dict(_key_value(item, "--config") for item in args.config)
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
        elif args.action == "delete":
            admin.delete_topics(args.names)
            print(f"deleted {', '.join(args.names)}")
    return 0


def _key_value(item: str, flag: str) -> tuple[str, str]:
    if "=" not in item:
        raise SystemExit(f"samsa: {flag} {item!r} is not KEY=VALUE")
    key, value = item.split("=", 1)
    return key, value


def _produce(args: argparse.Namespace) -> int:
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
        _require_topic(admin, args.topic)
    settings = {"bootstrap.servers": bootstrap(args), "compression.type": args.compression}
    # Kafka's console producer habit: any setting by name, checked by the SDK (an unknown key or
    # a bad value is one line naming it). They win over --compression.
    settings.update(_key_value(item, "--producer-property") for item in args.producer_property)
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
            info = _require_topic(admin, args.topic)
        partitions = args.partition or [p.partition for p in info.partitions]
        assigned = [(args.topic, p) for p in partitions]
        consumer.assign(assigned)
        if args.offset is not None:
            for tp in assigned:
                consumer.seek(tp, args.offset)
        elif args.from_time is not None:
            at_ms = _parse_time(args.from_time, "--from-time")
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
        _require_topic(admin, args.topic)
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


def _parse_time(text: str, flag: str) -> int:
    """ms since epoch, or ISO 8601 (local time when it names no zone, as Kafka's tools)."""
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise SystemExit(f"samsa: {flag} {text!r} is neither ms since epoch nor ISO 8601") from None


def _cluster(args: argparse.Namespace) -> int:
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
    rows = []
    under_replicated = offline = 0
    for name, info in sorted(topics.items()):
        for p in info.partitions:
            if p.leader < 0:
                status = "OFFLINE"
                offline += 1
            elif len(p.isr) < len(p.replicas):
                status = "under-replicated"
                under_replicated += 1
            else:
                status = "ok"
            rows.append(
                (
                    name,
                    p.partition,
                    p.leader if p.leader >= 0 else "-",
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                    status,
                )
            )
    print()
    headers = ("topic", "partition", "leader", "replicas", "isr", "status")
    print(table(headers, rows) if rows else "no topics")
    print(f"\n{offline} offline, {under_replicated} under-replicated partition(s)")
    return 0


# --- consumer groups ----------------------------------------------------------------------------


def _groups(args: argparse.Namespace) -> int:
    with Admin({"bootstrap.servers": bootstrap(args)}) as admin:
        if not any(not x.fenced for x in admin.describe_cluster().coordinators):
            raise SystemExit(
                "samsa groups: no coordinator is live, and consumer groups live on coordinators "
                "(`samsa up --coordinators 2` runs two)"
            )
        if args.action == "list":
            listings = admin.list_consumer_groups()
            rows = [(x.group_id, x.state, x.member_count) for x in listings]
            print(table(("group", "state", "members"), rows) if rows else "no groups")
        elif args.action == "describe":
            print(describe_lines(admin.describe_consumer_groups([args.group])[args.group]))
        elif args.action == "lag":
            print(lag_lines(args.group, admin.describe_consumer_group_lag(args.group)))
        elif args.action == "reset-offsets":
            return _reset_offsets(admin, args)
        elif args.action == "delete":
            return _delete_groups(admin, args.groups)
    return 0


def format_partitions(partitions: Sequence[TopicPartition]) -> str:
    """("orders", 0), ("orders", 1), ("audit", 2) -> "audit:2 orders:0,1"; "-" for none."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def describe_lines(group: ConsumerGroupDescription) -> str:
    head = (
        f"group {group.group_id}  state {group.state}  group epoch {group.group_epoch}  "
        f"assignment epoch {group.assignment_epoch}  assignor {group.assignor or '-'}  "
        f"members {len(group.members)}"
    )
    if not group.members:
        return head
    rows = [
        (
            m.member_id,
            m.group_instance_id or "-",
            m.client_id or "-",
            m.member_epoch,
            format_partitions(m.assignment),
            format_partitions(m.target_assignment),
        )
        for m in group.members
    ]
    headers = ("member", "instance", "client", "epoch", "assignment", "target")
    return head + "\n\n" + table(headers, rows)


def lag_lines(group_id: str, rows: Sequence[PartitionLag]) -> str:
    """The lag table and its total; unknown values ("-") are left out of the total and said."""
    if not rows:
        return f"group {group_id} has no committed offsets and owns no partitions"

    def known(value: int) -> object:
        return value if value >= 0 else "-"

    cells = [
        (
            r.topic,
            r.partition,
            known(r.committed_offset),
            known(r.log_end_offset),
            known(r.lag),
            r.member_id or "-",
        )
        for r in rows
    ]
    headers = ("topic", "partition", "committed", "log end", "lag", "owner")
    unknown = sum(1 for r in rows if r.lag < 0)
    total = f"total lag {sum(r.lag for r in rows if r.lag >= 0)}"
    if unknown:
        total += f" ({unknown} partition(s) unknown: nothing committed or no log end offset)"
    return table(headers, cells) + "\n\n" + total


def reset_strategy(args: argparse.Namespace) -> tuple[str, int]:
    """The chosen --to-*/--shift-by flag as (strategy, value) for plan_offset_resets."""
    if args.to_earliest:
        return "to-earliest", 0
    if args.to_latest:
        return "to-latest", 0
    if args.to_offset is not None:
        return "to-offset", args.to_offset
    if args.to_datetime is not None:
        return "to-datetime", _parse_time(args.to_datetime, "--to-datetime")
    assert args.shift_by is not None, "argparse requires one strategy"
    return "shift-by", args.shift_by


def _reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """Kafka's `kafka-consumer-groups.sh --reset-offsets`: print the plan; commit it with
    --execute (the coordinator refuses while the group has members)."""
    strategy, value = reset_strategy(args)
    info = _require_topic(admin, args.topic)
    existing = [p.partition for p in info.partitions]
    missing = sorted(set(args.partitions or ()) - set(existing))
    if missing:
        raise SystemExit(
            f"samsa: topic {args.topic!r} has no partition(s) {missing} "
            f"(it has {len(existing)}: 0 to {len(existing) - 1})"
        )
    partitions = [(args.topic, p) for p in args.partitions or existing]
    committed = admin.list_consumer_group_offsets(args.group, partitions)
    with Consumer({"bootstrap.servers": bootstrap(args)}) as consumer:
        earliest = consumer.beginning_offsets(partitions)
        latest = consumer.end_offsets(partitions)
        found = None
        if strategy == "to-datetime":
            at = consumer.offsets_for_times({tp: value for tp in partitions})
            found = {tp: None if x is None else x.offset for tp, x in at.items()}
    try:
        plan = plan_offset_resets(
            partitions,
            {tp: x.offset for tp, x in committed.items()},
            earliest,
            latest,
            strategy,
            value,
            found,
        )
    except ValueError as error:
        raise SystemExit(f"samsa groups reset-offsets: {error}") from None
    rows = [
        (r.topic, r.partition, r.current_offset if r.current_offset >= 0 else "-", r.new_offset)
        for r in plan
    ]
    print(table(("topic", "partition", "current offset", "new offset"), rows))
    if not args.execute:
        print(
            f"\ndry run: nothing changed; add --execute to commit these offsets for group "
            f"{args.group} (its consumers must be stopped)",
            file=sys.stderr,
        )
        return 0
    admin.alter_consumer_group_offsets(
        args.group, {(r.topic, r.partition): r.new_offset for r in plan}
    )
    print(f"\ncommitted {len(plan)} offset(s) for group {args.group}", file=sys.stderr)
    return 0


def _delete_groups(admin: Admin, group_ids: Sequence[str]) -> int:
    """Each group on its own, so that every one gets its line: deleted, or why not."""
    failed = 0
    for group_id in group_ids:
        try:
            admin.delete_consumer_groups([group_id])
        except GroupError as error:
            print(f"samsa groups delete: {error} ({error.code.name})", file=sys.stderr)
            failed += 1
            continue
        print(f"deleted {group_id}")
    return 1 if failed else 0
