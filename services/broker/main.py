"""`python -m samsa.services.broker --broker-id N --listen H:P --controllers H:P,... ...`.

Composition only: load the config (flags, SAMSA_* variables, --config file: BrokerConfig), load
the cluster secret (refusing to start without one: the broker's calls as a member are signed
with a key derived from it), then run the Broker until SIGTERM. A bad setting stops it at once
with one line naming the key.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from samsa.services.broker.broker import Broker
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.runtime import config_loading, logs, membership, metrics, shutdown, telemetry
from samsa.services.runtime.config import ConfigError
from samsa.services.runtime.secret import ClusterSecretError, load_secret


async def run(config: BrokerConfig, member_key: bytes, tracing: bool) -> int:
    stop = shutdown.stop_event()
    broker = Broker(
        broker_id=config.broker_id,
        listen=config.listeners,
        advertised_listener=config.advertised_listener,
        controllers=list(config.controllers),
        data_dir=Path(config.log_dir),
        rack=config.rack,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        member_key=member_key,
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        tracing=tracing,
        log_scrub_bytes_per_second=config.log_scrub_bytes_per_second,
        log_scrub_interval_ms=config.log_scrub_interval_ms,
    )
    await broker.run(stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        config = config_loading.load(BrokerConfig, "broker", argv, os.environ)
    except ConfigError as error:
        print(f"samsa broker: {error}", file=sys.stderr)
        return 2
    logs.configure(f"broker-{config.broker_id}")
    try:
        secret = load_secret(Path(config.secret_file))
    except ClusterSecretError as error:
        print(f"samsa broker: {error}", file=sys.stderr)
        return 2
    try:
        tracing = telemetry.configure(f"samsa-broker-{config.broker_id}")
    except telemetry.TelemetryConfigError as error:
        print(f"samsa broker: {error}", file=sys.stderr)
        return 2
    try:
        served = metrics.serve(config.metrics_listen, f"samsa-broker-{config.broker_id}")
    except metrics.MetricsConfigError as error:
        print(f"samsa broker: {error}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(config, membership.derive_key(secret), tracing))
    finally:
        if served is not None:
            served.shutdown()
