"""`python -m samsa.services.broker --broker-id N --listen H:P --controllers H:P,... ..."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from samsa.services.broker.broker import REPLICA_LAG_TIME_MAX_MS_DEFAULT, Broker
from samsa.services.runtime import logs, shutdown, telemetry

HEARTBEAT_INTERVAL_MS_DEFAULT = 2000  # Kafka's broker.heartbeat.interval.ms


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa.services.broker")
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--listen", required=True, help="host:port of BrokerService")
    parser.add_argument(
        "--controllers", required=True, help="controller endpoints, comma-separated"
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rack", default="")
    parser.add_argument(
        "--broker-heartbeat-interval-ms", type=int, default=HEARTBEAT_INTERVAL_MS_DEFAULT
    )
    parser.add_argument(
        "--replica-lag-time-max-ms", type=int, default=REPLICA_LAG_TIME_MAX_MS_DEFAULT
    )
    args = parser.parse_args(argv)
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


async def run(args: argparse.Namespace, tracing: bool) -> int:
    stop = shutdown.stop_event()
    broker = Broker(
        broker_id=args.broker_id,
        listen=args.listen,
        controllers=args.controllers,
        data_dir=args.data_dir,
        rack=args.rack,
        heartbeat_interval_ms=args.broker_heartbeat_interval_ms,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        tracing=tracing,
    )
    await broker.run(stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(f"broker-{args.broker_id}")
    tracing = telemetry.configure(f"samsa-broker-{args.broker_id}")
    return asyncio.run(run(args, tracing))
