"""CoordinatorConfig: every setting of a coordinator process, by its Kafka-style key
(runtime/config.py says how flags, SAMSA_* variables and a --config file become one)."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.services.coordinator.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from samsa.services.coordinator.transaction_state import (
    TRANSACTION_TIMEOUT_MS_MAX,
    TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
)
from samsa.services.runtime.config import (
    RelationProblem,
    integer,
    key,
    member_id,
    one_of,
)
from samsa.services.runtime.service_config import MemberConfig

HEARTBEAT_INTERVAL_MS_DEFAULT = 2000  # with the controller (as brokers do)
COORDINATOR_SESSION_TIMEOUT_MS_DEFAULT = 9000  # as the controllers' default
SESSION_TIMEOUT_MS_DEFAULT = 45_000  # Kafka's group.consumer.session.timeout.ms
MEMBER_HEARTBEAT_INTERVAL_MS_DEFAULT = 5_000  # Kafka's group.consumer.heartbeat.interval.ms
OFFSETS_RETENTION_MINUTES_DEFAULT = 7 * 24 * 60  # Kafka's offsets.retention.minutes
# transaction_partition.py's default (a unit test keeps the two equal).
ABORT_INTERVAL_MS_DEFAULT = 10_000


@dataclass(frozen=True, kw_only=True)
class CoordinatorConfig(MemberConfig):
    coordinator_id: int = key("coordinator.id", member_id, flags=["--coordinator-id"])
    heartbeat_interval_ms: int = key(
        "coordinator.heartbeat.interval.ms", integer(10), default=HEARTBEAT_INTERVAL_MS_DEFAULT
    )
    session_timeout_ms: int = key(
        "coordinator.session.timeout.ms",
        integer(1),
        default=COORDINATOR_SESSION_TIMEOUT_MS_DEFAULT,
        help="the controllers' setting of the same name: this coordinator stops answering when "
        "no heartbeat was answered for that long (it may have been replaced)",
    )
    group_consumer_session_timeout_ms: int = key(
        "group.consumer.session.timeout.ms", integer(1), default=SESSION_TIMEOUT_MS_DEFAULT
    )
    group_consumer_heartbeat_interval_ms: int = key(
        "group.consumer.heartbeat.interval.ms",
        integer(1),
        default=MEMBER_HEARTBEAT_INTERVAL_MS_DEFAULT,
    )
    group_consumer_max_size: int = key(
        "group.consumer.max.size", integer(0), default=0, help="0: unbounded"
    )
    transaction_abort_interval_ms: int = key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        integer(1),
        default=ABORT_INTERVAL_MS_DEFAULT,
        help="how often open transactions past their timeout are aborted (and their producer "
        "fenced)",
    )
    transactional_id_expiration_ms: int = key(
        "transactional.id.expiration.ms",
        integer(1),
        default=TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
        help="a transactional id idle this long is forgotten",
    )
    transaction_max_timeout_ms: int = key(
        "transaction.max.timeout.ms",
        integer(1),
        default=TRANSACTION_TIMEOUT_MS_MAX,
        help="the longest transaction.timeout.ms a producer may ask for; AbortTransaction calls "
        "a transaction hanging once its partition saw no write from it for this long",
    )
    group_consumer_assignor: str = key(
        "group.consumer.assignor", one_of(sorted(ASSIGNORS)), default=DEFAULT_ASSIGNOR
    )
    offsets_retention_minutes: int = key(
        "offsets.retention.minutes", integer(1), default=OFFSETS_RETENTION_MINUTES_DEFAULT
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.session_timeout_ms <= self.heartbeat_interval_ms:
            raise RelationProblem(
                ("coordinator.session.timeout.ms", "coordinator.heartbeat.interval.ms"),
                "coordinator.session.timeout.ms must exceed coordinator.heartbeat.interval.ms",
            )
        if self.group_consumer_session_timeout_ms <= self.group_consumer_heartbeat_interval_ms:
            raise RelationProblem(
                ("group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms"),
                "group.consumer.session.timeout.ms must exceed "
                "group.consumer.heartbeat.interval.ms (members heartbeat within their session)",
            )
