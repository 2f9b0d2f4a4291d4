"""Topic decisions: create (Kafka's placement and validation, or the caller's placement:
replica_assignment.py), delete, add partitions."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from samsa.common import limits
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.metadata.image import (
    TOPIC_RESOURCE,
    MetadataImage,
    TopicImage,
)
from samsa.metadata.placement import PlacementError, assign_replicas, leader_start_index
from samsa.metadata.topic_defaults import cluster_defaults
from samsa.services.controller.control_result import ClusterDefaults, ControlResult, RandomSource
from samsa.services.controller.replica_assignment import (
    Problem,
    added_assignment,
    manual_assignment,
    partition_records,
)
from samsa.services.runtime.topic_defaults_check import validate_effective
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


# --- topics ----------------------------------------------------------------------------------


def topic_name_problem(name: str) -> str | None:
    """Why `name` is not a valid topic name, or None."""
    if not name:
        return "a topic name must not be empty"
    if len(name) > limits.topic_name_length_max:
        return f"a topic name has at most {limits.topic_name_length_max} characters"
    if name in (".", ".."):
        return 'a topic name must not be "." or ".."'
    if not TOPIC_NAME.match(name):
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


def unified_topic_name(name: str) -> str:
    """`name` with '.' as '_': Kafka's collision rule (Topic.unifyCollisionChars). Two names
    equal so are refused as one topic, as KRaft's controller refuses them: Kafka's metric names
    and the tools built on them (JMX, MirrorMaker's replication to Kafka) tell them apart only
    by such characters."""
    return name.replace(".", "_")


def internal_topic_problem(name: str, action: str) -> str | None:
    """Why `action` (create, delete, add partitions to) is refused on `name`, or None: internal
    topics are the controller's alone (it creates __consumer_offsets and __transaction_state
    once coordinators and brokers are live), and their partition counts are fixed, since group
    and transactional ids are hashed over them."""
    if name not in INTERNAL_TOPICS:
        return None
    return f"{name!r} is an internal topic: clients cannot {action} it"


def _placement_start(rng: RandomSource, brokers: Sequence[int]) -> tuple[int, int]:
    return rng.randrange(len(brokers)), rng.randrange(len(brokers))


def create_topics(
    image: MetadataImage,
    request: c.CreateTopicsRequest,
    *,
    rng: RandomSource,
    defaults: ClusterDefaults,
    new_topic_id: Callable[[], bytes],
) -> ControlResult[c.CreateTopicsResponse]:
    """Create each topic of `request`, its partitions placed by the controller (Kafka's
    placement over the unfenced brokers) or by the request's assignments
    (replica_assignment.py); answered topic by topic."""
    response = c.CreateTopicsResponse()
    records: list[m.MetadataRecord] = []
    live = [b.broker_id for b in image.live_brokers()]
    racks = {b.broker_id: b.rack for b in image.live_brokers()}
    taken = set(image.topics)
    unified = {unified_topic_name(name): name for name in image.topics}
    # A name given twice creates neither (Kafka's controller refuses every occurrence): which
    # settings would win otherwise depends on the order of the caller's list.
    counts = Counter(topic.name for topic in request.topics)
    for topic in request.topics:
        result = response.topics.add(name=topic.name)
        if counts[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
            result.error_message = f"topic {topic.name!r} is named more than once in this request"
            continue
        outcome = _name_problem(topic.name, taken, unified) or (
            _assigned(topic, image, set(live))
            if topic.assignments
            else _placed(topic, defaults, live, racks, rng, cluster_defaults(image))
        )
        if isinstance(outcome, tuple):
            result.error_code, result.error_message = outcome  # type: ignore[assignment]
            continue
        assignment = outcome
        topic_id = new_topic_id()
        taken.add(topic.name)
        unified[unified_topic_name(topic.name)] = topic.name
        result.topic_id = topic_id
        result.num_partitions = len(assignment)
        result.replication_factor = len(assignment[0])
        if request.validate_only:
            continue
        records.append(m.MetadataRecord(topic=m.TopicRecord(name=topic.name, topic_id=topic_id)))
        records += partition_records(topic_id, assignment, set(live))
        records += [
            m.MetadataRecord(
                config=m.ConfigRecord(
                    resource_type=TOPIC_RESOURCE,  # type: ignore[arg-type]
                    resource_name=topic.name,
                    name=key,
                    value=value,
                )
            )
            for key, value in sorted(topic.configs.items())
        ]
    return ControlResult(records, response)


def _placed(
    topic: c.CreateTopicsRequest.Topic,
    defaults: ClusterDefaults,
    live: list[int],
    racks: dict[int, str],
    rng: RandomSource,
    broker_configs: Mapping[str, str],
) -> dict[int, list[int]] | Problem:
    """The topic's partitions placed by the controller over the `live` brokers, or why not
    (its configs checked under the cluster-wide defaults `broker_configs`)."""
    partitions = defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = (
        defaults.default_replication_factor
        if topic.replication_factor in (-1, 0)
        else topic.replication_factor
    )
    if not 1 <= partitions <= limits.topic_partitions_max:
        return (
            ErrorCode.INVALID_PARTITIONS,
            f"num_partitions={partitions}: use 1 to {limits.topic_partitions_max} (or -1 for "
            "the cluster default)",
        )
    if factor < 1:
        return ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {factor} is below 1"
    if (problem := _configs_problem(topic, factor, broker_configs)) is not None:
        return problem
    if factor > len(live):
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {factor} is larger than the {len(live)} unfenced brokers",
        )
    start, shift = _placement_start(rng, live)
    return assign_replicas(
        partitions, factor, live, start_index=start, first_shift=shift, racks=racks
    )


def _assigned(
    topic: c.CreateTopicsRequest.Topic, image: MetadataImage, live: set[int]
) -> dict[int, list[int]] | Problem:
    """The topic's partitions where its assignments place them, or why not."""
    plan = manual_assignment(topic, image.brokers, live)
    if isinstance(plan, tuple):
        return plan
    return _configs_problem(topic, len(plan[0]), cluster_defaults(image)) or plan


