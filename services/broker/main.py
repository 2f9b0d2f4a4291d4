"""`python -m samsa.services.broker --broker-id N --listen H:P --controllers H:P,... ...`.

Composition only: load the config (flags, SAMSA_* variables, --config file: BrokerConfig), load
the cluster secret (refusing to start without one: the broker's calls as a member are signed
with a key derived from it), lock its data directory (a second broker on it is refused:
runtime/data_dir_lock.py), then run the Broker until SIGTERM. A bad setting stops it at once
with one line naming the key.
"""

from __future__ import annotations

from pathlib import Path

from samsa.services.broker.broker import Broker
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.runtime import membership, shutdown
from samsa.services.runtime.authorization import AuthorizerConfig
from samsa.services.runtime.sasl_gate import SaslConfig
from samsa.services.runtime.service_process import run_service


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
        log_cleaner_backoff_ms=config.log_cleaner_backoff_ms,
        log_retention_check_interval_ms=config.log_retention_check_interval_ms,
        fetch_answers_bytes_max=config.fetch_answers_bytes_max,
        fetch_answer_write_timeout_ms=config.fetch_answer_write_timeout_ms,
        health_file=config.health_file,
        connections_max=config.max_connections,
        internal_listen=config.internal_listeners,
        internal_advertised_listener=config.internal_advertised_listener,
        authorizer=AuthorizerConfig.of(config),
        sasl=SaslConfig.of(config),
        principal_rules=config.ssl_principal_mapping_rules,
    )
    return await broker.run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(
        "broker",
        BrokerConfig,
        argv,
        lambda config: config.broker_id,
        lambda config, secret, tracing: run(config, membership.derive_key(secret), tracing),
        data_dir=lambda config: config.log_dir,
    )
