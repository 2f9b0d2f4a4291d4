"""`samsa`: the command line.

    samsa up [--data-dir DIR] [--controllers 3] [--brokers 3] [--coordinators 2] [--tls]
             [--authorizer] [--sasl]
                                                               run a local cluster
    samsa topics create|list|describe|delete ...               manage topics
    samsa produce TOPIC [--key-separator SEP] [--producer-property K=V]  lines from stdin
    samsa consume TOPIC [--from-beginning|--offset N|--from-time T] [--count N] [--format F]
                  [--group G] [--isolation-level L] [--consumer-property K=V]
    samsa groups list|describe|lag|reset-offsets|delete ...    consumer groups (see below)
    samsa transactions list|describe|describe-producers|abort  transactional ids (hanging?)
    samsa cluster [--partitions]        members, topics, partitions not in sync (or all)
    samsa cluster unregister --id N     forget a broker stopped for good (holding no replica)
    samsa reassign --generate|--execute|--verify|--cancel|--list ...  move partitions' replicas
    samsa log-dirs --describe [--broker-list 1,2] [--topic-list a,b] [--json]  what brokers store
    samsa leader-election --election-type preferred|unclean (--topic T [--partition P]
                          | --all-topic-partitions)   elect leaders now
    samsa quotas --describe|--alter [--client-id X|--client-defaults] [--add K=N,..] [--delete K,..]
                                                               client quotas (byte rates)
    samsa acls --add|--remove|--list [--allow-principal P] [--operation OP] [--topic T] ...
                                                               ACLs, as kafka-acls.sh
    samsa metadata-quorum describe --status|--replication [--human-readable]
                                                               the controller quorum's health
    samsa configs --entity-type brokers --entity-default (--describe [--all] | --alter
                  [--add-config K=V,..] [--delete-config K,..])  cluster-wide topic defaults
                  (or --entity-type topics --entity-name T: a topic's configs;
                  --entity-type brokers --entity-name ID: its replication throttle rates)
    samsa users describe [--user U] | set-scram|delete-scram --user U --mechanism M
                                                               SCRAM credentials (SASL users)
    samsa perf produce|consume --topic T ...                   as kafka-*-perf-test.sh
    samsa dump-log --files F[,F...] [--print-data-log] [--deep-iteration] [--index-sanity-check]
                   [--verify-index-only] [--max-bytes N] [--json]  a partition's files on disk
    samsa demo [--data-dir DIR] [--records N]                  the storage engine alone

`samsa groups` administers consumer groups as Kafka's kafka-consumer-groups.sh does: `list`,
`describe GROUP` (state, epochs, assignor, members and their partitions), `lag GROUP` (committed
offset, log end offset and lag per partition), `reset-offsets GROUP --topic T [--partitions 0,1]
(--to-earliest|--to-latest|--to-offset N|--to-datetime T|--shift-by N) [--execute]` (prints the
plan; --execute commits it; both refused while the group has members), `delete GROUP...`
(empty groups).

The cluster commands find the cluster through --bootstrap-server, a bootstrap.servers among the
--producer-property / --consumer-property items, $SAMSA_BOOTSTRAP, or the cluster.json that
`samsa up` wrote in --data-dir (default ./samsa-data), in that order. They connect with TLS (and
SASL/SCRAM) as `--command-config FILE` says (security.protocol, ssl.*.location, sasl.* lines),
else as that cluster.json says (`samsa up --tls`: its client certificate), else in plaintext.

The demo writes a real partition log on disk (segments, indexes, checkpoints), reads it back and
checks every record, looks records up by timestamp, then reopens the log as a restarted broker
would. Run it twice with the same directory and the second run continues where the first stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.cli.command_support import STOP_SIGNALS, Terminated, raise_terminated
from samsa.cli.commands import add_commands
from samsa.cli.commands import run as run_command
from samsa.cli.dump_log_command import add_dump_log_command, run_dump_log
from samsa.cli.trace_command import add_trace_command, run_trace
from samsa.common.record.codec import build_batch, decode_batches
from samsa.common.record.header import COMPRESSION_NONE, COMPRESSION_ZSTD

if TYPE_CHECKING:
    from samsa.services.broker.log.log import Log

DEMO_BATCH_RECORDS = 500
# A command ended by Ctrl-C, or by the reader of its output going away (`samsa consume T | head`),
# exits as a shell reports a command that signal killed (128 + the signal), with no traceback.
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
# The commands that talk to a cluster, run by commands.run().
CLUSTER_COMMANDS = (
    "topics",
    "produce",
    "consume",
    "groups",
    "transactions",
    "cluster",
    "perf",
    "reassign",
    "log-dirs",
    "leader-election",
    "quotas",
    "acls",
    "metadata-quorum",
    "configs",
    "users",
)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def demo(data_dir: Path, record_count: int) -> int:
    # The storage engine, imported here: no other command needs it, and each pays its import.
    from samsa.services.broker.log.config import LogConfig
    from samsa.services.broker.log.log import Log

    partition_dir = data_dir / "demo-0"
    # Small segments so that the demo rolls a few; a batch must fit in one.
    config = LogConfig.from_properties(
        {"segment.bytes": str(256 * 1024), "max.message.bytes": str(128 * 1024)}
    )
    log = Log.open(partition_dir, config, now_ms=_now_ms())
    first_offset = log.log_end_offset
    print(f"log directory   {partition_dir}")
    print(f"opened at       log_start_offset={log.log_start_offset} log_end_offset={first_offset}")

    run_started_ms = _now_ms()
    started = time.perf_counter()
    sent: list[tuple[bytes, bytes]] = []
    for batch_start in range(0, record_count, DEMO_BATCH_RECORDS):
        numbers = range(batch_start, min(record_count, batch_start + DEMO_BATCH_RECORDS))
        keys = [f"user-{n % 97}".encode() for n in numbers]
        values = [f"event {first_offset + n}: clicked button {n % 7}".encode() for n in numbers]
        compression = (
            COMPRESSION_ZSTD if (batch_start // DEMO_BATCH_RECORDS) % 2 else COMPRESSION_NONE
        )
        batch = build_batch(values, keys=keys, timestamps=_now_ms(), compression=compression)
        log.append_as_leader(batch, leader_epoch=0, now_ms=_now_ms())
        sent.extend(zip(keys, values, strict=True))
    elapsed = time.perf_counter() - started
    print(
        f"appended        {record_count:,} records in {elapsed * 1000:.1f} ms "
        f"(batches of {DEMO_BATCH_RECORDS}, zstd on every other batch)"
    )

    received = _read_back(log, first_offset)
    if received != sent:
        print("read back       MISMATCH: the log did not return what was appended", file=sys.stderr)
        return 1
    print(f"read back       {len(received):,} records, every key and value identical")

    segments = sorted(partition_dir.glob("*.log"))
    print(
        f"segments        {len(segments)} ({', '.join(path.name for path in segments[-3:])}"
        f"{', …' if len(segments) > 3 else ''})"
    )
    found = log.offset_for_timestamp(run_started_ms)
    print(
        f"time lookup     first record stamped at or after this run began is at offset "
        f"{found and found[0]}"
    )
    log.close()

    reopened = Log.open(partition_dir, config, now_ms=_now_ms())
    print(
        f"reopened        log_end_offset={reopened.log_end_offset} (was {first_offset} before "
        f"this run; run again to append more)"
    )
    reopened.close()
    return 0


def _read_back(log: Log, start_offset: int) -> list[tuple[bytes, bytes]]:
    records: list[tuple[bytes, bytes]] = []
    offset = start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1024 * 1024)
        for batch in decode_batches(result.records):
            records.extend(
                (key, value)
                for record_offset, key, value in zip(
                    batch.offsets(), batch.keys, batch.values, strict=True
                )
                if record_offset >= start_offset
            )
        offset = result.next_offset
    return records


def main(argv: list[str] | None = None) -> int:
    """Run one `samsa` command; its exit status. Ctrl-C, SIGTERM and a closed stdout end it
    quietly (SIGTERM and SIGHUP as Ctrl-C: command_support.Terminated)."""
    previous = {stop: signal.getsignal(stop) for stop in STOP_SIGNALS}
    for stop, handler in previous.items():
        if handler is not signal.SIG_IGN:  # `nohup samsa ...` asked to outlive the terminal
            signal.signal(stop, raise_terminated)
    try:
        code = _run(argv)
        sys.stdout.flush()  # a reader gone shows here, not in the interpreter's flush at exit
        return code
    except BrokenPipeError:
        # Nothing more can be written: stdout goes to /dev/null so that the interpreter's own
        # flush at exit does not fail again (the idiom of Python's signal module documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as stopped:
        return stopped.exit_code if isinstance(stopped, Terminated) else EXIT_INTERRUPTED
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, signal.SIG_DFL if handler is None else handler)


def _run(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa, a distributed commit log.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="append to and read back a real log on disk")
    demo_parser.add_argument("--data-dir", type=Path, default=Path("samsa-data"))
    demo_parser.add_argument("--records", type=int, default=20_000)
    up_parser = commands.add_parser(
        "up", help="run a local cluster (controllers, brokers, coordinators) until Ctrl-C"
    )
    up_parser.add_argument("--data-dir", type=Path, default=Path("samsa-data"))
    up_parser.add_argument("--controllers", type=int, default=3, choices=(1, 3, 5))
    up_parser.add_argument("--brokers", type=int, default=3)
    up_parser.add_argument(
        "--coordinators", type=int, default=2, help="consumer-group coordinators (0 to 8)"
    )
    up_parser.add_argument(
        "--tls",
        action="store_true",
        help="serve TLS and require client certificates, from a CA and certificates made in "
        "DATA_DIR/tls/ at the first start (a directory keeps the choice it was made with)",
    )
    up_parser.add_argument(
        "--authorizer",
        action="store_true",
        help="with --tls: enforce ACLs, the CLI's client certificate being the one super user "
        "(a directory keeps the choice it was made with)",
    )
    up_parser.add_argument(
        "--sasl",
        action="store_true",
        help="require a SASL/SCRAM login (implies --tls, without client certificates); the "
        "first user, admin, gets a random password in DATA_DIR/tls/ (with --authorizer, admin "
        "is the super user; a directory keeps the choice it was made with)",
    )
    add_commands(commands)
    add_trace_command(commands)
    add_dump_log_command(commands)
    args = parser.parse_args(argv)
    if args.command == "trace":
        return run_trace(args)
    if args.command == "dump-log":
        return run_dump_log(args)
    if args.command in CLUSTER_COMMANDS:
        return run_command(args)
    if args.command == "up":
        if not 1 <= args.brokers <= 32:
            parser.error("--brokers must be from 1 to 32")
        if not 0 <= args.coordinators <= 8:
            parser.error("--coordinators must be from 0 to 8")
        from samsa.cli.up import up

        if args.authorizer and not (args.tls or args.sasl):
            parser.error(
                "--authorizer needs --tls: ACLs name principals by their client certificates, "
                "and without TLS every caller is User:ANONYMOUS"
            )
        return up(
            args.data_dir,
            args.controllers,
            args.brokers,
            args.coordinators,
            tls=args.tls or args.sasl,
            authorizer=args.authorizer,
            sasl=args.sasl,
        )
    if args.command == "demo":
        if args.records < 1:
            parser.error("--records must be at least 1")
        return demo(args.data_dir, args.records)
    return 2


if __name__ == "__main__":
    sys.exit(main())
