"""`samsa produce` and `samsa consume`: Kafka's console producer and consumer, thin over the SDK.

They take their own flags and those of kafka-console-producer.sh / kafka-console-consumer.sh
(`--topic`, `--max-messages`, `--timeout-ms`, `--producer-property`, `--consumer-property`,
`--isolation-level`, and `--property`, read by console_format.py), so that a Kafka user's habits
carry over. `produce` sends stdin's lines,
`consume` prints records (value, key and value, chosen fields, or JSON), in a group (committing
exactly what it printed) or from chosen offsets.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import BinaryIO

from samsa.cli.command_support import (
    add_client_property,
    client_config,
    client_settings,
    int32,
    int64,
    key_value,
    milliseconds_as_seconds,
    parse_time,
    require_topic,
    seconds,
)
from samsa.cli.console_format import (
    KAFKA_FORMAT,
    KEY_VALUE_FORMAT,
    VALUE_FORMAT,
    LineFormat,
    PropertyError,
)
from samsa.client import Admin, Consumer, ConsumerRebalanceListener, Producer
from samsa.client.consumer_records import ConsumerRecord
from samsa.client.errors import KafkaError
from samsa.client.group_admin import TopicPartition
from samsa.client.record_future import RecordFuture

CONSOLE_COMMANDS = ("produce", "consume")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
PROGRESS_INTERVAL_S = 1.0


def add_console_commands(
    commands: argparse._SubParsersAction,
    add_connection: Callable[[argparse.ArgumentParser], None],
) -> None:
    produce = commands.add_parser("produce", help="produce lines from stdin")
    add_topic_argument(produce)
    produce.add_argument("--key-separator", help="split each line into key SEP value")
    produce.add_argument("--partition", type=int32)
    produce.add_argument("--compression", choices=("none", "zstd"), default="none")
    add_client_property(produce, "producer")
    produce.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="how lines are read, as kafka-console-producer's: parse.key=true, key.separator=:",
    )
    add_connection(produce)

    consume = commands.add_parser("consume", help="print records of a topic")
    add_topic_argument(consume)
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int64, help="start at this offset (each partition)")
    start.add_argument(
        "--from-time",
        help="start at this time: ms since epoch or ISO 8601 (UTC unless it names a zone)",
    )
    consume.add_argument("--partition", type=int32, action="append", help="only these partitions")
    consume.add_argument(
        "--count", "--max-messages", type=int, help="stop after this many records (-1: no limit)"
    )
    idle = consume.add_mutually_exclusive_group()
    idle.add_argument("--timeout", type=seconds, help="stop after this many idle seconds")
    idle.add_argument(
        "--timeout-ms",
        dest="timeout",
        type=milliseconds_as_seconds,
        metavar="MS",
        help="the same in milliseconds (kafka-console-consumer's flag)",
    )
    consume.add_argument("--format", choices=("value", "kv", "json"), default="value")
    consume.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what each line shows, as kafka-console-consumer's: print.key=true, "
        "print.timestamp, print.partition, print.offset, print.headers, print.value, "
        "key.separator, null.literal",
    )
    consume.add_argument(
        "--group",
        help="consume as a member of this consumer group: its partitions, from its committed "
        "offsets (--from-beginning where it has none); commits what was printed",
    )
    consume.add_argument(
        "--isolation-level",
        choices=ISOLATION_LEVELS,
        help="read_committed: only records of committed transactions, up to the last stable "
        "offset (default read_uncommitted, as kafka-console-consumer)",
    )
    add_client_property(consume, "consumer")
    add_connection(consume)


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


def prepare_console(args: argparse.Namespace) -> str | None:
    """Before connecting: merge the topic and read the --property items into `args.line_format`
    (produce) or `args.record_format` (consume); what is wrong, or None."""
    problem = resolve_topic(args)
    if problem is not None:
        return problem
    try:
        properties = [key_value(item, "--property") for item in args.property]
        if args.command == "produce":
            args.line_format = LineFormat.from_properties(args.key_separator, properties)
        elif args.format == "json" and properties:
            return "--format json prints every field: it takes no --property"
        else:
            base = KEY_VALUE_FORMAT if args.format == "kv" else VALUE_FORMAT
            if properties and args.format == "value":
                base = KAFKA_FORMAT  # --property asks for Kafka's formatter, nulls and all
            args.record_format = base.with_properties(properties)
    except PropertyError as error:
        return str(error)
    if args.command == "consume":
        if args.offset is not None and args.offset < 0:
            return f"--offset {args.offset}: an offset is 0 or more"
        if args.count == -1:  # Kafka's console consumer: --max-messages -1 is no limit
            args.count = None
        elif args.count is not None and args.count < 0:
            return f"--count {args.count}: a count is 0 or more, or -1 for no limit"
        settings = consumer_settings(args)
        if isinstance(settings, str):
            return settings
        args.consumer_settings = settings
    return None


def consumer_settings(args: argparse.Namespace) -> dict[str, str] | str:
    """`samsa consume`'s consumer settings, or what is wrong: the --consumer-property items
    (Kafka's names, checked by the SDK when the consumer is made) with the flags that set one
    of them merged in — --group (group.id), --from-beginning (auto.offset.reset=earliest) and
    --isolation-level. A flag and a property that disagree are refused, as Kafka's console
    consumer refuses them; `args.group` takes a group.id given as a property. bootstrap.servers
    is left out: `bootstrap` reads it (where no --bootstrap-server is given) for every client."""
    settings = dict(key_value(item, "--consumer-property") for item in args.consumer_property)
    flags = {
        "group.id": ("--group", args.group),
        "auto.offset.reset": ("--from-beginning", "earliest" if args.from_beginning else None),
        "isolation.level": ("--isolation-level", args.isolation_level),
    }
    for key, (flag, value) in flags.items():
        if value is None:
            continue
        if settings.get(key, value) != value:
            return f"{flag} and --consumer-property {key}={settings[key]} disagree: give one"
        settings[key] = value
    args.group = settings.pop("group.id", None)
    settings.pop("bootstrap.servers", None)
    return settings


def run_console(args: argparse.Namespace) -> int:
    """Run `produce` or `consume` (`prepare_console` already read their arguments)."""
    return _produce(args) if args.command == "produce" else _consume(args)


def _produce(args: argparse.Namespace) -> int:
    with Admin(client_config(args)) as admin:
        count = len(require_topic(admin, args.topic).partitions)
    if args.partition is not None and not 0 <= args.partition < count:
        # Said at once: the producer would wait max.block.ms for the partition to appear.
        raise SystemExit(
            f"samsa produce: partition {args.partition} of {args.topic!r} does not exist "
            f"(it has {count}: 0 to {count - 1})"
        )
    # Kafka's console producer habit: any setting by name, checked by the SDK (an unknown key or
    # a bad value is one line naming it). They win over --compression, not --bootstrap-server.
    settings = {
        "compression.type": args.compression,
        **client_settings(args, args.producer_property, "--producer-property"),
    }
    producer = Producer(settings)
    split = args.line_format.split
    sent = 0
    started = last_report = time.monotonic()
    outcomes = _Outcomes()
    with producer:
        for line in sys.stdin.buffer:
            key, value = split(line.rstrip(b"\r\n"))
            outcomes.add(producer.send(args.topic, value, key=key, partition=args.partition))
            sent += 1
            if time.monotonic() - last_report >= PROGRESS_INTERVAL_S:
                last_report = time.monotonic()
                rate = sent / (last_report - started)
                print(f"\rproduced {sent:,} records ({rate:,.0f}/s)", end="", file=sys.stderr)
        producer.flush()
    outcomes.drop_settled()  # all of them, after the flush
    elapsed = time.monotonic() - started
    print(f"\rproduced {sent - outcomes.failed:,} records in {elapsed:.1f} s", file=sys.stderr)
    if outcomes.failed:
        print(
            f"samsa produce: {outcomes.failed} records failed: {outcomes.first_error}",
            file=sys.stderr,
        )
        return 1
    return 0


class _Outcomes:
    """The futures of sent records not yet settled, oldest first. Settled ones are dropped as
    records are sent (a failed one counted, the first error kept), so memory follows the records
    in flight, not the length of stdin."""

    def __init__(self) -> None:
        self._pending: deque[RecordFuture] = deque()
        self.failed = 0
        self.first_error: KafkaError | None = None

    def add(self, future: RecordFuture) -> None:
        self._pending.append(future)
        self.drop_settled()

    def drop_settled(self) -> None:
        """Drop the settled futures at the front (records settle about in the order sent)."""
        pending = self._pending
        while pending and pending[0].done():
            error = pending.popleft().exception(timeout=0)
            if error is not None:
                self.failed += 1
                self.first_error = self.first_error or error


def _consume(args: argparse.Namespace) -> int:
    if args.group is not None:
        return _consume_in_group(args)
    config = {**client_config(args), "auto.offset.reset": "latest"}
    consumer = Consumer({**config, "max.poll.records": 5000, **args.consumer_settings})
    with consumer:
        with Admin(client_config(args)) as admin:
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
        **client_config(args),
        "group.id": args.group,
        "auto.offset.reset": "latest",
        "enable.auto.commit": False,
        "max.poll.records": 5000,
        **args.consumer_settings,
    }
    with Admin(client_config(args)) as admin:
        require_topic(admin, args.topic)
    printed_up_to: dict[TopicPartition, int] = {}
    with Consumer(config) as consumer:
        consumer.subscribe([args.topic], listener=_CommitPrinted(consumer, printed_up_to))
        try:
            return _print_records(consumer, args, printed_up_to)
        finally:
            consumer.commit(printed_up_to)  # exactly what was printed, not what was fetched


class _CommitPrinted(ConsumerRebalanceListener):
    """Commits what was printed of the partitions the group takes from this member, before it
    gives them up (Kafka's console consumer commits there too), so that their next owner goes on
    from there instead of from auto.offset.reset; lost ones (this member fenced) are another's
    now, so their offsets are not committed later either."""

    def __init__(self, consumer: Consumer, printed_up_to: dict[TopicPartition, int]) -> None:
        self.consumer = consumer
        self.printed_up_to = printed_up_to

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        given_up = {tp: self.printed_up_to.pop(tp) for tp in partitions if tp in self.printed_up_to}
        self.consumer.commit(given_up)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.printed_up_to.pop(tp, None)


def _print_records(
    consumer: Consumer, args: argparse.Namespace, printed_up_to: dict | None = None
) -> int:
    """Print records until --count or --timeout; `printed_up_to` gets each partition's next
    offset after the last record printed, once its line is flushed: a line that could not be
    written (a full disk, a reader gone) leaves its record for the group's next run."""
    render = _json if args.format == "json" else args.record_format.render
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
            taken = records[: None if args.count is None else args.count - printed]
            lines = b"".join(render(record) + b"\n" for record in taken)
            written_up_to = {(r.topic, r.partition): r.offset + 1 for r in taken}
            before = printed, None if printed_up_to is None else dict(printed_up_to)
            # Counted before the write: a Ctrl-C or SIGTERM lands as soon as the write returns
            # (its reader may send it on seeing the lines), and counted after, the lines the
            # reader already has were neither counted nor committed. One write for the lot:
            # stdout may be unbuffered (PYTHONUNBUFFERED), and a line written per record would
            # reach the reader before it is counted.
            printed += len(taken)
            if printed_up_to is not None:
                printed_up_to.update(written_up_to)
            try:
                _write_all(out, lines)
            except OSError:  # not written (a full disk, a reader gone): left for the next run
                printed = before[0]
                if printed_up_to is not None and before[1] is not None:
                    printed_up_to.clear()
                    printed_up_to.update(before[1])
                raise
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP (command_support.Terminated): stop
        pass
    print(f"consumed {printed:,} records", file=sys.stderr)
    return 0


def _write_all(out: BinaryIO, data: bytes) -> None:
    """Write and flush all of `data`: a raw (unbuffered) stdout may take part of it a call."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]
    out.flush()


def _json(record: ConsumerRecord) -> bytes:
    """One JSON object per record; a null key, value (a tombstone) or header value is JSON
    null, never "" (an empty value is a record, a null one deletes its key)."""
    return json.dumps(
        {
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": _text_or_null(record.key),
            "value": _text_or_null(record.value),
            "headers": {k: _text_or_null(v) for k, v in record.headers},
        }
    ).encode()


def _text_or_null(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")
