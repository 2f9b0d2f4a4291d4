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
  validated with Kafka's rules and names.

The decisions live in broker_control.py, topic_control.py and config_control.py; this module is
the one place the adapter imports them from, and answers the plain reads.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
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
    "RandomSource",
    "alter_partition",
    "broker_heartbeat",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "describe_topics",
    "fence_brokers",
    "incremental_alter_configs",
    "preferred_leader_elections",
    "register_broker",
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
    return response


def describe_topics(
    image: MetadataImage, request: c.DescribeTopicsRequest
) -> c.DescribeTopicsResponse:
    response = c.DescribeTopicsResponse()
    for name in list(request.names) or sorted(image.topics):
        result = response.topics.add(name=name)
        topic = image.topics.get(name)
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {name!r} does not exist"
            continue
        result.topic_id = topic.topic_id
        for _, state in sorted(topic.partitions.items()):
            result.partitions.add(
                partition=state.partition,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                replicas=state.replicas,
                isr=state.isr,
            )
    for broker_id, broker in image.brokers.items():
        response.broker_endpoints[broker_id] = broker.endpoint
    return response
