"""`python -m samsa.services.broker --broker-id N --listen H:P --controllers H:P,... ...`.

Composition only: load the cluster secret (refusing to start without one: the broker's calls as a
member are signed with a key derived from it), then run the Broker until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from samsa.services.broker.broker import REPLICA_LAG_TIME_MAX_MS_DEFAULT, Broker
from samsa.services.broker.scrubber import (
    SCRUB_BYTES_PER_SECOND_DEFAULT,
    SCRUB_INTERVAL_MS_DEFAULT,
)
from samsa.services.runtime import logs, membership, metrics, shutdown, telemetry
from samsa.services.runtime.secret import ClusterSecretError, load_secret

HEARTBEAT_INTERVAL_MS_DEFAULT = 2000  # Kafka's broker.heartbeat.interval.ms


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa.services.broker")
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--listen", required=True, help="host:port of BrokerService")
    parser.add_argument(
        "--controllers", required=True, help="controller endpoints, comma-separated"
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument(
        "--secret-file",
        type=Path,
        required=True,
        help="the cluster secret (the controllers' file): proves this broker is a member",
    )
    parser.add_argument("--rack", default="")
    parser.add_argument(
        "--broker-heartbeat-interval-ms", type=int, default=HEARTBEAT_INTERVAL_MS_DEFAULT
    )
    parser.add_argument(
        "--replica-lag-time-max-ms", type=int, default=REPLICA_LAG_TIME_MAX_MS_DEFAULT
    )
    parser.add_argument(
        "--log-scrub-bytes-per-second",
        type=int,
        default=SCRUB_BYTES_PER_SECOND_DEFAULT,
        help="re-check closed segments' CRCs at most this fast (0 disables the scrubber)",
    )
    parser.add_argument(
        "--log-scrub-interval-ms",
        type=int,
        default=SCRUB_INTERVAL_MS_DEFAULT,
        help="the shortest time between the starts of two scrub passes",
    )
    metrics.add_argument(parser)
    args = parser.parse_args(argv)
    if args.log_scrub_bytes_per_second < 0 or args.log_scrub_interval_ms < 0:
        parser.error("--log-scrub-bytes-per-second and --log-scrub-interval-ms must be >= 0")
    if args.replica_lag_time_max_ms < 100:
        parser.error("--replica-lag-time-max-ms must be at least 100")
    if args.broker_id < 0:
        parser.error("--broker-id must be >= 0")
    if args.broker_heartbeat_interval_ms < 10:
        parser.error("--broker-heartbeat-interval-ms must be at least 10")
    args.controllers = [e.strip() for e in args.controllers.split(",") if e.strip()]
    if not args.controllers:
        parser.error("--controllers needs at least one host:port")
    return args


async def run(args: argparse.Namespace, member_key: bytes, tracing: bool) -> int:
    stop = shutdown.stop_event()
    broker = Broker(
        broker_id=args.broker_id,
        listen=args.listen,
        controllers=args.controllers,
        data_dir=args.data_dir,
        rack=args.rack,
        heartbeat_interval_ms=args.broker_heartbeat_interval_ms,
        member_key=member_key,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        tracing=tracing,
        log_scrub_bytes_per_second=args.log_scrub_bytes_per_second,
        log_scrub_interval_ms=args.log_scrub_interval_ms,
    )
    await broker.run(stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(f"broker-{args.broker_id}")
    try:
        secret = load_secret(args.secret_file)
    except ClusterSecretError as error:
        print(f"samsa broker: {error}", file=sys.stderr)
        return 2
    tracing = telemetry.configure(f"samsa-broker-{args.broker_id}")
    try:
        served = metrics.serve(args.metrics_listen, f"samsa-broker-{args.broker_id}")
    except metrics.MetricsConfigError as error:
        print(f"samsa broker: {error}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(args, membership.derive_key(secret), tracing))
    finally:
        if served is not None:
            served.shutdown()
