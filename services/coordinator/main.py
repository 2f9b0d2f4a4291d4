"""`python -m samsa.services.coordinator --coordinator-id N --listen H:P --controllers H:P,...`.

Composition only: load the config (flags, SAMSA_* variables, --config file: CoordinatorConfig),
load the cluster secret (refusing to start without one: the coordinator's calls to the
controllers, and its writes to `__consumer_offsets`, are signed with a key derived from it), then
run the Coordinator until SIGTERM. A bad setting stops it at once with one line naming the key.
The group and transaction settings take Kafka's names (group.consumer.session.timeout.ms,
group.consumer.heartbeat.interval.ms, offsets.retention.minutes, group.consumer.max.size,
group.consumer.assignors' default, transaction.abort.timed.out.transaction.cleanup.interval.ms,
transactional.id.expiration.ms, transaction.max.timeout.ms).
"""

from __future__ import annotations

from samsa.services.coordinator.coordinator import Coordinator
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.transaction_partition import TransactionConfig
from samsa.services.runtime import membership, shutdown
from samsa.services.runtime.authorization import AuthorizerConfig
from samsa.services.runtime.sasl_gate import SaslConfig
from samsa.services.runtime.service_process import run_service


def group_config(config: CoordinatorConfig) -> GroupConfig:
    return GroupConfig(
        session_timeout_ms=config.group_consumer_session_timeout_ms,
        heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        max_size=config.group_consumer_max_size or None,
        offsets_retention_ms=config.offsets_retention_minutes * 60_000,
        default_assignor=config.group_consumer_assignor,
    )


async def run(config: CoordinatorConfig, member_key: bytes, tracing: bool) -> int:
    stop = shutdown.stop_event()
    coordinator = Coordinator(
        coordinator_id=config.coordinator_id,
        listen=config.listeners,
        advertised_listener=config.advertised_listener,
        controllers=list(config.controllers),
        member_key=member_key,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        session_timeout_ms=config.session_timeout_ms,
        group_config=group_config(config),
        transaction_config=TransactionConfig(
            abort_interval_ms=config.transaction_abort_interval_ms,
            id_expiration_ms=config.transactional_id_expiration_ms,
            max_timeout_ms=config.transaction_max_timeout_ms,
        ),
        tracing=tracing,
        health_file=config.health_file,
        connections_max=config.max_connections,
        internal_listen=config.internal_listeners,
        internal_advertised_listener=config.internal_advertised_listener,
        authorizer=AuthorizerConfig.of(config),
        sasl=SaslConfig.of(config),
    )
    return await coordinator.run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(
        "coordinator",
        CoordinatorConfig,
        argv,
        lambda config: config.coordinator_id,
        lambda config, secret, tracing: run(config, membership.derive_key(secret), tracing),
    )
