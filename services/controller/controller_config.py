"""ControllerConfig: every setting of a controller process, by its Kafka-style key
(runtime/config.py says how flags, SAMSA_* variables and a --config file become one)."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.common import limits
from samsa.services.controller.control_result import ClusterDefaults
from samsa.services.runtime.config import (
    RelationProblem,
    ValueProblem,
    advertisable_address,
    integer,
    key,
    member_id,
    named_address,
    non_empty,
    optional_path,
    split_address,
)
from samsa.services.runtime.service_config import ServiceConfig

# Kafka's default broker.session.timeout.ms.
SESSION_TIMEOUT_MS_DEFAULT = 9000
# Kafka checks every 300 s (leader.imbalance.check.interval.seconds); a local cluster wants its
# leaders back sooner after a restart.
LEADER_IMBALANCE_CHECK_INTERVAL_MS = 10_000
# quorum.py's RaftTimings.compaction_entries_min (a unit test keeps the two equal).
METADATA_SNAPSHOT_ENTRIES_DEFAULT = 5000


@dataclass(frozen=True)
class Peer:
    node_id: int
    raft_address: str
    endpoint: str  # the controller's advertised gRPC address
    internal_endpoint: str = ""  # its advertised internal listener, "" when none is named


def parse_voters(text: str) -> tuple[Peer, ...]:
    """`id=raft-host:port@grpc-host:port[@internal-host:port],...` -> controllers of the quorum
    (this one may be among them: one list can then serve every controller of a deployment).
    The optional third address is the controller's internal listener: a NOT_CONTROLLER
    redirect names it too, for members that dial the controllers' internal listeners."""
    voters = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            node, addresses = item.split("=", 1)
            raft_address, endpoint, *internal = addresses.split("@")
            split_address(raft_address)
            advertisable_address(endpoint)
            if len(internal) > 1:
                raise ValueError("more than three addresses")
            internal_endpoint = advertisable_address(internal[0]) if internal else ""
            voters.append(
                Peer(member_id(node), raft_address.strip(), endpoint.strip(), internal_endpoint)
            )
        except ValueError:
            raise ValueProblem(
                "list id=raft-host:port@grpc-host:port[@internal-host:port] items, "
                f"comma-separated ({item!r} is not)"
            ) from None
    return tuple(voters)


def _partitions(text: str) -> int:
    return integer(1, limits.topic_partitions_max)(text)


@dataclass(frozen=True, kw_only=True)
class ControllerConfig(ServiceConfig):
    node_id: int = key("node.id", member_id, flags=["--node-id"])
    raft_address: str = key("raft.address", named_address, help="host:port the Raft port binds")
    voters: tuple[Peer, ...] = key(
        "controller.quorum.voters",
        parse_voters,
        flags=["--peers"],
        default=(),
        help="the controllers of the quorum, id=raft-host:port@grpc-host:port,... "
        "(this one's own entry may be included); @internal-host:port after an entry names "
        "that controller's internal listener, for NOT_CONTROLLER redirects",
    )
    metadata_log_dir: str = key("metadata.log.dir", non_empty, flags=["--data-dir"])
    cluster_id: str = key("cluster.id", non_empty, default="samsa-local")
    broker_session_timeout_ms: int = key(
        "broker.session.timeout.ms", integer(100), default=SESSION_TIMEOUT_MS_DEFAULT
    )
    coordinator_session_timeout_ms: int = key(
        "coordinator.session.timeout.ms", integer(100), default=SESSION_TIMEOUT_MS_DEFAULT
    )
    offsets_topic_num_partitions: int = key(
        "offsets.topic.num.partitions",
        _partitions,
        default=ClusterDefaults.offsets_topic_num_partitions,
        help="partitions of __consumer_offsets, fixed once it exists (groups hash over them)",
    )
    offsets_topic_replication_factor: int = key(
        "offsets.topic.replication.factor",
        integer(1),
        default=ClusterDefaults.offsets_topic_replication_factor,
        help="replicas per partition of __consumer_offsets; it is created once this many "
        "brokers are live",
    )
    transaction_state_log_num_partitions: int = key(
        "transaction.state.log.num.partitions",
        _partitions,
        default=ClusterDefaults.transaction_state_log_num_partitions,
        help="partitions of __transaction_state, fixed once it exists (transactional ids hash "
        "over them)",
    )
    transaction_state_log_replication_factor: int = key(
        "transaction.state.log.replication.factor",
        integer(1),
        default=ClusterDefaults.transaction_state_log_replication_factor,
        help="replicas per partition of __transaction_state; it is created once this many "
        "brokers are live",
    )
    transaction_state_log_min_isr: int = key(
        "transaction.state.log.min.isr",
        integer(1),
        default=ClusterDefaults.transaction_state_log_min_isr,
        help="min.insync.replicas of __transaction_state when created (at most its replication "
        "factor): a coordinator's commit or abort decision is acknowledged by this many replicas",
    )
    num_partitions: int = key("num.partitions", _partitions, default=1)
    default_replication_factor: int = key("default.replication.factor", integer(1), default=1)
    leader_imbalance_check_interval_ms: int = key(
        "leader.imbalance.check.interval.ms",
        integer(0),
        default=LEADER_IMBALANCE_CHECK_INTERVAL_MS,
        help="how often leadership is moved back to preferred replicas (0: never)",
    )
    metadata_snapshot_entries: int = key(
        "metadata.snapshot.entries",
        integer(10),
        default=METADATA_SNAPSHOT_ENTRIES_DEFAULT,
        help="write a metadata snapshot (and trim the Raft journal) after this many entries",
    )
    sasl_scram_bootstrap_credentials: str | None = key(
        "sasl.scram.bootstrap.credentials",
        optional_path,
        default=None,
        help="a file (mode 0600) of SCRAM credentials to create when the cluster has none for "
        "them, a line each in kafka-storage's --add-scram syntax: "
        "SCRAM-SHA-256=[name=admin,password=admin-secret] (optional ,iterations=N); off by default",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        ids = [voter.node_id for voter in self.voters]
        if len(ids) != len(set(ids)):
            raise RelationProblem(
                ("controller.quorum.voters",), "controller.quorum.voters lists a node id twice"
            )
        for voter in self.voters:
            if voter.node_id == self.node_id and voter.raft_address != self.raft_address:
                raise RelationProblem(
                    ("controller.quorum.voters", "raft.address", "node.id"),
                    f"controller.quorum.voters gives node {self.node_id} the Raft address "
                    f"{voter.raft_address}, raft.address says {self.raft_address}",
                )

    @property
    def peers(self) -> tuple[Peer, ...]:
        """The other controllers of the quorum."""
        return tuple(voter for voter in self.voters if voter.node_id != self.node_id)
