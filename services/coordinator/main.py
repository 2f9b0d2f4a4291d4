"""`python -m samsa.services.coordinator --coordinator-id N --listen H:P --controllers H:P,...`.

Composition only: load the cluster secret (refusing to start without one: the coordinator's calls
to the controllers, and its writes to `__consumer_offsets`, are signed with a key derived from
it), then run the Coordinator until SIGTERM. The group and transaction settings take Kafka's
names (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms,
offsets.retention.minutes, group.consumer.max.size, group.consumer.assignors' default,
transaction.abort.timed.out.transaction.cleanup.interval.ms, transactional.id.expiration.ms,
transaction.max.timeout.ms).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from samsa.services.coordinator.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from samsa.services.coordinator.coordinator import Coordinator
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.transaction_partition import (
    ABORT_INTERVAL_MS_DEFAULT,
    TransactionConfig,
)
from samsa.services.coordinator.transaction_state import (
    TRANSACTION_TIMEOUT_MS_MAX,
    TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
)
from samsa.services.runtime import logs, membership, metrics, shutdown, telemetry
from samsa.services.runtime.secret import ClusterSecretError, load_secret

HEARTBEAT_INTERVAL_MS_DEFAULT = 2000  # with the controller (as brokers do)
COORDINATOR_SESSION_TIMEOUT_MS_DEFAULT = 9000  # as the controllers' default
SESSION_TIMEOUT_MS_DEFAULT = 45_000  # Kafka's group.consumer.session.timeout.ms
MEMBER_HEARTBEAT_INTERVAL_MS_DEFAULT = 5_000  # Kafka's group.consumer.heartbeat.interval.ms
OFFSETS_RETENTION_MINUTES_DEFAULT = 7 * 24 * 60  # Kafka's offsets.retention.minutes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa.services.coordinator")
    parser.add_argument("--coordinator-id", type=int, required=True)
    parser.add_argument("--listen", required=True, help="host:port of GroupCoordinatorService")
    parser.add_argument(
        "--controllers", required=True, help="controller endpoints, comma-separated"
    )
    parser.add_argument(
        "--secret-file",
        type=Path,
        required=True,
        help="the cluster secret (the controllers' file): proves this coordinator is a member",
    )
    parser.add_argument(
        "--coordinator-heartbeat-interval-ms", type=int, default=HEARTBEAT_INTERVAL_MS_DEFAULT
    )
    parser.add_argument(
        "--coordinator-session-timeout-ms",
        type=int,
        default=COORDINATOR_SESSION_TIMEOUT_MS_DEFAULT,
        help="the controllers' setting of the same name: this coordinator stops answering when "
        "no heartbeat was answered for that long (it may have been replaced)",
    )
    parser.add_argument(
        "--group-consumer-session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS_DEFAULT
    )
    parser.add_argument(
        "--group-consumer-heartbeat-interval-ms",
        type=int,
        default=MEMBER_HEARTBEAT_INTERVAL_MS_DEFAULT,
    )
    parser.add_argument("--group-consumer-max-size", type=int, default=0, help="0: unbounded")
    parser.add_argument(
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        type=int,
        default=ABORT_INTERVAL_MS_DEFAULT,
        help="how often open transactions past their timeout are aborted (and their producer "
        "fenced)",
    )
    parser.add_argument(
        "--transactional-id-expiration-ms",
        type=int,
        default=TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
        help="a transactional id idle this long is forgotten",
    )
    parser.add_argument(
        "--transaction-max-timeout-ms",
        type=int,
        default=TRANSACTION_TIMEOUT_MS_MAX,
        help="the longest transaction.timeout.ms a producer may ask for; AbortTransaction calls "
        "a transaction hanging once its partition saw no write from it for this long",
    )
    parser.add_argument(
        "--group-consumer-assignor", choices=sorted(ASSIGNORS), default=DEFAULT_ASSIGNOR
    )
    parser.add_argument(
        "--offsets-retention-minutes", type=int, default=OFFSETS_RETENTION_MINUTES_DEFAULT
    )
    metrics.add_argument(parser)
    args = parser.parse_args(argv)
    if args.coordinator_id < 0:
        parser.error("--coordinator-id must be >= 0")
    if args.coordinator_heartbeat_interval_ms < 10:
        parser.error("--coordinator-heartbeat-interval-ms must be at least 10")
    if args.coordinator_session_timeout_ms <= args.coordinator_heartbeat_interval_ms:
        parser.error(
            "--coordinator-session-timeout-ms must exceed --coordinator-heartbeat-interval-ms"
        )
    if args.group_consumer_heartbeat_interval_ms < 1:
        parser.error("--group-consumer-heartbeat-interval-ms must be at least 1")
    if args.group_consumer_session_timeout_ms <= args.group_consumer_heartbeat_interval_ms:
        parser.error(
            "--group-consumer-session-timeout-ms must exceed "
            "--group-consumer-heartbeat-interval-ms (members heartbeat within their session)"
        )
    if (
        args.transaction_abort_timed_out_transaction_cleanup_interval_ms < 1
        or args.transactional_id_expiration_ms < 1
        or args.transaction_max_timeout_ms < 1
    ):
        parser.error(
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms, "
            "--transactional-id-expiration-ms and --transaction-max-timeout-ms must be >= 1"
        )
    if args.group_consumer_max_size < 0 or args.offsets_retention_minutes < 1:
        parser.error("--group-consumer-max-size must be >= 0, --offsets-retention-minutes >= 1")
    args.controllers = [e.strip() for e in args.controllers.split(",") if e.strip()]
    if not args.controllers:
        parser.error("--controllers needs at least one host:port")
    return args


def group_config(args: argparse.Namespace) -> GroupConfig:
    return GroupConfig(
        session_timeout_ms=args.group_consumer_session_timeout_ms,
        heartbeat_interval_ms=args.group_consumer_heartbeat_interval_ms,
        max_size=args.group_consumer_max_size or None,
        offsets_retention_ms=args.offsets_retention_minutes * 60_000,
        default_assignor=args.group_consumer_assignor,
    )


async def run(args: argparse.Namespace, member_key: bytes, tracing: bool) -> int:
    stop = shutdown.stop_event()
    coordinator = Coordinator(
        coordinator_id=args.coordinator_id,
        listen=args.listen,
        controllers=args.controllers,
        member_key=member_key,
        heartbeat_interval_ms=args.coordinator_heartbeat_interval_ms,
        session_timeout_ms=args.coordinator_session_timeout_ms,
        group_config=group_config(args),
        transaction_config=TransactionConfig(
            abort_interval_ms=args.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            id_expiration_ms=args.transactional_id_expiration_ms,
            max_timeout_ms=args.transaction_max_timeout_ms,
        ),
        tracing=tracing,
    )
    await coordinator.run(stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(f"coordinator-{args.coordinator_id}")
    try:
        secret = load_secret(args.secret_file)
    except ClusterSecretError as error:
        print(f"samsa coordinator: {error}", file=sys.stderr)
        return 2
    tracing = telemetry.configure(f"samsa-coordinator-{args.coordinator_id}")
    try:
        served = metrics.serve(args.metrics_listen, f"samsa-coordinator-{args.coordinator_id}")
    except metrics.MetricsConfigError as error:
        print(f"samsa coordinator: {error}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(args, membership.derive_key(secret), tracing))
    finally:
        if served is not None:
            served.shutdown()
