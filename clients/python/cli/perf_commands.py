"""`samsa perf produce|consume`: Kafka's kafka-producer-perf-test.sh and
kafka-consumer-perf-test.sh for Samsa, with their flags' meanings and their output lines (the
arithmetic is in perf_stats.py, tested on known numbers; this module only times and loops).

`perf produce` sends --num-records records of --record-size random bytes (or the lines of
--payload-file, in turn) with the SDK's Producer, at most --throughput records/s, and takes a
record's latency from its send() to its acknowledgement in the send's callback, as Kafka's tool
does. Kafka's tool does that for every record; here it is one record in --latency-every (16 by
default), because a callback per record costs a Python producer about 40 % of its throughput
(the callback thread takes the GIL from the sending one), which would measure the tool instead
of the cluster. The counts stay exact: records sent minus `Producer.failed_records`; the latency
figures are over the measured records, each standing for the K sent with it.
With --transactional-id or --transaction-duration-ms (or a transactional.id among the producer
properties) it sends in transactions, as Kafka's tool does: init_transactions, then one
transaction committed each --transaction-duration-ms (3000 by default) and the last at the end;
that is how a transactional producer's throughput is read at a given commit interval.
`perf consume` reads --messages records of every partition of the topic from the earliest offset,
assigned (no group, so rebalance.time.ms is 0), until it has them or none came for --timeout-ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path

from samsa.cli.command_support import (
    add_client_property,
    bootstrap,
    client_config,
    client_settings,
    require_topic,
)
from samsa.cli.perf_stats import (
    CONSUMER_DETAILED_HEADER,
    CONSUMER_HEADER,
    MB,
    ProducerStats,
    consumer_line,
    consumer_progress_line,
    throttle_sleep_ms,
)
from samsa.client import Admin, Consumer, Producer
from samsa.client.errors import KafkaError
from samsa.client.record_future import RecordFuture

# Random payloads are drawn from a pool made once (1024 of them, at most 64 MB), not per record.
PAYLOAD_POOL = 1024
PAYLOAD_POOL_BYTES = 64 * MB
# One record in this many has its latency measured (--latency-every): see the docstring.
LATENCY_EVERY = 16
# How long one consumer poll waits: the idle --timeout-ms is checked this often.
POLL_TIMEOUT_S = 0.5
# Kafka's tool's defaults once transactions are on.
DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"
DEFAULT_TRANSACTION_DURATION_MS = 3000


def add_perf_commands(
    commands: argparse._SubParsersAction, add_connection: Callable[[argparse.ArgumentParser], None]
) -> None:
    perf = commands.add_parser(
        "perf", help="measure produce or consume throughput and latency, as Kafka's perf tests"
    )
    actions = perf.add_subparsers(dest="action", required=True)

    produce = actions.add_parser("produce", help="as kafka-producer-perf-test.sh")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--num-records", type=_positive, required=True, metavar="N")
    payload = produce.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=_positive, metavar="BYTES", help="random bytes")
    payload.add_argument(
        "--payload-file", type=_payload_lines, metavar="FILE", help="its non-empty lines, in turn"
    )
    produce.add_argument(
        "--throughput",
        type=_throughput,
        default=-1.0,
        metavar="N",
        help="at most N records/s (-1, the default: unlimited)",
    )
    add_client_property(produce, "producer")
    produce.add_argument(
        "--reporting-interval",
        type=_positive,
        default=5000,
        metavar="MS",
        help="a progress line every MS (default 5000)",
    )
    produce.add_argument(
        "--latency-every",
        type=_positive,
        default=LATENCY_EVERY,
        metavar="K",
        help=(
            f"measure the latency of one record in K (default {LATENCY_EVERY}; 1: every record, "
            "as Kafka's tool, at a cost in throughput)"
        ),
    )
    produce.add_argument(
        "--transactional-id",
        metavar="ID",
        help=f"send in transactions of this id (with only --transaction-duration-ms: "
        f"{DEFAULT_TRANSACTIONAL_ID})",
    )
    produce.add_argument(
        "--transaction-duration-ms",
        type=_positive,
        metavar="MS",
        help=f"commit a transaction each MS (default {DEFAULT_TRANSACTION_DURATION_MS} once "
        "transactions are on)",
    )
    add_connection(produce)

    consume = actions.add_parser("consume", help="as kafka-consumer-perf-test.sh")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--messages", type=_positive, required=True, metavar="N")
    add_client_property(consume, "consumer")
    consume.add_argument(
        "--timeout-ms",
        type=_positive,
        default=10_000,
        metavar="MS",
        help="give up when no record came for this long (default 10000)",
    )
    consume.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="a line per --reporting-interval instead of one at the end, as Kafka's",
    )
    consume.add_argument(
        "--reporting-interval",
        type=_positive,
        default=5000,
        metavar="MS",
        help="with --show-detailed-stats: a line every MS (default 5000)",
    )
    add_connection(consume)


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text} is not at least 1")
    return number


def _throughput(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if rate == 0:
        raise argparse.ArgumentTypeError("0 would send nothing: records/s, or -1 for unlimited")
    return rate


def _payload_lines(path: str) -> list[bytes]:
    """The file's non-empty lines, read while parsing so that a bad file is a usage error."""
    try:
        lines = [line for line in Path(path).read_bytes().splitlines() if line]
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {error.strerror}") from None
    if not lines:
        raise argparse.ArgumentTypeError(f"{path} has no non-empty line")
    return lines


