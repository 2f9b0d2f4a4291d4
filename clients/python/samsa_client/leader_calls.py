"""Admin requests that each partition's leader answers (DescribeProducers, DeleteRecords).

`ask_leaders` groups the partitions by leader from the client's metadata, sends one request to
each leader (one per request_partitions_max partitions, the most a leader accepts), and asks
again, after a metadata refresh, for the partitions whose leader moved, is unknown or did not
answer, until the deadline; a request refused for what it is (INVALID_ARGUMENT,
RESOURCE_EXHAUSTED) fails the call at once (INVALID_REQUEST). Any other error in an answer is
final for its partition, and so is a partition the metadata says does not exist: every other
partition is still asked (one refusal hides no other outcome, as Kafka's admin answers a future
per partition), and then the first refused partition's error is raised with the broker's
message, its `errors` naming every refused partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from samsa.client.cluster_metadata import REFUSED_AS_SENT, ClusterMetadata
from samsa.client.coordinator_calls import CoordinatorCalls, status
from samsa.client.errors import AuthorizationError, KafkaError, first_of
from samsa.client.refusals import authorization_error
from samsa.client.transaction_admin import LEADER_ERRORS
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2_grpc

PartitionKey = tuple[str, int]
# ask(stub, {topic: [partition, ...]}, timeout_s) -> an answer whose `topics` each have a `name`
# and `partitions`, each with `partition`, `error_code` and `error_message`.
Ask = Callable[[broker_pb2_grpc.BrokerServiceStub, dict[str, list[int]], float], Any]
# error(message, code) -> the exception to raise.
Problem = tuple[ErrorCode, str]
ErrorOf = Callable[[str, ErrorCode], KafkaError]

# The leader moved or is starting, or was just elected (OFFSET_NOT_AVAILABLE: ListOffsets), or
# the request named a topic id the broker does not host the topic under (UNKNOWN_TOPIC_ID,
# ListOffsets: the refresh shows the new id, or the broker catches up).
RETRIED = LEADER_ERRORS | {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_ID,
}


def ask_leaders(
    calls: CoordinatorCalls,
    metadata: ClusterMetadata,
    partitions: Iterable[PartitionKey],
    ask: Ask,
    error: ErrorOf,
    what: str,
) -> dict[PartitionKey, Any]:
    """Each partition's answer from its leader, in the order asked (see the module doc);
    `what` names the request in the timeout's message ("described its producers")."""
    wanted = list(dict.fromkeys(partitions))
    deadline = calls.deadline()
    answers: dict[PartitionKey, Any] = {}
    refused: dict[PartitionKey, KafkaError] = {}  # final errors, by partition
    # Why the partitions still pending are: the last problem seen, and its code.
    problem: Problem = (ErrorCode.LEADER_NOT_AVAILABLE, "no leader was found")
    with metadata.transient({topic for topic, _ in wanted}):  # described until answered
        while True:
            pending = [key for key in wanted if key not in answers and key not in refused]
            if not pending:
                first = first_of({key: refused[key] for key in wanted if key in refused})
                if first is not None:
                    raise first
                return {key: answers[key] for key in wanted}
            metadata.refresh({topic for topic, _ in pending}, calls.attempt_s(deadline))
            by_leader: dict[tuple[str, int], dict[str, list[int]]] = {}
            counts: dict[str, int] = {}
            for topic, number in pending:
                count = metadata.partition_counts.get(topic)
                if count is None or not 0 <= number < count:
                    missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    refused[(topic, number)] = error(f"{topic}-{number} does not exist", missing)
                    continue
                leader = metadata.leaders.get((topic, number))
                endpoint = metadata.endpoints.get(leader) if leader is not None else None
                if endpoint is None:
                    problem = (ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{number} has no leader")
                    continue
                # At most request_partitions_max partitions a request: a leader refuses more.
                piece = counts.get(endpoint, 0) // limits.request_partitions_max
                counts[endpoint] = counts.get(endpoint, 0) + 1
                by_leader.setdefault((endpoint, piece), {}).setdefault(topic, []).append(number)
            for (endpoint, _), numbers in by_leader.items():
                why = _ask_one(
                    calls, metadata, endpoint, numbers, ask, error, answers, refused, deadline
                )
                problem = why or problem
            if all(key in answers or key in refused for key in wanted):
                continue
            if time.monotonic() >= deadline:
                message = f"not every partition's leader {what} within {calls.within}: {problem[1]}"
                timed_out = error(message, problem[0])
                for key in wanted:
                    if key not in answers:
                        refused.setdefault(key, timed_out)
                first = first_of({key: refused[key] for key in wanted if key in refused})
                assert first is not None
                raise first
            calls.wait_before_retry()


def _ask_one(
    calls: CoordinatorCalls,
    metadata: ClusterMetadata,
    endpoint: str,
    numbers: dict[str, list[int]],
    ask: Ask,
    error: ErrorOf,
    answers: dict[PartitionKey, Any],
    refused: dict[PartitionKey, KafkaError],
    deadline: float,
) -> Problem | None:
    """Ask the broker at `endpoint`; its answered partitions go into `answers`, those refused
    for good (an error no retry cures) into `refused`. Returns why the others were not
    answered, with its code (None when all were)."""
    stub = broker_pb2_grpc.BrokerServiceStub(calls.channels.get(endpoint))
    try:
        response = ask(stub, numbers, calls.attempt_s(deadline))
    except grpc.RpcError as failure:
        if failure.code() in REFUSED_AS_SENT:  # every leader would refuse it the same
            raise error(failure.details() or "", ErrorCode.INVALID_REQUEST) from None
        if refused := authorization_error(failure):  # so would every server
            raise refused from None
        metadata.mark_stale()
        return (
            ErrorCode.LEADER_NOT_AVAILABLE,
            f"the broker at {endpoint} did not answer ({status(failure)})",
        )
    problem: Problem | None = None
    for topic in response.topics:
        for answer in topic.partitions:
            if answer.error_code == ErrorCode.NONE:
                answers[(topic.name, answer.partition)] = answer
            elif answer.error_code in RETRIED:
                metadata.mark_stale()
                text = f"{topic.name}-{answer.partition}: {answer.error_message}"
                problem = (ErrorCode(answer.error_code), text)
            else:
                known = KafkaError.of(answer.error_code, answer.error_message)
                message = f"{topic.name}-{answer.partition}: {known}"
                key = (topic.name, answer.partition)
                if known.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:  # per partition (ACLs)
                    refused[key] = AuthorizationError(message, known.code, f"topic:{topic.name}")
                else:
                    refused[key] = error(message, known.code)
    return problem
