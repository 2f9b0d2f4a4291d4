"""ConsumerGroupHeartbeat's checks of a request on its own, and the shape of its answers.

Theory of operation: step 1 of a heartbeat (group_heartbeat.py) is `validate`, which looks at the
request alone (ids, epochs, subscription, assignor) and names what is wrong, with the ErrorCode a
client acts on; a refused request writes nothing and is answered by `refused`. Every other answer
is `answer`: the member's epoch and, unless it left, the full set it is assigned. Pure.
"""

from __future__ import annotations

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.topic_regex import TOPIC_REGEX_LENGTH_MAX, pattern_error
from samsa.services.coordinator.assignors import ASSIGNORS
from samsa.services.coordinator.group_model import (
    JOIN_EPOCH,
    STATIC_LEAVE_EPOCH,
    GroupConfig,
    Partitions,
    to_topic_partitions,
)
from samsa.services.coordinator.group_writer import GroupResult
from samsa.v1 import coordinator_pb2 as c

# The longest member id (coordinator.proto: 1 to 64 characters); a UUID is 36.
MEMBER_ID_LENGTH_MAX = 64

Error = tuple[ErrorCode, str]
HeartbeatResult = GroupResult[c.ConsumerGroupHeartbeatResponse]


def validate(request: c.ConsumerGroupHeartbeatRequest) -> Error | None:
    """What is wrong with the request on its own, or None."""
    if not 1 <= len(request.group_id) <= limits.group_id_length_max:
        return ErrorCode.INVALID_GROUP_ID, (
            f"group_id must be 1 to {limits.group_id_length_max} characters, "
            f"got {len(request.group_id)}"
        )
    if not 1 <= len(request.member_id) <= MEMBER_ID_LENGTH_MAX:
        return ErrorCode.INVALID_REQUEST, (
            f"member_id must be 1 to {MEMBER_ID_LENGTH_MAX} characters (a UUID the client makes "
            f"once), got {len(request.member_id)}"
        )
    if request.member_epoch < STATIC_LEAVE_EPOCH:
        return ErrorCode.INVALID_REQUEST, (
            f"member_epoch {request.member_epoch} is invalid: send 0 to join, -1 to leave, -2 for "
            "a static member's temporary leave, else the epoch of the last answer"
        )
    if request.member_epoch == STATIC_LEAVE_EPOCH and not request.group_instance_id:
        return ErrorCode.INVALID_REQUEST, (
            "member_epoch -2 is a static member's leave and needs group_instance_id; "
            "a dynamic member leaves with -1"
        )
    if request.rebalance_timeout_ms < 0:
        return ErrorCode.INVALID_REQUEST, "rebalance_timeout_ms must not be negative"
    if request.member_epoch == JOIN_EPOCH:
        if not request.HasField("subscription"):
            return ErrorCode.INVALID_REQUEST, "a join (member_epoch 0) needs a subscription"
        if request.rebalance_timeout_ms <= 0:
            return ErrorCode.INVALID_REQUEST, (
                "a join (member_epoch 0) needs rebalance_timeout_ms > 0"
            )
    if request.HasField("subscription"):
        error = subscription_error(request.subscription)
        if error is not None:
            return error
    if request.server_assignor and request.server_assignor not in ASSIGNORS:
        return ErrorCode.UNSUPPORTED_ASSIGNOR, (
            f"server_assignor {request.server_assignor!r} is not one of {sorted(ASSIGNORS)}"
        )
    return None


def subscription_error(subscription: c.ConsumerGroupSubscription) -> Error | None:
    names, regex = list(subscription.topic_names), subscription.topic_regex
    if bool(names) == bool(regex):
        return ErrorCode.INVALID_REQUEST, (
            "subscription needs exactly one of topic_names and topic_regex"
        )
    if any(not name for name in names):
        return ErrorCode.INVALID_REQUEST, "subscription.topic_names holds an empty name"
    if len(regex) > TOPIC_REGEX_LENGTH_MAX:
        return ErrorCode.INVALID_REQUEST, (
            f"subscription.topic_regex is over {TOPIC_REGEX_LENGTH_MAX} characters"
        )
    if regex:
        error = pattern_error(regex)
        if error is not None:
            # Kafka's answer (INVALID_REGULAR_EXPRESSION) to what RE2/J does not compile.
            return ErrorCode.INVALID_REGULAR_EXPRESSION, (
                f"subscription.topic_regex {regex!r} is not a valid regular expression: {error}"
            )
    return None


def answer(
    request: c.ConsumerGroupHeartbeatRequest,
    member_epoch: int,
    assigned: Partitions | None,
    config: GroupConfig,
) -> c.ConsumerGroupHeartbeatResponse:
    response = c.ConsumerGroupHeartbeatResponse(
        member_id=request.member_id,
        member_epoch=member_epoch,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
    )
    if assigned is not None:
        response.assignment.topics.extend(to_topic_partitions(assigned))
    return response


def refused(request: c.ConsumerGroupHeartbeatRequest, error: Error) -> HeartbeatResult:
    code, message = error
    response = c.ConsumerGroupHeartbeatResponse(
        error_code=int(code),  # type: ignore[arg-type]
        error_message=message,
        member_id=request.member_id,
    )
    return GroupResult([], response)