def _configs_problem(
    topic: c.CreateTopicsRequest.Topic, factor: int, broker_configs: Mapping[str, str]
) -> Problem | None:
    try:
        validate_effective(topic.name, dict(topic.configs), factor, broker_configs)
    except InvalidConfigError as error:
        return ErrorCode.INVALID_CONFIG, str(error)
    return None


def _name_problem(name: str, taken: set[str], unified: dict[str, str]) -> Problem | None:
    if (problem := topic_name_problem(name)) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, problem
    if (problem := internal_topic_problem(name, "create")) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, problem
    if name in taken:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
    if (other := unified.get(unified_topic_name(name))) is not None:
        return (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic {name!r} collides with existing topic {other!r}: names that differ only "
            "in '.' and '_' are refused, as in Kafka (its metric names cannot tell them apart)",
        )
    return None


def delete_topics(
    image: MetadataImage, request: c.DeleteTopicsRequest
) -> ControlResult[c.DeleteTopicsResponse]:
    response = c.DeleteTopicsResponse()
    records = []
    removed: set[str] = set()
    for name in request.names:
        result = response.topics.add(name=name)
        topic = image.topics.get(name)
        if topic is None or name in removed:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {name!r} does not exist"
            continue
        if (problem := internal_topic_problem(name, "delete")) is not None:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION  # type: ignore[assignment]
            result.error_message = problem
            continue
        removed.add(name)
        records.append(m.MetadataRecord(remove_topic=m.RemoveTopicRecord(topic_id=topic.topic_id)))
    return ControlResult(records, response)


def create_partitions(
    image: MetadataImage, request: c.CreatePartitionsRequest, *, rng: RandomSource
) -> ControlResult[c.CreatePartitionsResponse]:
    response = c.CreatePartitionsResponse()
    records: list[m.MetadataRecord] = []
    live = sorted(b.broker_id for b in image.live_brokers())
    racks = {b.broker_id: b.rack for b in image.live_brokers()}
    # A topic named twice would get two placements of the same new partitions, a batch replay
    # refuses whole; Kafka refuses every occurrence of a repeated name.
    counts = Counter(wanted.name for wanted in request.topics)
    repeated = {name for name, count in counts.items() if count > 1}
    for wanted in request.topics:
        result = response.topics.add(name=wanted.name)
        topic = image.topics.get(wanted.name)
        if wanted.name in repeated:
            result.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
            result.error_message = f"topic {wanted.name!r} is named more than once in this request"
            continue
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[assignment]
            result.error_message = f"topic {wanted.name!r} does not exist"
            continue
        if (problem := internal_topic_problem(wanted.name, "add partitions to")) is not None:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION  # type: ignore[assignment]
            result.error_message = problem
            continue
        current = len(topic.partitions)
        if not current < wanted.count <= limits.topic_partitions_max:
            result.error_code = ErrorCode.INVALID_PARTITIONS  # type: ignore[assignment]
            result.error_message = (
                f"topic {wanted.name!r} has {current} partitions; the new count must be larger "
                f"(partitions can only be added) and at most {limits.topic_partitions_max}"
            )
            continue
        # The target's, while partition 0 is being reassigned (KIP-455): its replicas then
        # also hold the ones the reassignment removes.
        factor = len(topic.partitions[0].target_replicas)
        outcome = (
            added_assignment(wanted, current, factor, image.brokers, set(live))
            if wanted.assignments
            else _added_placed(topic, current, wanted.count, factor, live, racks, rng)
        )
        if isinstance(outcome, tuple):
            result.error_code, result.error_message = outcome  # type: ignore[assignment]
            continue
        if not request.validate_only:
            records += partition_records(topic.topic_id, outcome, set(live))
    return ControlResult(records, response)


def _added_placed(
    topic: TopicImage,
    current: int,
    count: int,
    factor: int,
    live: list[int],
    racks: dict[int, str],
    rng: RandomSource,
) -> dict[int, list[int]] | Problem:
    """Partitions `current`..`count - 1` placed by the controller, continuing the topic's
    round-robin from partition 0's preferred leader, or why they cannot be."""
    first_leader = topic.partitions[0].target_replicas[0]
    try:
        start = leader_start_index(first_leader, live, racks)
        if start is None:
            start = rng.randrange(len(live))
        return assign_replicas(
            count - current,
            factor,
            live,
            start_index=start,
            first_shift=rng.randrange(len(live)),
            first_partition=current,
            racks=racks,
        )
    except (PlacementError, ValueError) as error:
        return ErrorCode.INVALID_REPLICATION_FACTOR, str(error)
