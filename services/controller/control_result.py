"""What every control-plane decision returns, and the cluster defaults it decides with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from samsa.metadata.image import PartitionState
from samsa.v1 import metadata_pb2 as m

R = TypeVar("R")


class RandomSource(Protocol):
    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int: ...


@dataclass(frozen=True)
class ControlResult(Generic[R]):
    """Records to commit as one batch (maybe none) and the answer to send once they are."""

    records: list[m.MetadataRecord]
    response: R


@dataclass(frozen=True)
class ClusterDefaults:
    """Kafka's broker-side defaults for topics created without explicit values, and the
    settings of the internal topics __consumer_offsets and __transaction_state and of
    coordinator sessions (Kafka's `offsets.topic.num.partitions`,
    `offsets.topic.replication.factor`, `transaction.state.log.num.partitions`,
    `transaction.state.log.replication.factor`, `transaction.state.log.min.isr`; coordinators
    have their own session timeout, like brokers)."""

    num_partitions: int = 1
    default_replication_factor: int = 1
    broker_session_timeout_ms: int = 9000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    coordinator_session_timeout_ms: int = 9000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2


def refused_with_state(answer: Any, state: PartitionState | None, code: int, message: str) -> None:
    """Fill a refused partition answer (AlterPartition's result, ReportCorruptReplica's) with
    the partition's committed state, when it exists: the broker learns which leader, epochs
    and ISR its next request must start from."""
    answer.error_code = code
    answer.error_message = message
    if state is not None:
        answer.leader = state.leader
        answer.leader_epoch = state.leader_epoch
        answer.partition_epoch = state.partition_epoch
        answer.isr.extend(state.isr)
