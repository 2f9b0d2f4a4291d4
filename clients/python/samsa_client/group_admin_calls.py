"""Consumer-group administration, the I/O half: Admin's group methods, at the coordinators.

A call about groups asks a bootstrap server which coordinator owns each group (FindCoordinator,
remembered per group), sends the request there, and on NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE or an unreachable coordinator forgets that
group's coordinator, finds it again and retries, until request.timeout.ms (`_ask_coordinators`).
Groups owned by one coordinator go to it together (in requests of at most admin_request_items_max
groups, as FindCoordinator asks for them: servers refuse more); answers come back in request order.
Listing groups asks every live coordinator (DescribeCluster names them) and merges.

Admin (admin.py) owns one GroupAdminCalls and hands each consumer-group method to it; deadlines
and FindCoordinator are shared with the transaction calls (coordinator_calls.py); what is decided
from the answers is pure and lives in group_admin.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from samsa.client import group_admin as ga
from samsa.client.coordinator_calls import CoordinatorCalls, Problem, status
from samsa.client.errors import AuthorizationError, KafkaError, first_of
from samsa.client.group_admin import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupError,
    OffsetAndMetadata,
    PartitionLag,
    TopicPartition,
)
from samsa.client.refusals import authorization_error
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import coordinator_pb2 as g
from samsa.v1 import coordinator_pb2_grpc as g_grpc

# `send(stub, group_ids, timeout_s)`: one request for groups sharing a coordinator, answers by id.
Send = Callable[[g_grpc.GroupCoordinatorServiceStub, list[str], float], dict[str, Any]]


class GroupAdminCalls:
    """The bodies of Admin's consumer-group methods (same names; Admin documents them), and the
    coordinator of each group as last found."""

    def __init__(self, calls: CoordinatorCalls) -> None:
        self._calls = calls
        self._group_coordinators: dict[str, str] = {}  # group id -> endpoint, as last found

    def list_consumer_groups(self, states: Iterable[str]) -> list[ConsumerGroupListing]:
        request = g.ListGroupsRequest(states_filter=ga.group_state_filter(states))

        def ask(
            coordinator: c.DescribeClusterResponse.Coordinator, timeout_s: float
        ) -> tuple[g.ListGroupsResponse | None, str | None]:
            stub = self._group_stub(coordinator.endpoint)
            answer = stub.ListGroups(request, timeout=timeout_s)
            if answer.error_code == ErrorCode.NONE:
                return answer, None
            if not ga.coordinator_retriable(answer.error_code):
                raise GroupError.of(answer.error_code, answer.error_message)
            return None, answer.error_message

        return ga.listings_of(self._calls.ask_every_live(ask, "groups", GroupError))

    def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> dict[str, ConsumerGroupDescription]:
        answers = self._ask_coordinators(
            list(group_ids), _per_group("DescribeGroups", g.DescribeGroupsRequest), _group_error
        )
        _raise_every_failure(answers)
        return {group_id: ga.description_of(answer) for group_id, answer in answers.items()}

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> None:
        answers = self._ask_coordinators(
            list(group_ids), _per_group("DeleteGroups", g.DeleteGroupsRequest), _group_error
        )
        _raise_every_failure(answers)

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None, require_stable: bool
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if partitions is not None:
            partitions = list(partitions)
            if not partitions:  # OffsetFetch without topics would answer every partition
                return {}
        request = ga.offset_fetch_request(group_id, partitions)
        request.require_stable = require_stable
        deadline = self._calls.deadline()
        while True:  # UNSTABLE_OFFSET_COMMIT (only asked with require_stable) until it ends
            answer = self._ask_coordinator(group_id, "OffsetFetch", request)
            if not ga.unstable(answer) or time.monotonic() >= deadline:
                return ga.offsets_of(answer)  # raises UNSTABLE_OFFSET_COMMIT past the deadline
            self._calls.wait_before_retry()

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        request = ga.offset_commit_request(group_id, offsets)
        answers = self._ask_coordinators(
            [group_id],
            lambda stub, ids, timeout_s: {ids[0]: stub.OffsetCommit(request, timeout=timeout_s)},
            ga.first_commit_error_of,
        )
        error = ga.commit_error_of(group_id, answers[group_id])
        if error is not None:
            raise error

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, GroupError | None]:
        request = ga.offset_delete_request(group_id, partitions)
        return ga.deleted_offsets_of(self._ask_coordinator(group_id, "OffsetDelete", request))

    def describe_consumer_group_lag(self, group_id: str) -> list[PartitionLag]:
        request = g.DescribeGroupLagRequest(group_id=group_id)
        return ga.lag_of(self._ask_coordinator(group_id, "DescribeGroupLag", request))

    # --- reaching each group's coordinator -------------------------------------------------------

    def _group_stub(self, endpoint: str) -> g_grpc.GroupCoordinatorServiceStub:
        return g_grpc.GroupCoordinatorServiceStub(self._calls.channels.get(endpoint))

    def _ask_coordinator(self, group_id: str, method: str, request: Any) -> Any:
        """One request about one group whose answer carries a whole-group error_code."""
        answers = self._ask_coordinators(
            [group_id],
            lambda stub, ids, timeout_s: {
                ids[0]: getattr(stub, method)(request, timeout=timeout_s)
            },
            _group_error,
        )
        return answers[group_id]

    def _ask_coordinators(
        self, group_ids: list[str], send: Send, error_of: Callable[[Any], Problem]
    ) -> dict[str, Any]:
        """`send(stub, ids, timeout_s)` to each group's coordinator until every group has an
        answer that is not a coordinator error (`error_of` reads it), finding coordinators again
        after one; GroupError with the last such error after request.timeout.ms. The answers
        come in request order."""
        deadline = self._calls.deadline()
        pending = list(dict.fromkeys(group_ids))
        answers: dict[str, Any] = {}
        problem = (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "no coordinator was found")
        while True:
            located, lookup_problem, refused = self._find_coordinators(pending, deadline)
            problem = lookup_problem or problem
            for group_id, (code, message) in refused.items():
                if len(answers) + len(pending) == 1:  # the only group asked: its error at once
                    raise GroupError.of(code, message)
                answers[group_id] = _Refused(code, message)  # the others are still asked
            by_endpoint: dict[str, list[str]] = {}
            for group_id, endpoint in located.items():
                by_endpoint.setdefault(endpoint, []).append(group_id)
            batches = [(at, chunk) for at, owned in by_endpoint.items() for chunk in _chunks(owned)]
            for endpoint, ids in batches:
                try:
                    got = send(self._group_stub(endpoint), ids, self._calls.attempt_s(deadline))
                except grpc.RpcError as error:
                    if (refused := authorization_error(error)) is not None:
                        raise refused from None  # ACLs or login: every coordinator would
                    if error.code() in (
                        grpc.StatusCode.INVALID_ARGUMENT,
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                    ):
                        raise GroupError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                    got = {}
                    problem = (
                        int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                        f"the coordinator at {endpoint} did not answer ({status(error)})",
                    )
                for group_id in ids:
                    answer = got.get(group_id)
                    code, message = problem if answer is None else error_of(answer)
                    if answer is not None and not ga.coordinator_retriable(code):
                        answers[group_id] = answer
                        continue
                    problem = (code, message)
                    self._group_coordinators.pop(group_id, None)
            pending = [group_id for group_id in pending if group_id not in answers]
            if not pending:
                return {group_id: answers[group_id] for group_id in dict.fromkeys(group_ids)}
            if time.monotonic() >= deadline:
                raise GroupError(
                    f"no coordinator answered for group(s) {pending} within "
                    f"{self._calls.within}: {problem[1]}",
                    ErrorCode(problem[0]),
                )
            self._calls.wait_before_retry()

    def _find_coordinators(
        self, group_ids: list[str], deadline: float
    ) -> tuple[dict[str, str], Problem | None, dict[str, Problem]]:
        """The coordinator endpoint of each group that has one now (remembered, else found with
        FindCoordinator on a bootstrap server), why some have none (the caller retries them), and
        the groups refused for good (an invalid group id) with their error."""
        unknown = [group_id for group_id in group_ids if group_id not in self._group_coordinators]
        problem = None
        refused: dict[str, Problem] = {}
        for keys in _chunks(unknown):
            request = g.FindCoordinatorRequest(key_type=g.COORDINATOR_KEY_TYPE_GROUP, keys=keys)
            answer, lookup_problem = self._calls.lookup(request, deadline)
            problem = lookup_problem or problem
            for location in answer.coordinators if answer is not None else ():
                if location.error_code == ErrorCode.NONE:
                    self._group_coordinators[location.key] = location.endpoint
                elif ga.coordinator_retriable(location.error_code):
                    problem = (location.error_code, location.error_message)
                else:
                    refused[location.key] = (location.error_code, location.error_message)
        # One get per group: another thread sharing this Admin may forget a coordinator between
        # a membership test and a lookup.
        remembered = {group_id: self._group_coordinators.get(group_id) for group_id in group_ids}
        located = {
            group_id: at
            for group_id, at in remembered.items()
            if at is not None and group_id not in refused
        }
        return located, problem, refused


@dataclass(frozen=True)
class _Refused:
    """The answer of a group FindCoordinator refused for good, as a per-group answer reads."""

    error_code: int
    error_message: str


def _chunks(keys: list[str]) -> list[list[str]]:
    """`keys` in lists of at most admin_request_items_max: servers refuse a request naming more
    (RESOURCE_EXHAUSTED), and Kafka's admin takes any number of groups."""
    step = limits.admin_request_items_max
    return [keys[start : start + step] for start in range(0, len(keys), step)]


def _per_group(method: str, request_type: Callable[..., Any]) -> Send:
    """A `Send` for a request naming its groups (`group_ids`) whose answer lists one entry per
    group (`groups`, each with its `group_id`): DescribeGroups, DeleteGroups."""

    def send(stub: g_grpc.GroupCoordinatorServiceStub, ids: list[str], timeout_s: float) -> dict:
        answer = getattr(stub, method)(request_type(group_ids=ids), timeout=timeout_s)
        return {entry.group_id: entry for entry in answer.groups}

    return send


def _raise_every_failure(answers: dict[str, Any]) -> None:
    """The first failed group's GroupError, whose `errors` names every failed group (in request
    order): one group refused must not hide what became of the others."""
    errors: dict[str, KafkaError] = {}
    for group_id, answer in answers.items():
        error = ga.group_error_of(answer.error_code, answer.error_message)
        if error is not None and error.code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            # Answered per group, as Kafka's: the AuthorizationError naming it.
            error = AuthorizationError(str(error), error.code, f"group:{group_id}")
        if error is not None:
            errors[group_id] = error
    error = first_of(errors)
    if error is not None:
        raise error


def _group_error(answer: Any) -> Problem:
    """A whole-group answer's error code and message."""
    return answer.error_code, answer.error_message
