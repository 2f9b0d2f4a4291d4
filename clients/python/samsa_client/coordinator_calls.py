"""What Admin's calls to the coordinators share: deadlines, FindCoordinator, the coordinator list.

Consumer groups (group_admin_calls.py) and transactional ids (transaction_admin_calls.py) live on
the coordinators, and both are asked the same way, with one CoordinatorCalls between them:

- a whole request has request.timeout.ms, or default.api.timeout.ms when set (`deadline`,
  `within` names it in errors); each call within it at most CALL_TIMEOUT_S and
  request.timeout.ms (`attempt_s`), so that a hung coordinator leaves time to find the key's
  coordinator again and retry; rounds of retries are RETRY_BACKOFF_S apart (`wait_before_retry`);
- a key's coordinator is found with FindCoordinator on the first bootstrap server that answers,
  starting from the last one that did (`lookup`);
- which coordinators exist, and which are fenced, the controllers say (DescribeCluster,
  `coordinators`), read at or after Admin's last write (controller_calls.py);
- a listing asks every live coordinator and retries, round after round, until all of them have
  answered in the same round (`ask_every_live`): a coordinator that is loading or unreachable
  would otherwise leave its groups or transactions out of the list without saying so.

What is decided from the answers is pure and lives in group_admin.py and transaction_admin.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import REFUSED_AS_SENT
from samsa.client.controller_calls import ControllerCalls
from samsa.client.group_admin import GroupError
from samsa.client.refusals import authorization_error
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import coordinator_pb2 as g
from samsa.v1 import coordinator_pb2_grpc as g_grpc

# One call to a coordinator or a bootstrap server: a live one answers well within it, a hung one
# leaves time to find the key's coordinator again before request.timeout.ms.
CALL_TIMEOUT_S = 10.0
# Between rounds of finding coordinators again: a group's or transactional id's partition moves,
# or a coordinator loads one, in a fraction of a second to a few seconds.
RETRY_BACKOFF_S = 0.2

# Why a lookup found no coordinator: an ErrorCode and a message, as the retry loops report it.
Problem = tuple[int, str]

# `ask(coordinator, timeout_s)` -> (answer, None), or (None, why this coordinator must be asked
# again); it raises for an answer no retry can change.
Ask = Callable[[c.DescribeClusterResponse.Coordinator, float], tuple[Any, str | None]]


class CoordinatorCalls:
    """The channels, deadlines, FindCoordinator and coordinator list of one Admin."""

    def __init__(
        self,
        channels: Channels,
        bootstrap: Sequence[str],
        controller: ControllerCalls,
        request_timeout_ms: int,
        api_timeout_ms: int | None = None,
    ) -> None:
        assert request_timeout_ms > 0, request_timeout_ms
        self.channels = channels
        self.request_timeout_ms = request_timeout_ms
        # The deadline of a whole request: default.api.timeout.ms when set, else as before.
        self.deadline_ms = api_timeout_ms or request_timeout_ms
        name = "request.timeout.ms" if api_timeout_ms is None else "default.api.timeout.ms"
        self.within = f"{name} ({self.deadline_ms})"  # for the errors of a request given up
        self._bootstrap = list(bootstrap)
        self._controller = controller
        self._lookup_next = 0  # the bootstrap server FindCoordinator goes to first

    def deadline(self) -> float:
        """When a request started now must give up (time.monotonic())."""
        return time.monotonic() + self.deadline_ms / 1000

    def attempt_s(self, deadline: float) -> float:
        """One call's timeout: CALL_TIMEOUT_S and request.timeout.ms, cut to what is left of the
        request's `deadline` (default.api.timeout.ms may leave more than one attempt's time)."""
        return min(call_timeout_s(deadline), max(0.1, self.request_timeout_ms / 1000))

    def wait_before_retry(self) -> None:
        time.sleep(RETRY_BACKOFF_S)

    def coordinators(self) -> Sequence[c.DescribeClusterResponse.Coordinator]:
        """Every coordinator the controllers know, fenced ones included."""
        return self._controller.describe_cluster().coordinators

    def ask_every_live(self, ask: Ask, what: str, error: type[Exception]) -> list[Any]:
        """Every live coordinator's answer, from one round in which all of them answered; a
        cluster without coordinators answers nothing. Raises `error(message, code)` naming each
        coordinator's problem when no such round came within request.timeout.ms (`what`: what
        is being listed, for that message), and at once for a request refused as invalid or
        over a limit (INVALID_REQUEST)."""
        deadline = self.deadline()
        while True:
            coordinators = self.coordinators()
            live = [x for x in coordinators if not x.is_fenced]
            problems = [] if live or not coordinators else ["no coordinator is live"]
            answers = []
            for coordinator in live:
                try:
                    answer, problem = ask(coordinator, self.attempt_s(deadline))
                except grpc.RpcError as rpc_error:
                    if rpc_error.code() in REFUSED_AS_SENT:  # every coordinator would refuse it
                        raise error(rpc_error.details() or "", ErrorCode.INVALID_REQUEST) from None
                    if refused := authorization_error(rpc_error):  # so would every server
                        raise refused from None
                    answer, problem = None, status(rpc_error)
                if problem is not None:
                    problems.append(f"coordinator {coordinator.coordinator_id}: {problem}")
                    continue
                answers.append(answer)
            if not problems:
                return answers
            if time.monotonic() >= deadline:
                raise error(
                    f"could not list every coordinator's {what} within {self.within}: "
                    f"{'; '.join(problems)}",
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            self.wait_before_retry()

    def lookup(
        self, request: g.FindCoordinatorRequest, deadline: float
    ) -> tuple[g.FindCoordinatorResponse | None, Problem | None]:
        """FindCoordinator on the first bootstrap server that answers, or None and why. A request
        the server refuses as invalid (INVALID_ARGUMENT) raises GroupError, an ACL refusal its
        AuthorizationError."""
        problem = None
        for _ in self._bootstrap:
            endpoint = self._bootstrap[self._lookup_next % len(self._bootstrap)]
            stub = g_grpc.CoordinatorLookupServiceStub(self.channels.get(endpoint))
            try:
                return stub.FindCoordinator(request, timeout=self.attempt_s(deadline)), None
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise GroupError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                if (refused := authorization_error(error)) is not None:
                    raise refused from None  # an ACL refusal or a failed login: so would any server
                problem = (
                    int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    f"no bootstrap server answered FindCoordinator ({status(error)})",
                )
                self._lookup_next += 1
        return None, problem


def call_timeout_s(deadline: float) -> float:
    """One call's deadline: CALL_TIMEOUT_S, cut to what is left of the request's."""
    return max(0.1, min(CALL_TIMEOUT_S, deadline - time.monotonic()))


def status(error: grpc.RpcError) -> str:
    """A failed call's status in one line, for logs and the error a retry loop gives up with.
    grpc's sync errors are grpc.Calls; grpc.aio's AioRpcError is not, but has the same two."""
    if isinstance(error, (grpc.Call, grpc.aio.AioRpcError)):
        return f"{error.code().name}: {error.details()}"
    return str(error)
