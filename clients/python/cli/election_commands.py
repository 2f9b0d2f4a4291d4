"""`samsa leader-election`: elect leaders now, as Kafka's kafka-leader-election.sh (KIP-460) —
thin over Admin.elect_leaders (and describe_topics, to list a topic's partitions).

    --election-type preferred --topic T [--partition P]   the preferred replica of each leads again
    --election-type unclean --all-topic-partitions        every offline partition gets a live
                                                          replica as leader, in sync or not

Preferred is what the controller does by itself every leader.imbalance.check.interval.ms; on
demand it spreads leadership again at once after brokers came back. Unclean is the way out of
an outage whose in-sync replicas are gone for good: the elected replica may lack acknowledged
records, and they are lost. Like Kafka's tool it prints which partitions got a new leader and
which needed none, and each failure on stderr, exiting 1 when any failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping

from samsa.cli.command_support import client_config, int32
from samsa.client import Admin
from samsa.client.admin import ElectionError
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode

TopicPartition = tuple[str, int]


def add_election_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    election = commands.add_parser(
        "leader-election",
        help="elect preferred or unclean leaders now, as kafka-leader-election.sh",
    )
    election.add_argument(
        "--election-type",
        required=True,
        type=str.lower,
        choices=("preferred", "unclean"),
        help="preferred: the first replica leads again; unclean: an out-of-sync replica may "
        "lead a partition without a live leader (acknowledged records may be lost)",
    )
    which = election.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic whose partitions to elect (all, or --partition)")
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    election.add_argument("--partition", type=int32, help="with --topic: only this partition")
    add_connection(election)  # type: ignore[operator]


def election_usage_error(args: argparse.Namespace) -> str | None:
    """A usage error (exit 2), or None."""
    if args.partition is not None and args.topic is None:
        return "--partition goes with --topic"
    if args.partition is not None and args.partition < 0:
        return "--partition must be >= 0"
    return None


def run_election(args: argparse.Namespace, bootstrap: str) -> int:
    with Admin(client_config(args, bootstrap)) as admin:
        return leader_election(admin, args)


def leader_election(admin: Admin, args: argparse.Namespace) -> int:
    """Ask `admin` for the elections `args` names and report them; the exit status."""
    partitions = None if args.all_topic_partitions else _named(admin, args)
    try:
        results = admin.elect_leaders(args.election_type, partitions)
    except ElectionError as error:
        results = dict(error.results)
    return report(args.election_type, results, every=partitions is None)


def _named(admin: Admin, args: argparse.Namespace) -> list[TopicPartition]:
    """The partitions --topic (and --partition) name; every partition of the topic without
    --partition (TopicError, run()'s one line, for a topic that does not exist)."""
    if args.partition is not None:
        return [(args.topic, args.partition)]
    (topic,) = admin.describe_topics([args.topic]).values()
    return [(args.topic, p.partition) for p in topic.partitions]


def report(
    election_type: str, results: Mapping[TopicPartition, KafkaError | None], *, every: bool
) -> int:
    """Print the outcomes as Kafka's tool does; the exit status (1 when any failed)."""
    kind = election_type.upper()
    elected = [key for key, error in results.items() if error is None]
    not_needed = [
        key
        for key, error in results.items()
        if error is not None and error.code == ErrorCode.ELECTION_NOT_NEEDED
    ]
    failed = {
        key: error
        for key, error in results.items()
        if error is not None and error.code != ErrorCode.ELECTION_NOT_NEEDED
    }
    if elected:
        print(f"Successfully completed leader election ({kind}) for partitions {_names(elected)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {_names(not_needed)}")
    if every:  # the controller leaves out the partitions needing no election
        others = "No partition" if not results else "No other partition"
        print(f"{others} needed a leader election ({kind})")
    for error in failed.values():
        print(
            f"samsa leader-election: {kind} election failed: {error} ({error.code.name})",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _names(keys: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{topic}-{number}" for topic, number in keys)
