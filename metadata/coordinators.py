"""Where consumer groups and transactional ids live: the internal topics, the key → partition
hash, FindCoordinator.

Theory of operation (DESIGN §5, §6, coordinator.proto). Groups are spread over the partitions of
the internal compacted topic `__consumer_offsets`: group G lives in partition
`(java_string_hash(G) & 0x7fffffff) % partition_count`, exactly as Kafka computes it
(`Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount` with Java's
`String.hashCode`), so a group keeps its partition whatever language the client is written in.
Transactional ids are spread the same way over `__transaction_state` (Kafka's
`TransactionStateManager.partitionFor`: the same formula over that topic's partition count).
These are the two *coordinator topics*: the controller creates each and gives each of its
partitions to one live coordinator (CoordinatorAssignmentRecord, which names the topic); every
controller, broker and coordinator answers FindCoordinator from its own image with
`find_coordinator`, GROUP keys from `__consumer_offsets`' assignments and TRANSACTION keys from
`__transaction_state`'s.

An assignment is *valid* only while the coordinator it names is registered under the epoch it
names and unfenced: a fenced coordinator, or the old incarnation of a restarted one, owns nothing,
even before the controller has moved its partitions. So a client is never sent to a coordinator
that may no longer write the partition; it is told COORDINATOR_NOT_AVAILABLE (retriable) instead.

Pure: no I/O, no clock; the partition counts come from the image.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import CoordinatorAssignment, MetadataImage

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"

# The topics whose partitions the controller gives to coordinators, in planning order.
COORDINATOR_TOPICS = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)

# Topics only the controller creates, and nobody deletes or resizes.
INTERNAL_TOPICS = frozenset(COORDINATOR_TOPICS)

# Their log settings beside the defaults. Their records carry the coordinator service's clock,
# maybe another host's, not the leader's: a clock ahead of a broker's must not have a group's
# commits refused (message.timestamp.after.max.ms, KIP-937, 2^63 - 1: any future time);
# compaction, not time, removes their records. The controller creates the topics with these;
# brokers apply them also to the topics created before they were set.
INTERNAL_TOPIC_LOG_DEFAULTS = {"message.timestamp.after.max.ms": str(2**63 - 1)}

# CoordinatorAssignment.coordinator_id of a partition with no owner (no live coordinator).
NO_COORDINATOR = -1

# CoordinatorKeyType values, repeated so pure code needs no protobuf enum.
GROUP_KEY_TYPE = 1
TRANSACTION_KEY_TYPE = 2

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


def transaction_partition(transactional_id: str, partition_count: int) -> int:
    """The partition of __transaction_state that holds `transactional_id` (Kafka's formula,
    the same as a group's)."""
    assert partition_count > 0
    return (java_string_hash(transactional_id) & 0x7FFFFFFF) % partition_count


def assignment_topic(record_topic: str) -> str:
    """The coordinator topic a CoordinatorAssignmentRecord's `topic` field names: empty (the
    records written before __transaction_state existed) is __consumer_offsets."""
    return record_topic or CONSUMER_OFFSETS_TOPIC


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


def transactional_id_problem(transactional_id: str) -> str | None:
    """Why `transactional_id` is not a valid transactional id, or None."""
    if not transactional_id:
        return "a transactional id must not be empty"
    if len(transactional_id) > limits.transactional_id_length_max:
        return (
            f"a transactional id has at most {limits.transactional_id_length_max} characters "
            f"(this one has {len(transactional_id)})"
        )
    return None


@dataclass(frozen=True)
class _KeySpace:
    """What FindCoordinator needs to know about one key type."""

    topic: str
    key_problem: Callable[[str], str | None]
    invalid_key_error: int  # the error code of a key `key_problem` refuses
    partition_of: Callable[[str, int], int]
    replication_setting: str  # Kafka's name of the topic's replication factor, for messages


_KEY_SPACES = {
    GROUP_KEY_TYPE: _KeySpace(
        CONSUMER_OFFSETS_TOPIC,
        group_id_problem,
        ErrorCode.INVALID_GROUP_ID,
        group_partition,
        "offsets.topic.replication.factor",
    ),
    # Kafka refuses an empty transactional id with INVALID_REQUEST; it has no code of its own.
    TRANSACTION_KEY_TYPE: _KeySpace(
        TRANSACTION_STATE_TOPIC,
        transactional_id_problem,
        ErrorCode.INVALID_REQUEST,
        transaction_partition,
        "transaction.state.log.replication.factor",
    ),
}


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


def valid_assignment(
    image: MetadataImage, topic: str, partition: int
) -> CoordinatorAssignment | None:
    """The assignment of partition `partition` of the coordinator topic `topic` if its
    coordinator owns it now (see the module docstring)."""
    assignment = image.coordinator_assignments.get((topic, partition))
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
    transaction_state_log_replication_factor: int | None = None,
) -> CoordinatorLookup:
    """Who serves `key` (a group id for GROUP_KEY_TYPE, a transactional id for
    TRANSACTION_KEY_TYPE) according to `image`. The replication factors, when the caller knows
    them (the controller does), sharpen the message while the key's topic does not exist.
    """

    def refused(code: int, message: str, partition: int = -1) -> CoordinatorLookup:
        return CoordinatorLookup(key, code, message, NO_COORDINATOR, "", partition, offset)

    offset = image.end_offset
    space = _KEY_SPACES.get(key_type)
    if space is None:
        return refused(
            ErrorCode.INVALID_REQUEST, f"key type {key_type} is not GROUP or TRANSACTION"
        )
    if (problem := space.key_problem(key)) is not None:
        return refused(space.invalid_key_error, problem)
    topic = image.topics.get(space.topic)
    if topic is None or not topic.partitions:
        replication_factor = (
            offsets_topic_replication_factor
            if space.topic == CONSUMER_OFFSETS_TOPIC
            else transaction_state_log_replication_factor
        )
        return refused(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            _missing_topic_reason(image, space, replication_factor),
        )
    partition = space.partition_of(key, len(topic.partitions))
    assignment = valid_assignment(image, space.topic, partition)
    if assignment is None:
        return refused(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            _unowned_reason(image, space.topic, partition),
            partition,
        )
    endpoint = image.coordinators[assignment.coordinator_id].endpoint
    return CoordinatorLookup(
        key, ErrorCode.NONE, "", assignment.coordinator_id, endpoint, partition, offset
    )


def _missing_topic_reason(
    image: MetadataImage, space: _KeySpace, replication_factor: int | None
) -> str:
    where = f"{space.topic} does not exist yet"
    if not image.live_coordinators():
        return f"{where}: no live coordinator yet; start a coordinator"
    live_brokers = len(image.live_brokers())
    if replication_factor is not None and live_brokers < replication_factor:
        return (
            f"{where}: it needs {replication_factor} live brokers "
            f"({space.replication_setting}), has {live_brokers}"
        )
    return f"{where}: the controller is creating it; retry shortly"


def _unowned_reason(image: MetadataImage, topic: str, partition: int) -> str:
    where = f"partition {partition} of {topic}"
    assignment = image.coordinator_assignments.get((topic, partition))
    if not image.live_coordinators():
        return f"{where} has no coordinator: no coordinator is live"
    if assignment is None or assignment.coordinator_id == NO_COORDINATOR:
        return f"{where} is not assigned to a coordinator yet; retry shortly"
    return (
        f"{where} belonged to coordinator {assignment.coordinator_id}, which is fenced or "
        "restarted; the controller is moving it, retry shortly"
    )
