"""DescribeQuorum's pure core: the controller quorum's replication state, as the leader sees it.

Theory of operation (KIP-595's DescribeQuorum, kafka-metadata-quorum.sh). Two kinds of replica
follow the metadata log, each measured in its own unit:

- Voters, the controllers, hold the Raft log. The Raft leader alone knows how far each follower
  got: pysyncobj's match index of it (the last Raft index the follower is known to hold). Their
  log end and lag count Raft indices; one index is one metadata batch (or a leader barrier).
  `ReplicationClock` turns what the tick thread samples once a tick period (pysyncobj's
  `getStatus()`, the leader's last index, when the transport last received a Raft message from
  each peer) into an immutable `RaftStatus`; pysyncobj keeps no caught-up time, so the clock
  derives it: the last sample at which a follower's match index was the leader's last index.
  A controller that is not the leader knows nothing of its peers' progress: it samples nothing
  and the clock forgets every caught-up time (`reset`).
- Observers, the brokers and coordinators, follow the applied metadata by FetchMetadata long
  polls and report the metadata offset they applied with each heartbeat to the active
  controller. `ObserverReports` keeps the last report of each; their log end and lag count
  metadata offsets (one per record), against the leader's applied offset.

`describe_quorum` assembles the answer from one `RaftStatus`, the reports and the committed
image (which names the registered brokers and coordinators). Time comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.metadata.image import MetadataImage
from samsa.v1 import controller_pb2 as c

UNKNOWN = -1
# pysyncobj's getStatus(): a partner node's status when connected (0 when not).
_CONNECTED = 2

CONTROLLER = c.QUORUM_REPLICA_KIND_CONTROLLER
BROKER = c.QUORUM_REPLICA_KIND_BROKER
COORDINATOR = c.QUORUM_REPLICA_KIND_COORDINATOR


@dataclass(frozen=True)
class VoterProgress:
    """One follower controller as the leader knows it (-1: unknown)."""

    address: str  # its Raft address
    match_index: int  # the last Raft index it is known to hold
    connected: bool  # the leader's Raft connection to it is up
    last_message_ms: int  # when the leader last received a Raft message from it
    last_caught_up_ms: int  # the last tick its match index was the leader's last index


@dataclass(frozen=True)
class RaftStatus:
    """One sample of the leader's Raft state, taken on pysyncobj's tick thread."""

    term: int
    commit_index: int  # the Raft high watermark
    last_index: int  # this controller's own last Raft index (its log end)
    followers: tuple[VoterProgress, ...]
    sampled_ms: int


class ReplicationClock:
    """Samples of the Raft state, with caught-up times derived across samples (tick thread)."""

    def __init__(self, peer_addresses: Collection[str]) -> None:
        self._peers = sorted(peer_addresses)
        self._caught_up_ms: dict[str, int] = {}

    def reset(self) -> None:
        """Not the leader (any more): caught-up times are known only to a leader, of its term."""
        self._caught_up_ms.clear()

    def sample(
        self,
        status: Mapping[str, Any],
        *,
        last_index: int,
        last_message_ms: Mapping[str, int],
        now_ms: int,
    ) -> RaftStatus:
        """The leader's sample: `status` is pysyncobj's getStatus(), `last_index` the leader's
        last Raft index, `last_message_ms` by peer Raft address."""
        followers = []
        for address in self._peers:
            match = status.get(f"match_idx_server_{address}")
            if match is not None and match >= last_index:
                self._caught_up_ms[address] = now_ms
            followers.append(
                VoterProgress(
                    address=address,
                    match_index=UNKNOWN if match is None else int(match),
                    connected=status.get(f"partner_node_status_server_{address}") == _CONNECTED,
                    last_message_ms=last_message_ms.get(address, UNKNOWN),
                    last_caught_up_ms=self._caught_up_ms.get(address, UNKNOWN),
                )
            )
        return RaftStatus(
            term=int(status.get("raft_term", 0)),
            commit_index=int(status.get("commit_idx", 0)),
            last_index=last_index,
            followers=tuple(followers),
            sampled_ms=now_ms,
        )


@dataclass(frozen=True)
class ObserverReport:
    """An observer's last heartbeat to this controller."""

    metadata_offset: int
    heartbeat_ms: int
    caught_up_ms: int  # the last heartbeat that reported the leader's offset of its moment


class ObserverReports:
    """(kind, id) -> the last heartbeat's report; only members' heartbeats the active
    controller accepted are reported, so the ids are registered ones (bounded by the image)."""

    def __init__(self) -> None:
        self._reports: dict[tuple[int, int], ObserverReport] = {}

    def report(
        self, kind: int, node_id: int, metadata_offset: int, now_ms: int, leader_offset: int
    ) -> None:
        previous = self._reports.get((kind, node_id))
        caught_up = previous.caught_up_ms if previous is not None else UNKNOWN
        if metadata_offset >= leader_offset:
            caught_up = now_ms
        self._reports[(kind, node_id)] = ObserverReport(metadata_offset, now_ms, caught_up)

    def get(self, kind: int, node_id: int) -> ObserverReport | None:
        return self._reports.get((kind, node_id))


def lag(leader_end: int, replica_end: int) -> int:
    """How far `replica_end` is behind `leader_end` (never below 0); -1 when unknown."""
    if replica_end < 0:
        return UNKNOWN
    return max(0, leader_end - replica_end)


def describe_quorum(
    raft: RaftStatus,
    *,
    leader_id: int,
    node_of: Mapping[str, int],
    image: MetadataImage,
    observers: ObserverReports,
    cluster_id: str,
) -> c.DescribeQuorumResponse:
    """The answer of the leader `leader_id` (status left for the adapter to fill)."""
    response = c.DescribeQuorumResponse(
        cluster_id=cluster_id,
        leader_id=leader_id,
        leader_epoch=raft.term,
        high_watermark=raft.commit_index,
        metadata_offset=image.end_offset,
    )
    response.voters.add(
        node_id=leader_id,
        kind=CONTROLLER,
        log_end_offset=raft.last_index,
        lag=0,
        last_fetch_timestamp_ms=raft.sampled_ms,
        last_caught_up_timestamp_ms=raft.sampled_ms,
        connected=True,
    )
    followers = sorted(raft.followers, key=lambda f: (node_of.get(f.address, UNKNOWN), f.address))
    for follower in followers:
        response.voters.add(
            node_id=node_of.get(follower.address, UNKNOWN),
            kind=CONTROLLER,
            log_end_offset=follower.match_index,
            lag=lag(raft.last_index, follower.match_index),
            last_fetch_timestamp_ms=follower.last_message_ms,
            last_caught_up_timestamp_ms=follower.last_caught_up_ms,
            connected=follower.connected,
        )
    members = [(BROKER, i) for i in sorted(image.brokers)]
    members += [(COORDINATOR, i) for i in sorted(image.coordinators)]
    for kind, node_id in members:
        report = observers.get(kind, node_id)
        offset = report.metadata_offset if report is not None else UNKNOWN
        response.observers.add(
            node_id=node_id,
            kind=kind,
            log_end_offset=offset,
            lag=lag(image.end_offset, offset),
            last_fetch_timestamp_ms=report.heartbeat_ms if report is not None else UNKNOWN,
            last_caught_up_timestamp_ms=report.caught_up_ms if report is not None else UNKNOWN,
        )
    return response