def transactions_of(
    transactional_id: str | None, duration_ms: int | None, settings: dict[str, str]
) -> tuple[str | None, int]:
    """(transactional id, commit interval in ms), or (None, 0) without transactions: Kafka's
    tool turns them on for --transactional-id, --transaction-duration-ms or a transactional.id
    among the producer properties, the flag winning over the property."""
    chosen = transactional_id or settings.get("transactional.id")
    if chosen is None and duration_ms is None:
        return None, 0
    return chosen or DEFAULT_TRANSACTIONAL_ID, duration_ms or DEFAULT_TRANSACTION_DURATION_MS


def run_perf(args: argparse.Namespace) -> int:
    if args.action == "produce":
        return _produce(args)
    return _consume(args)


def _now_ms() -> float:
    return time.perf_counter() * 1000


def _wall_time() -> str:
    """Now as Kafka's consumer perf test prints times (yyyy-MM-dd HH:mm:ss:SSS)."""
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S:%f")[:-3]


def _random_payloads(size: int) -> list[bytes]:
    """A pool made once and cycled through: no per-record cost, yet not one value every time."""
    count = max(1, min(PAYLOAD_POOL, PAYLOAD_POOL_BYTES // size))
    return [os.urandom(size) for _ in range(count)]


class _Acknowledgements:
    """The send callbacks' shared state: they run on the producer's callback thread, or on the
    sending thread for a record already settled when its callback is added, hence the lock.
    Each callback measures one record standing for `records` sent with it (`size` bytes)."""

    def __init__(self, stats: ProducerStats) -> None:
        self.stats = stats
        self.first_error: Exception | None = None
        # Set when a progress line found stdout's reader gone (`... | head`): the sending loop
        # then ends the run as main() ends any command whose output is closed.
        self.output_closed = False
        self._lock = threading.Lock()

    def done(self, sent_ms: float, records: int, size: int, future: RecordFuture) -> None:
        now_ms = _now_ms()
        error = future.exception(timeout=0)
        line = None
        with self._lock:
            if error is None:  # as Kafka's tool, only acknowledged records are "sent"
                line = self.stats.record(now_ms - sent_ms, size, now_ms, records)
            else:  # counted by the producer (failed_records); the first error is shown
                self.first_error = self.first_error or error
        if line is not None and not self.output_closed:
            try:
                print(line, flush=True)
            except BrokenPipeError:  # on the callback thread: the sending loop raises it again
                self.output_closed = True


def _produce(args: argparse.Namespace) -> int:
    servers = bootstrap(args)
    with Admin(client_config(args, servers)) as admin:
        require_topic(admin, args.topic)
    settings = client_settings(args, args.producer_property, "--producer-property")
    transactional_id, duration_ms = transactions_of(
        args.transactional_id, args.transaction_duration_ms, settings
    )
    if transactional_id is not None:
        settings["transactional.id"] = transactional_id
    payloads = args.payload_file or _random_payloads(args.record_size)
    every = args.latency_every
    total_bytes = group_bytes = 0
    with Producer(settings) as producer:
        if transactional_id is not None:
            producer.init_transactions()
            producer.begin_transaction()
        acks = _Acknowledgements(ProducerStats(_now_ms(), args.reporting_interval))
        started_ms = txn_started_ms = acks.stats.start_ms
        for index in range(args.num_records):
            if acks.output_closed:
                raise BrokenPipeError("stdout's reader is gone")
            payload = payloads[index % len(payloads)]
            group_bytes += len(payload)
            sent_ms = _now_ms()
            if transactional_id is not None and sent_ms - txn_started_ms >= duration_ms:
                if not _committed(producer):
                    return 1
                producer.begin_transaction()
                txn_started_ms = sent_ms
            try:
                future = producer.send(args.topic, payload)
            except KafkaError as error:  # the open transaction failed: a record of it was refused
                if transactional_id is None:
                    raise
                _abort(producer, error)
                return 1
            if index % every == every - 1 or index == args.num_records - 1:
                records = index % every + 1  # this record and the unmeasured ones before it
                future.add_done_callback(partial(acks.done, sent_ms, records, group_bytes))
                total_bytes += group_bytes
                group_bytes = 0
            if args.throughput > 0:
                pause_ms = throttle_sleep_ms(index + 1, _now_ms() - started_ms, args.throughput)
                if pause_ms:
                    time.sleep(pause_ms / 1000)
        if transactional_id is None:
            producer.flush()
        elif not _committed(producer):  # flushes first
            return 1
        ended_ms = _now_ms()
        failed = producer.failed_records
    # Leaving `with` closed the producer, which runs every callback still queued first.
    acknowledged = args.num_records - failed
    # Bytes of the acknowledged records: exact unless --payload-file lines differ in size and
    # some records failed (then in proportion).
    size = total_bytes * acknowledged // args.num_records
    print(acks.stats.summary(ended_ms, acknowledged, size), flush=True)
    if failed:
        why = (
            f"the first measured one with: {acks.first_error}"
            if acks.first_error is not None
            else "none of the measured ones (--latency-every 1 measures, and shows, every one)"
        )
        print(
            f"samsa perf produce: {failed} of {args.num_records} records failed, {why}",
            file=sys.stderr,
        )
        return 1
    return 0


def _committed(producer: Producer) -> bool:
    """Commit the open transaction; when it cannot commit (a record in it failed), abort it,
    say why and return False: the run stops there, as Kafka's tool does."""
    try:
        producer.commit_transaction()
    except KafkaError as error:
        _abort(producer, error)
        return False
    return True


def _abort(producer: Producer, error: KafkaError) -> None:
    """Abort the open transaction that `error` failed, and say so. Closing the producer would
    not: the transaction would stay open, holding its partitions' last stable offset back, until
    the coordinator's transaction.timeout.ms."""
    producer.abort_transaction()
    print(f"samsa perf produce: a transaction failed and was aborted: {error}", file=sys.stderr)


def _consume(args: argparse.Namespace) -> int:
    servers = bootstrap(args)
    with Admin(client_config(args, servers)) as admin:
        info = require_topic(admin, args.topic)
    partitions = [(args.topic, p.partition) for p in info.partitions]
    # Larger polls than the SDK's default 500, as `samsa consume`: fewer calls per record.
    settings: dict[str, object] = {
        "max.poll.records": 5000,
        **client_settings(args, args.consumer_property, "--consumer-property"),
    }
    wanted = args.messages
    messages = size = 0
    print(CONSUMER_DETAILED_HEADER if args.show_detailed_stats else CONSUMER_HEADER, flush=True)
    with Consumer(settings) as consumer:
        start_time, started_ms = _wall_time(), _now_ms()
        consumer.assign(partitions)
        consumer.seek_to_beginning(partitions)
        first_record_ms = None
        last_record_ms = report_ms = started_ms
        reported_messages = reported_size = 0
        while messages < wanted:
            records = consumer.poll(timeout=POLL_TIMEOUT_S)
            now_ms = _now_ms()
            if not records:
                if now_ms - last_record_ms >= args.timeout_ms:
                    break
                continue
            if first_record_ms is None:
                first_record_ms = now_ms
            last_record_ms = now_ms
            taken = records[: wanted - messages]
            messages += len(taken)
            size += sum(len(r.key or b"") + len(r.value or b"") for r in taken)
            if args.show_detailed_stats and now_ms - report_ms >= args.reporting_interval:
                print(
                    consumer_progress_line(
                        _wall_time(),
                        messages,
                        size,
                        messages - reported_messages,
                        size - reported_size,
                        round(now_ms - report_ms),
                    ),
                    flush=True,
                )
                report_ms, reported_messages, reported_size = now_ms, messages, size
        end_time, ended_ms = _wall_time(), _now_ms()
    if not args.show_detailed_stats:  # Kafka's tool, too, prints one or the other
        fetch_ms = 0 if first_record_ms is None else round(ended_ms - first_record_ms)
        elapsed_ms = round(ended_ms - started_ms)
        print(consumer_line(start_time, end_time, elapsed_ms, fetch_ms, messages, size))
    if messages < wanted:
        print(
            f"samsa perf consume: {wanted - messages} of {wanted} records missing: none came for "
            f"{args.timeout_ms} ms (--timeout-ms)",
            file=sys.stderr,
        )
        return 1
    return 0
