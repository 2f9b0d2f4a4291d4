"""`samsa metadata-quorum`: the controller quorum's health, as Kafka's kafka-metadata-quorum.sh
(KIP-595) — thin over Admin.describe_metadata_quorum.

    describe --status                          the leader, its epoch, the high watermark, the
                                               followers' largest lag, the voters and observers
    describe --replication [--human-readable]  one row per replica: log end offset, lag, last
                                               fetch and last caught-up times, its role

The answer comes from the active controller (the Raft leader), which alone knows how far each
controller follows it. Voters (controllers) count in Raft log indices, of which HighWatermark
(the commit index) is one; observers (brokers, then coordinators) in metadata offsets, of which
MetadataOffset (what the leader has applied) is one: an observer with lag 0 has applied every
metadata record. Times are ms since the epoch (-1: not known to this leader); --human-readable
prints them as how long before the leader's answer they were. Coordinators have ids of their
own, so they are named `coordinator-N` where broker and coordinator ids could be confused.
"""

from __future__ import annotations

import argparse

from samsa.cli.command_support import client_config, table
from samsa.client import Admin
from samsa.client.metadata_quorum import QuorumInfo, ReplicaState


def add_quorum_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    quorum = commands.add_parser(
        "metadata-quorum",
        help="the controller quorum's leader and replication (kafka-metadata-quorum.sh)",
    )
    actions = quorum.add_subparsers(dest="quorum_action", required=True)
    describe = actions.add_parser("describe", help="describe the quorum")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--status", action="store_true", help="the leader, high watermark, lag, voters, observers"
    )
    which.add_argument(
        "--replication", action="store_true", help="each replica's log end, lag and times"
    )
    describe.add_argument(
        "--human-readable",
        action="store_true",
        help="with --replication: times as how long ago, not ms since the epoch",
    )
    add_connection(describe)  # type: ignore[operator]


def quorum_usage_error(args: argparse.Namespace) -> str | None:
    """A usage error argparse cannot see (exit 2), or None."""
    if args.human_readable and not args.replication:
        return "--human-readable goes with --replication"
    return None


def run_quorum(args: argparse.Namespace, bootstrap: str) -> int:
    with Admin(client_config(args, bootstrap)) as admin:
        info = admin.describe_metadata_quorum()
    print(replication(info, args.human_readable) if args.replication else status(info))
    return 0


def status(info: QuorumInfo) -> str:
    """--status, Kafka's lines (and MetadataOffset, the observers' unit)."""
    lines = [
        ("ClusterId", info.cluster_id),
        ("LeaderId", info.leader_id),
        ("LeaderEpoch", info.leader_epoch),
        ("HighWatermark", info.high_watermark),
        ("MetadataOffset", info.metadata_offset),
        ("MaxFollowerLag", info.max_follower_lag),
        ("MaxFollowerLagTimeMs", info.max_follower_lag_time_ms),
        ("CurrentVoters", _ids(info.voters)),
        ("CurrentObservers", _ids(info.observers)),
    ]
    return "\n".join(f"{key + ':':<24}{value}" for key, value in lines)


def replication(info: QuorumInfo, human_readable: bool = False) -> str:
    """--replication: Kafka's table, the leader first, then followers, then observers."""
    now_ms = info.voters[0].last_caught_up_timestamp if info.voters else None
    headers = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp"]
    rows = []
    for replica in (*info.voters, *info.observers):
        fetched = _time(replica.last_fetch_timestamp, now_ms, human_readable)
        caught_up = _time(replica.last_caught_up_timestamp, now_ms, human_readable)
        rows.append(
            [
                _name(replica),
                replica.log_end_offset,
                replica.lag,
                fetched,
                caught_up,
                _role(replica, info),
            ]
        )
    return table([*headers, "Status"], rows)


def _role(replica: ReplicaState, info: QuorumInfo) -> str:
    if replica.kind != "controller":
        return "Observer"
    if replica.replica_id == info.leader_id:
        return "Leader"
    return "Follower" if replica.connected else "Follower (not connected)"


def _name(replica: ReplicaState) -> str:
    prefix = "coordinator-" if replica.kind == "coordinator" else ""
    return f"{prefix}{replica.replica_id}"


def _ids(replicas: tuple[ReplicaState, ...]) -> str:
    return "[" + ",".join(_name(r) for r in replicas) + "]"


def _time(ms: int | None, now_ms: int | None, human_readable: bool) -> str:
    if ms is None:
        return "-1"
    if not human_readable or now_ms is None:
        return str(ms)
    return f"{max(0, now_ms - ms)} ms ago"
