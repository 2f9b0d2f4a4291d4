"""The controller's decisions: a request and the committed image in, records and an answer out.

Pure (no I/O, no clock, no global randomness): the driver passes the image, `now_ms` and a random
source, commits the records as one batch, and fills the answer's status. Every rule of DESIGN §2
that the controller enforces is here, where it is tested directly:

- brokers register fenced (epoch = the registration's offset) and are unfenced once a heartbeat
  shows they applied the log up to their own registration; a second live process with the same
  id is refused;
- fencing a broker (session expired, controlled shutdown, re-registration) moves each leadership
  it holds to the first live ISR member in replica order, leader epoch + 1; with none, the
  partition goes offline and keeps its last ISR member (KIP-966), which leads again when it
  comes back;
- topics are placed with Kafka's assignment (metadata/placement.py) over unfenced brokers and
  validated with Kafka's rules and names;
- producer ids go to current brokers in blocks that never overlap, across failover too;
- coordinators register live, are fenced when their sessions expire, and own the partitions of
  __consumer_offsets (created once a coordinator and enough brokers are live), balanced within
  one, each change of owner bumping the partition's assignment epoch (coordinator_control.py);
  FindCoordinator is answered from the image (metadata/coordinators.py).

The decisions live in broker_control.py, topic_control.py, config_control.py,
producer_id_control.py and coordinator_control.py; this module is the one place the adapter
imports them from, and answers the plain reads.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    CoordinatorLookup,
    find_coordinator,
    valid_assignment,
)
from samsa.metadata.image import MetadataImage
from samsa.services.controller.broker_control import (
    alter_partition,
    broker_heartbeat,
    fence_brokers,
    preferred_leader_elections,
    register_broker,
    report_corrupt_replica,
)
from samsa.services.controller.config_control import describe_configs, incremental_alter_configs
from samsa.services.controller.control_result import ClusterDefaults, ControlResult, RandomSource
from samsa.services.controller.coordinator_control import (
    coordinator_heartbeat,
    coordinator_topic_problem,
    fence_coordinators,
    plan_coordinator_assignments,
    plan_coordinator_topics,
    register_coordinator,
)
from samsa.services.controller.producer_id_control import allocate_producer_ids
from samsa.services.controller.topic_control import (
    create_partitions,
    create_topics,
    delete_topics,
    topic_name_problem,
)
from samsa.v1 import controller_pb2 as c

__all__ = [
    "ClusterDefaults",
    "ControlResult",
    "CoordinatorLookup",
    "RandomSource",
    "allocate_producer_ids",
    "alter_partition",
    "broker_heartbeat",
    "coordinator_heartbeat",
    "coordinator_topic_problem",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "describe_topics",
    "describe_topics_limit",
    "describe_topics_problem",
    "fence_brokers",
    "fence_coordinators",
    "find_coordinator",
    "incremental_alter_configs",
    "plan_coordinator_assignments",
    "plan_coordinator_topics",
    "preferred_leader_elections",
    "register_broker",
    "register_coordinator",
    "report_corrupt_replica",
    "topic_name_problem",
]


# --- reads -----------------------------------------------------------------------------------


def describe_cluster(image: MetadataImage) -> c.DescribeClusterResponse:
    response = c.DescribeClusterResponse()
    for broker_id, broker in sorted(image.brokers.items()):
        response.brokers.add(
            broker_id=broker_id,
            endpoint=broker.endpoint,
            rack=broker.rack,
            broker_epoch=broker.broker_epoch,
            is_fenced=broker.fenced,
        )
    # controller.proto: the count is of __consumer_offsets' partitions (the groups' share).
    owned = Counter(
        assignment.coordinator_id
        for topic, partition in image.coordinator_assignments
        if topic == CONSUMER_OFFSETS_TOPIC
        and (assignment := valid_assignment(image, topic, partition)) is not None
    )
    for coordinator_id, coordinator in sorted(image.coordinators.items()):
        response.coordinators.add(
            coordinator_id=coordinator_id,
            endpoint=coordinator.endpoint,
            coordinator_epoch=coordinator.coordinator_epoch,
            is_fenced=coordinator.fenced,
            owned_partitions=owned[coordinator_id],
        )
    return response


def describe_topics(
    image: MetadataImage, request: c.DescribeTopicsRequest
) -> c.DescribeTopicsResponse:
    """One page of topics: at most the request's partition limit of partitions, from its cursor.

    Paged (KIP-966) so that an answer stays far below the gRPC message limit at any partition
    count; `next_cursor` is set when the page stopped at the limit with topics or partitions
    left, and points at the first of them. The request must have passed
    `describe_topics_problem`.
    """
    response = c.DescribeTopicsResponse()
    budget = describe_topics_limit(request.partition_limit)
    for name, first in _topics_from_cursor(image, request):
        if budget == 0:
            response.next_cursor.CopyFrom(
                c.DescribeTopicsRequest.Cursor(topic=name, partition=first)
            )
            break
        budget -= _describe_topic(response, image, name, first, budget)
        if response.HasField("next_cursor"):
            break
    for broker_id, broker in image.brokers.items():
        response.broker_endpoints[broker_id] = broker.endpoint
    return response


def describe_topics_limit(requested: int) -> int:
    """The partitions a page may carry: the default for 0, never more than the maximum."""
    if requested == 0:
        return limits.describe_topics_partitions_default
    return min(requested, limits.describe_topics_partitions_max)


def describe_topics_problem(request: c.DescribeTopicsRequest) -> str | None:
    """Why the request cannot be answered (the servicer's INVALID_ARGUMENT), or None.

    A cursor naming a topic outside `names` is refused rather than guessed at: only a cursor
    from an answer to the same names can say where that answer stopped.
    """
    if request.partition_limit < 0:
        return "partition_limit must be >= 0 (0 for the server's default)"
    if not request.HasField("cursor"):
        return None
    if request.cursor.partition < 0:
        return "cursor.partition must be >= 0"
    if request.names and request.cursor.topic not in request.names:
        return (
            f"cursor.topic {request.cursor.topic!r} is not one of the names asked for; send "
            "the next_cursor of an answer to the same names"
        )
    return None


def _topics_from_cursor(
    image: MetadataImage, request: c.DescribeTopicsRequest
) -> Iterator[tuple[str, int]]:
    """(topic, first partition) to answer, in order, from the cursor on.

    Names are answered once each in the order given (a repeated name would make a cursor
    ambiguous), every topic in name order otherwise. A cursor past partition 0 of a topic that
    no longer exists still yields it, so that the client learns the deletion of a topic an
    earlier page answered in part.
    """
    names = list(dict.fromkeys(request.names)) or sorted(image.topics)
    if not request.HasField("cursor"):
        yield from ((name, 0) for name in names)
        return
    cursor = request.cursor
    if request.names:
        start = names.index(cursor.topic)
    else:
        start = bisect.bisect_left(names, cursor.topic)
        if cursor.partition > 0 and cursor.topic not in image.topics:
            yield cursor.topic, cursor.partition
    for index in range(start, len(names)):
        yield names[index], cursor.partition if names[index] == cursor.topic else 0


def _describe_topic(
    response: c.DescribeTopicsResponse, image: MetadataImage, name: str, first: int, budget: int
) -> int:
    """Answer `name` from partition `first`, at most `budget` partitions; return how many.

    When the budget runs out inside the topic, the response's next_cursor is set to the first
    partition left out.
    """
    result = response.topics.add(name=name)
    topic = image.topics.get(name)
    if topic is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
        result.error_message = f"topic {name!r} does not exist"
        return 0
    result.topic_id = topic.topic_id
    numbers = sorted(topic.partitions)
    numbers = numbers[bisect.bisect_left(numbers, first) :]
    for number in numbers[:budget]:
        state = topic.partitions[number]
        result.partitions.add(
            partition=state.partition,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            replicas=state.replicas,
            isr=state.isr,
        )
    if len(numbers) > budget:
        response.next_cursor.CopyFrom(
            c.DescribeTopicsRequest.Cursor(topic=name, partition=numbers[budget])
        )
    return min(budget, len(numbers))
