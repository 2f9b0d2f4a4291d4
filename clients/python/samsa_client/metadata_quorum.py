"""The controller quorum's replication state, the pure half of Admin.describe_metadata_quorum
(Kafka's Admin.describeMetadataQuorum, KIP-595's DescribeQuorum): the answer read into
`QuorumInfo`. admin.py sends the request to the active controller (controller_calls.py's
write path, which follows NOT_CONTROLLER to it; a broker forwards it there); nothing here
does I/O.

Two units, as the controllers count them (proto/samsa/v1/controller.proto, DescribeQuorum):
voters (the controllers) follow the Raft log, so their log end and lag are Raft indices, of the
same log as `high_watermark` (the commit index); observers (brokers and coordinators) report the
metadata offset they applied, so theirs are metadata offsets, of the same log as
`metadata_offset` (the leader's). A time the leader does not know is None, an offset -1.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.v1 import controller_pb2 as c

KINDS = {
    c.QUORUM_REPLICA_KIND_CONTROLLER: "controller",
    c.QUORUM_REPLICA_KIND_BROKER: "broker",
    c.QUORUM_REPLICA_KIND_COORDINATOR: "coordinator",
}


@dataclass(frozen=True)
class ReplicaState:
    """One replica of the metadata log as the leader sees it (Kafka's QuorumInfo.ReplicaState).
    `kind`: "controller" (a voter), "broker" or "coordinator" (observers)."""

    replica_id: int
    kind: str
    log_end_offset: int  # -1: unknown (an observer this controller never heard from)
    lag: int  # the leader's log end minus this one, in the same unit; -1: unknown
    last_fetch_timestamp: int | None  # ms since the epoch: last Raft message, or heartbeat
    last_caught_up_timestamp: int | None  # ms since the epoch it was last seen caught up
    connected: bool = False  # voters: the leader's Raft connection to it is up


@dataclass(frozen=True)
class QuorumInfo:
    """The quorum as its leader, the active controller, sees it (Kafka's QuorumInfo)."""

    cluster_id: str
    leader_id: int
    leader_epoch: int  # the Raft term
    high_watermark: int  # the Raft commit index (voters' unit)
    metadata_offset: int  # the leader's applied metadata offset (observers' unit)
    voters: tuple[ReplicaState, ...]  # the leader first
    observers: tuple[ReplicaState, ...]

    @property
    def max_follower_lag(self) -> int:
        """The largest lag of a voter (Raft indices); -1 for a voter whose lag is unknown."""
        lags = [v.lag for v in self.voters]
        return -1 if -1 in lags else max(lags, default=0)

    @property
    def max_follower_lag_time_ms(self) -> int:
        """As Kafka's tool reckons it: the leader's last caught-up time minus that of the voter
        lagging most (0 when none lags); -1 when either is unknown."""
        if not self.voters:
            return -1
        leader = self.voters[0]
        laggard = max(self.voters, key=lambda v: float("inf") if v.lag < 0 else v.lag)
        if laggard is leader or laggard.lag == 0:
            return 0
        if leader.last_caught_up_timestamp is None or laggard.last_caught_up_timestamp is None:
            return -1
        return max(0, leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp)


def _timestamp(ms: int) -> int | None:
    return None if ms < 0 else ms


def replica_state_of(replica: c.QuorumReplicaState) -> ReplicaState:
    return ReplicaState(
        replica_id=replica.node_id,
        kind=KINDS.get(replica.kind, "unknown"),
        log_end_offset=replica.log_end_offset,
        lag=replica.lag,
        last_fetch_timestamp=_timestamp(replica.last_fetch_timestamp_ms),
        last_caught_up_timestamp=_timestamp(replica.last_caught_up_timestamp_ms),
        connected=replica.connected,
    )


def quorum_info_of(response: c.DescribeQuorumResponse) -> QuorumInfo:
    """The answer read (its status already checked by the caller)."""
    return QuorumInfo(
        cluster_id=response.cluster_id,
        leader_id=response.leader_id,
        leader_epoch=response.leader_epoch,
        high_watermark=response.high_watermark,
        metadata_offset=response.metadata_offset,
        voters=tuple(replica_state_of(v) for v in response.voters),
        observers=tuple(replica_state_of(o) for o in response.observers),
    )
