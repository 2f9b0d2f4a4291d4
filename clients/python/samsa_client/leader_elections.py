"""Leader elections on request (KIP-460), the pure half of Admin.elect_leaders: arguments checked
and turned into ElectLeaders requests, answers turned into Kafka's ElectLeadersResult. admin.py
sends the requests (controller_calls.py); nothing here does I/O.

The election type is named as Kafka's tool names it ("preferred" or "unclean") and checked
before anything is sent: an unclean election may lose acknowledged records, so a typo must not
reach the controller as some default. Partitions are (topic, partition) pairs, each asked once;
None asks for every partition (on the wire: naming none), and then the controller leaves out the
partitions that needed no election. A request carries at most limits.admin_request_items_max
partitions (a server refuses more, whole), so a larger call is split.

Each partition's outcome is None (a new leader is committed) or its error. ELECTION_NOT_NEEDED
(the leader asked for leads already) is an outcome, not a failure, as Kafka's tool reports it;
any other refusal makes the call raise `ElectionError`, a TopicError for the first refused
partition, whose `errors` names every refused one and `results` holds every outcome, so that a
caller (the CLI) can still say which partitions were elected.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from types import MappingProxyType

from samsa.client.errors import KafkaError, TopicError
from samsa.client.partition_outcomes import partition_outcomes
from samsa.client.reassignments import checked_topic_partition
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

TopicPartition = tuple[str, int]
ELECTION_TYPES = {"preferred": c.ELECTION_TYPE_PREFERRED, "unclean": c.ELECTION_TYPE_UNCLEAN}


class ElectionError(TopicError):
    """Some partitions' elections were refused (other than ELECTION_NOT_NEEDED): `errors` names
    each refused partition, `results` every partition's outcome (None: elected)."""

    results: Mapping[TopicPartition, KafkaError | None] = MappingProxyType({})


def election_requests(
    election_type: str, partitions: Iterable[TopicPartition] | None
) -> list[c.ElectLeadersRequest]:
    """ElectLeaders requests for the partitions (each once, in order; None: every partition),
    at most admin_request_items_max partitions each; none for no partitions. TopicError,
    before anything is sent, for an election type or a partition that cannot be right."""
    if not isinstance(election_type, str) or election_type not in ELECTION_TYPES:
        raise TopicError(
            f"election type {election_type!r} is not one of {', '.join(map(repr, ELECTION_TYPES))}",
            ErrorCode.INVALID_REQUEST,
        )
    kind = ELECTION_TYPES[election_type]
    if partitions is None:
        return [c.ElectLeadersRequest(election_type=kind)]
    keys = list(dict.fromkeys(checked_topic_partition(key) for key in partitions))
    Partition = c.ElectLeadersRequest.Partition
    step = limits.admin_request_items_max
    return [
        c.ElectLeadersRequest(
            election_type=kind,
            partitions=[Partition(topic=t, partition=p) for t, p in keys[start : start + step]],
        )
        for start in range(0, len(keys), step)
    ]


def election_results(
    requests: Sequence[c.ElectLeadersRequest], answers: Sequence[c.ElectLeadersResponse]
) -> dict[TopicPartition, KafkaError | None]:
    """Every partition's outcome, by (topic, partition): the answered ones in answer order, then
    any partition asked for and left unanswered (UNKNOWN_SERVER_ERROR); ElectionError when any
    was refused other than ELECTION_NOT_NEEDED."""
    results: dict[TopicPartition, KafkaError | None] = dict(partition_outcomes(requests, answers))
    refused: dict[Hashable, KafkaError] = {
        key: error
        for key, error in results.items()
        if error is not None and error.code != ErrorCode.ELECTION_NOT_NEEDED
    }
    if refused:
        first = next(iter(refused.values()))
        raised = ElectionError(str(first), first.code)
        raised.errors = MappingProxyType(refused)
        raised.results = MappingProxyType(results)
        raise raised
    return results
