"""Where consumer groups live: the internal topic, the group → partition hash, FindCoordinator.

Theory of operation (DESIGN §6, coordinator.proto). Groups are spread over the partitions of the
internal compacted topic `__consumer_offsets`: group G lives in partition
`(java_string_hash(G) & 0x7fffffff) % partition_count`, exactly as Kafka computes it
(`Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount` with Java's
`String.hashCode`), so a group keeps its partition whatever language the client is written in.
The controller creates the topic and gives each partition to one live coordinator
(CoordinatorAssignmentRecord); every controller, broker and coordinator answers FindCoordinator
from its own image with `find_coordinator`.

An assignment is *valid* only while the coordinator it names is registered under the epoch it
names and unfenced: a fenced coordinator, or the old incarnation of a restarted one, owns nothing,
even before the controller has moved its partitions. So a client is never sent to a coordinator
that may no longer write the partition; it is told COORDINATOR_NOT_AVAILABLE (retriable) instead.

Pure: no I/O, no clock; the partition count comes from the image.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import CoordinatorAssignment, MetadataImage

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"

# Topics only the controller creates, and nobody deletes or resizes.
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS_TOPIC})

# CoordinatorAssignment.coordinator_id of a partition with no owner (no live coordinator).
NO_COORDINATOR = -1

# CoordinatorKeyType.COORDINATOR_KEY_TYPE_GROUP, repeated so pure code needs no protobuf enum.
GROUP_KEY_TYPE = 1

_INT32_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()`: `h = 31 * h + unit` over the UTF-16 code units, as an int32.

    Characters outside the Basic Multilingual Plane are two code units (a surrogate pair) in
    Java, so they are hashed as two here too.
    """
    encoded = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for index in range(0, len(encoded), 2):
        h = (31 * h + (encoded[index] << 8 | encoded[index + 1])) & _INT32_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def group_partition(group_id: str, partition_count: int) -> int:
    """The partition of __consumer_offsets that holds `group_id` (Kafka's formula)."""
    assert partition_count > 0
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partition_count


def group_id_problem(group_id: str) -> str | None:
    """Why `group_id` is not a valid group id, or None."""
    if not group_id:
        return "a group id must not be empty"
    if len(group_id) > limits.group_id_length_max:
        return (
            f"a group id has at most {limits.group_id_length_max} characters "
            f"(this one has {len(group_id)})"
        )
    return None


@dataclass(frozen=True)
class CoordinatorLookup:
    """One answer of FindCoordinator: the fields of coordinator.proto's CoordinatorLocation."""

    key: str
    error_code: int
    error_message: str
    coordinator_id: int
    endpoint: str
    partition: int
    metadata_offset: int


def valid_assignment(image: MetadataImage, partition: int) -> CoordinatorAssignment | None:
    """The partition's assignment if its coordinator owns it now (see the module docstring)."""
    assignment = image.coordinator_assignments.get(partition)
    if assignment is None or assignment.coordinator_id == NO_COORDINATOR:
        return None
    coordinator = image.coordinators.get(assignment.coordinator_id)
    if (
        coordinator is None
        or coordinator.fenced
        or coordinator.coordinator_epoch != assignment.coordinator_epoch
    ):
        return None
    return assignment


def find_coordinator(
    image: MetadataImage,
    key_type: int,
    key: str,
    *,
    offsets_topic_replication_factor: int | None = None,
) -> CoordinatorLookup:
    """Who serves `key` according to `image`. `offsets_topic_replication_factor`, when the
    caller knows it (the controller does), sharpens the message while the topic does not exist.
    """

    def refused(code: int, message: str, partition: int = -1) -> CoordinatorLookup:
        return CoordinatorLookup(key, code, message, NO_COORDINATOR, "", partition, offset)

    offset = image.end_offset
    if key_type != GROUP_KEY_TYPE:
        return refused(ErrorCode.INVALID_REQUEST, f"key type {key_type} is not GROUP")
    if (problem := group_id_problem(key)) is not None:
        return refused(ErrorCode.INVALID_GROUP_ID, problem)
    topic = image.topics.get(CONSUMER_OFFSETS_TOPIC)
    if topic is None or not topic.partitions:
        return refused(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            _missing_topic_reason(image, offsets_topic_replication_factor),
        )
    partition = group_partition(key, len(topic.partitions))
    assignment = valid_assignment(image, partition)
    if assignment is None:
        return refused(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            _unowned_reason(image, partition),
            partition,
        )
    endpoint = image.coordinators[assignment.coordinator_id].endpoint
    return CoordinatorLookup(
        key, ErrorCode.NONE, "", assignment.coordinator_id, endpoint, partition, offset
    )


def _missing_topic_reason(image: MetadataImage, replication_factor: int | None) -> str:
    where = f"{CONSUMER_OFFSETS_TOPIC} does not exist yet"
    if not image.live_coordinators():
        return f"{where}: no live coordinator yet; start a coordinator"
    live_brokers = len(image.live_brokers())
    if replication_factor is not None and live_brokers < replication_factor:
        return (
            f"{where}: it needs {replication_factor} live brokers "
            f"(offsets.topic.replication.factor), has {live_brokers}"
        )
    return f"{where}: the controller is creating it; retry shortly"


def _unowned_reason(image: MetadataImage, partition: int) -> str:
    where = f"partition {partition} of {CONSUMER_OFFSETS_TOPIC}"
    assignment = image.coordinator_assignments.get(partition)
    if not image.live_coordinators():
        return f"{where} has no coordinator: no coordinator is live"
    if assignment is None or assignment.coordinator_id == NO_COORDINATOR:
        return f"{where} is not assigned to a coordinator yet; retry shortly"
    return (
        f"{where} belonged to coordinator {assignment.coordinator_id}, which is fenced or "
        "restarted; the controller is moving it, retry shortly"
    )
