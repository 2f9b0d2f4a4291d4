"""The plain metadata reads: DescribeCluster, DescribeTopics, DescribeConfigs,
ListPartitionReassignments and DescribeClientQuotas over one image.

Pure (no I/O): a controller answers them from its committed image and a broker from its replayed
one (KIP-590's brokers answer metadata themselves and forward only writes), so a client gets the
same answer from either, as of the image's offset. The adapters check sizes, wait for
`min_metadata_offset` and fill the answer's status: services/controller/servicer.py and
services/broker/metadata/metadata_servicer.py.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType
from samsa.metadata.client_quotas import (
    InvalidEntityError,
    entity_key,
    entity_message,
    sorted_entities,
)
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    INTERNAL_TOPIC_LOG_DEFAULTS,
    INTERNAL_TOPICS,
    valid_assignment,
)
from samsa.metadata.image import BROKER_RESOURCE, MetadataImage, PartitionState
from samsa.metadata.replication_throttles import LEADER_RATE, LONG_MAX, RATE_DOC, RATE_KEYS
from samsa.metadata.topic_defaults import (
    BROKER_DEFAULT_KEYS,
    CLUSTER_DEFAULT_NAME,
    SYNONYMS,
    cluster_defaults,
    default_sources,
    topic_defaults,
)
from samsa.services.runtime.access_rules import Access, refusal
from samsa.services.runtime.caller import Visible, everything
from samsa.services.runtime.topic_configs import TOPIC_KEYS
from samsa.v1 import controller_pb2 as c

__all__ = [
    "describe_client_quotas",
    "describe_client_quotas_problem",
    "describe_cluster",
    "describe_configs",
    "describe_topics",
    "describe_topics_limit",
    "describe_topics_problem",
    "list_partition_reassignments",
]


def describe_cluster(
    image: MetadataImage,
    *,
    cluster_id: str,
    controllers: Mapping[int, str],
    active_node_id: int | None,
) -> c.DescribeClusterResponse:
    """The cluster as `image` shows it, with the quorum's controllers (node id -> endpoint) and
    which of them is active as far as the answering process knows (None: none it knows of).
    The answer's status is the caller's to fill."""
    response = c.DescribeClusterResponse(cluster_id=cluster_id)
    for node_id, endpoint in sorted(controllers.items()):
        response.controllers.add(
            node_id=node_id, endpoint=endpoint, is_active=node_id == active_node_id
        )
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
    image: MetadataImage,
    request: c.DescribeTopicsRequest,
    visible: Visible = everything,
    principal: Callable[[], str] = lambda: "",
) -> c.DescribeTopicsResponse:
    """One page of topics: at most the request's partition limit of partitions, from its cursor.

    Paged (KIP-966) so that an answer stays far below the gRPC message limit at any partition
    count; `next_cursor` is set when the page stopped at the limit with topics or partitions
    left, and points at the first of them. The request must have passed
    `describe_topics_problem`.

    With no names, only the topics `visible` admits are answered (Kafka's Metadata for every
    topic: those the caller may DESCRIBE), filtered before paging: a page holds the next
    visible topics, and its cursor names one, so a page is never empty only because of
    filtering. A named topic `visible` refuses is answered TOPIC_AUTHORIZATION_FAILED, naming
    the caller (`principal()`, asked only then), whether it exists or not, so that names cannot
    be probed (Kafka's Metadata); like an unknown topic it takes none of the page's budget.
    """
    response = c.DescribeTopicsResponse()
    budget = describe_topics_limit(request.partition_limit)
    topics = _topics_from_cursor(image, request)
    if not request.names:
        topics = ((name, first) for name, first in topics if visible(name))
    for name, first in topics:
        if budget == 0:
            response.next_cursor.CopyFrom(
                c.DescribeTopicsRequest.Cursor(topic=name, partition=first)
            )
            break
        if request.names and not visible(name):
            _refuse_topic(response, name, principal())
            continue
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


def _refuse_topic(response: c.DescribeTopicsResponse, name: str, principal: str) -> None:
    """A named topic the caller may not DESCRIBE: the same answer whether it exists or not."""
    result = response.topics.add(name=name)
    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # type: ignore[assignment]
    need = (Access(Operation.DESCRIBE, ResourceType.TOPIC, name),)
    result.error_message = str(refusal(principal, need))


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
            eligible_leader_replicas=state.elr,
            adding_replicas=state.adding,
            removing_replicas=state.removing,
        )
    if len(numbers) > budget:
        response.next_cursor.CopyFrom(
            c.DescribeTopicsRequest.Cursor(topic=name, partition=numbers[budget])
        )
    return min(budget, len(numbers))


# A refusal of unknown config names quotes this many of them, each cut to this many characters.
UNKNOWN_QUOTED = 5
UNKNOWN_NAME_CHARS = 100


def describe_configs(
    image: MetadataImage, request: c.DescribeConfigsRequest
) -> c.DescribeConfigsResponse:
    response = c.DescribeConfigsResponse()
    for wanted in request.resources:
        result = response.results.add()
        result.resource.CopyFrom(wanted.resource)
        if wanted.resource.type == BROKER_RESOURCE:
            _describe_cluster_defaults(image, wanted, result)
            continue
        if wanted.resource.name not in image.topics:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {wanted.resource.name!r} does not exist"
            continue
        # Each name once, in the order asked: the answer is bounded by the configs that exist,
        # not by how often a request names them.
        names = list(dict.fromkeys(wanted.names))
        unknown = [name for name in names if name not in TOPIC_KEYS]
        if unknown:
            quoted = ", ".join(repr(name[:UNKNOWN_NAME_CHARS]) for name in unknown[:UNKNOWN_QUOTED])
            more = (
                f" and {len(unknown) - UNKNOWN_QUOTED} more"
                if len(unknown) > UNKNOWN_QUOTED
                else ""
            )
            result.error_code = ErrorCode.INVALID_CONFIG  # type: ignore[assignment]
            result.error_message = f"unknown topic configs: {quoted}{more}"
            continue
        _describe_topic_configs(image, wanted.resource.name, names, result)
    return response


def _describe_topic_configs(
    image: MetadataImage, topic: str, names: list[str], result: c.DescribeConfigsResponse.Result
) -> None:
    """The topic's configs: its own (DYNAMIC), else the cluster-wide default of the key
    (DYNAMIC_DEFAULT, Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG), else the built-in default (an
    internal topic's own first: partition_log_config.log_config)."""
    dynamic = image.topic_configs(topic)
    broker_configs = cluster_defaults(image)
    values = topic_defaults(broker_configs)
    from_cluster = {key: values[key] for key in default_sources(topic, broker_configs)}
    defaults = INTERNAL_TOPIC_LOG_DEFAULTS if topic in INTERNAL_TOPICS else {}
    for name in names or sorted(TOPIC_KEYS):
        key = TOPIC_KEYS[name]
        if name in dynamic:
            value, source = dynamic[name], c.CONFIG_SOURCE_DYNAMIC
        elif name in from_cluster:
            value, source = from_cluster[name], c.CONFIG_SOURCE_DYNAMIC_DEFAULT
        else:
            value, source = defaults.get(name, key.default), c.CONFIG_SOURCE_DEFAULT
        result.entries.add(
            name=name,
            value=value,
            source=source,  # type: ignore[arg-type]
            documentation=key.documentation,
        )


def _describe_cluster_defaults(
    image: MetadataImage,
    wanted: c.DescribeConfigsRequest.Resource,
    result: c.DescribeConfigsResponse.Result,
) -> None:
    """The broker resource named "" (--entity-default): each settable cluster default, its
    value when set (DYNAMIC_DEFAULT), else the built-in value of the topic key it defaults
    (DEFAULT). A broker named by its id has no topic defaults of its own (refused)."""
    name = wanted.resource.name
    if name.isascii() and name.isdigit() and str(int(name)) == name:
        _describe_broker_throttles(image, wanted, result)
        return
    if name != CLUSTER_DEFAULT_NAME:
        result.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
        result.error_message = (
            "Samsa keeps topic defaults cluster-wide only: describe the broker resource named '' "
            "(--entity-default), or a broker id for its replication throttle rates"
        )
        return
    names = list(dict.fromkeys(wanted.names))
    unknown = [name for name in names if name not in BROKER_DEFAULT_KEYS]
    if unknown:
        quoted = ", ".join(repr(name[:UNKNOWN_NAME_CHARS]) for name in unknown[:UNKNOWN_QUOTED])
        result.error_code = ErrorCode.INVALID_CONFIG  # type: ignore[assignment]
        result.error_message = f"not cluster-wide topic defaults: {quoted}"
        return
    broker_configs = cluster_defaults(image)
    for name in names or sorted(BROKER_DEFAULT_KEYS):
        key = TOPIC_KEYS[BROKER_DEFAULT_KEYS[name]]
        if name in broker_configs:
            value, source = broker_configs[name], c.CONFIG_SOURCE_DYNAMIC_DEFAULT
        else:
            value, source = _built_in(name, key.default), c.CONFIG_SOURCE_DEFAULT
        result.entries.add(
            name=name,
            value=value,
            source=source,  # type: ignore[arg-type]
            documentation=f"The default of the topic config {key.name}: {key.documentation}",
        )


def _describe_broker_throttles(
    image: MetadataImage,
    wanted: c.DescribeConfigsRequest.Resource,
    result: c.DescribeConfigsResponse.Result,
) -> None:
    """A broker id's own configs: its replication throttle rates (KIP-73), DYNAMIC when
    set, else Long.MAX (DEFAULT)."""
    unknown = [name for name in wanted.names if name not in RATE_KEYS]
    if unknown:
        result.error_code = ErrorCode.INVALID_CONFIG  # type: ignore[assignment]
        result.error_message = f"a broker id has only {', '.join(RATE_KEYS)}"
        return
    own = image.configs.get((BROKER_RESOURCE, wanted.resource.name), {})
    for name in list(dict.fromkeys(wanted.names)) or RATE_KEYS:
        side = "sends, as a leader," if name == LEADER_RATE else "fetches, as a follower,"
        result.entries.add(
            name=name,
            value=own.get(name, str(LONG_MAX)),
            source=c.CONFIG_SOURCE_DYNAMIC if name in own else c.CONFIG_SOURCE_DEFAULT,  # type: ignore[arg-type]
            documentation=RATE_DOC.format(side=side, side_key=name.replace("rate", "replicas")),
        )


def _built_in(broker_key: str, topic_default: str) -> str:
    """A cluster default's built-in value, in its own unit (the synonyms in minutes or hours
    count the topic key's milliseconds in theirs; -1 stays -1)."""
    for synonyms in SYNONYMS.values():
        for key, unit_ms in synonyms:
            if key == broker_key and unit_ms != 1:
                millis = int(topic_default)
                return str(millis // unit_ms if millis >= 0 else -1)
    return topic_default


def list_partition_reassignments(
    image: MetadataImage, request: c.ListPartitionReassignmentsRequest
) -> c.ListPartitionReassignmentsResponse:
    """The reassignments in progress among the partitions named (all when none are), by topic
    and partition; a partition named without one, or that does not exist, is left out. The
    answer's metadata offset is the caller's to fill."""
    response = c.ListPartitionReassignmentsResponse()
    for name, state in _named_partitions(image, request):
        if state.is_reassigning:
            response.reassignments.add(
                topic=name,
                partition=state.partition,
                replicas=state.replicas,
                adding_replicas=state.adding,
                removing_replicas=state.removing,
            )
    return response


def _named_partitions(
    image: MetadataImage, request: c.ListPartitionReassignmentsRequest
) -> Iterable[tuple[str, PartitionState]]:
    wanted: dict[str, set[int] | None] = {}  # topic -> partitions named (None: all)
    for topic in request.topics:
        numbers = wanted.setdefault(topic.name, set())
        if numbers is None or not topic.partitions:
            wanted[topic.name] = None
        else:
            numbers.update(topic.partitions)
    names = sorted(wanted) if request.topics else sorted(image.topics)
    for name in names:
        topic_image = image.topics.get(name)
        if topic_image is None:
            continue
        numbers = wanted.get(name)
        for number, state in sorted(topic_image.partitions.items()):
            if numbers is None or number in numbers:
                yield name, state


def describe_client_quotas_problem(request: c.DescribeClientQuotasRequest) -> str | None:
    """Why the request's filter is not an entity (INVALID_ARGUMENT), or None."""
    if not request.HasField("entity"):
        return None
    try:
        entity_key(request.entity)
    except InvalidEntityError as error:
        return f"DescribeClientQuotas' entity: {error} (leave it unset to describe every entity)"
    return None


def describe_client_quotas(
    image: MetadataImage, request: c.DescribeClientQuotasRequest
) -> c.DescribeClientQuotasResponse:
    """The quotas of the entity the request names (every entity when it names none), in
    canonical order (client_quotas.entity_order). The filter is valid
    (describe_client_quotas_problem)."""
    quotas = image.client_quotas
    entities = sorted_entities(quotas)
    if request.HasField("entity"):
        wanted = entity_key(request.entity)
        entities = [key for key in entities if key == wanted]
    response = c.DescribeClientQuotasResponse()
    for key in entities:
        entry = response.entries.add(entity=entity_message(key))
        entry.values.update(quotas[key])
    return response
