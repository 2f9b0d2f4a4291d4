"""A consumer group member's calls to its group coordinator: find it, forget it, ask it.

Theory of operation. The group driver (group_driver.py) talks to one coordinator, the one that
owns its group's `__consumer_offsets` partition. This module keeps which one that is and how to
reach it, on `grpc.aio`, on the consumer driver's loop (Admin's synchronous counterpart is
coordinator_calls.py):

- `find()` returns the known endpoint, or asks FindCoordinator on the bootstrap servers (every
  service answers it), starting from the last one that answered; None when none is known now
  (retry later), KafkaError when the cluster refuses the group id (nothing will change that).
- `forget(endpoint)` drops it after a failed call or a coordinator error (NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS): the next call finds it again. Only
  the endpoint that failed is forgotten, so a late failure cannot drop a newer one.
- `ask()` is the loop behind OffsetCommit and OffsetFetch: one request sent to the coordinator
  until an answer that is not a coordinator error, finding the coordinator again after one, each
  call at most CALL_TIMEOUT_S, retried every retry.backoff.ms until default.api.timeout.ms. A
  request the coordinator refuses as invalid or over its limits (INVALID_ARGUMENT,
  RESOURCE_EXHAUSTED) fails at once with its message.

Heartbeats do not loop here: the group driver sends each one once and the member decides what
follows; they use `stub()` and `forget()` only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.coordinator_calls import status
from samsa.client.errors import KafkaError
from samsa.client.group_admin import COORDINATOR_ERRORS
from samsa.client.refusals import authorization_error
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg

log = logging.getLogger(__name__)

# One FindCoordinator, OffsetCommit or OffsetFetch call's deadline (the loops retry).
CALL_TIMEOUT_S = 5.0
# A request the coordinator refuses as invalid, or over its limits (more partitions than
# request_partitions_max, a commit too big for one batch of __consumer_offsets), fails at once.
REFUSED_AS_SENT = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED})


class GroupCoordinatorCalls:
    """See the module docstring. Used on the consumer driver's loop only (no lock)."""

    def __init__(
        self, config: ConsumerConfig, bootstrap: Sequence[str], channels: AioChannels
    ) -> None:
        assert config.group_id is not None, "group coordinator calls need a group.id"
        self.group_id = config.group_id
        self._config = config
        self._bootstrap = bootstrap
        self._channels = channels
        self._endpoint: str | None = None  # the coordinator's, once found
        self._lookup_next = 0

    def stub(self, endpoint: str) -> cg.GroupCoordinatorServiceStub:
        return cg.GroupCoordinatorServiceStub(self._channels.get(endpoint))

    def forget(self, endpoint: str) -> None:
        if self._endpoint == endpoint:
            self._endpoint = None

    async def find(self) -> str | None:
        """The group's coordinator endpoint; None when none is known now (retry later).
        KafkaError when the cluster refuses the group id."""
        if self._endpoint is not None:
            return self._endpoint
        request = c.FindCoordinatorRequest(
            key_type=c.COORDINATOR_KEY_TYPE_GROUP, keys=[self.group_id]
        )
        endpoints = self._bootstrap
        for _ in endpoints:
            endpoint = endpoints[self._lookup_next % len(endpoints)]
            stub = cg.CoordinatorLookupServiceStub(self._channels.get(endpoint))
            try:
                answer = await stub.FindCoordinator(request, timeout=CALL_TIMEOUT_S)
            except grpc.RpcError as error:
                if refused := authorization_error(error):  # so would every server
                    raise refused from None
                log.info("FindCoordinator at %s failed: %s", endpoint, status(error))
                self._lookup_next += 1
                continue
            location = answer.coordinators[0]
            if location.error_code == ErrorCode.NONE:
                self._endpoint = location.endpoint
                return self._endpoint
            if location.error_code not in COORDINATOR_ERRORS:
                raise KafkaError.of(location.error_code, location.error_message)
            return None
        return None

    async def ask(self, method: str, request: Any, error_of: Callable[[Any], int]) -> Any:
        """`method` at the coordinator until an answer that is not a coordinator error, finding
        the coordinator again after one; KafkaError after default.api.timeout.ms."""
        deadline = time.monotonic() + self._config.default_api_timeout_ms / 1000
        problem = "no coordinator was found"
        while True:
            endpoint = await self.find()
            if endpoint is not None:
                stub = self.stub(endpoint)
                timeout_s = max(0.1, min(CALL_TIMEOUT_S, deadline - time.monotonic()))
                try:
                    answer = await getattr(stub, method)(request, timeout=timeout_s)
                except grpc.RpcError as error:
                    if error.code() in REFUSED_AS_SENT:  # asked again, it is refused again
                        raise KafkaError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                    if refused := authorization_error(error):  # so would every server
                        raise refused from None
                    self.forget(endpoint)
                    problem = f"the coordinator at {endpoint} did not answer ({status(error)})"
                else:
                    code = error_of(answer)
                    if code not in COORDINATOR_ERRORS:
                        return answer
                    self.forget(endpoint)
                    problem = f"the coordinator answered {ErrorCode(code).name}"
            if time.monotonic() >= deadline:
                raise KafkaError(
                    f"{method} for group {self.group_id!r} did not complete within "
                    f"default.api.timeout.ms ({self._config.default_api_timeout_ms}): {problem}",
                    ErrorCode.REQUEST_TIMED_OUT,
                )
            await asyncio.sleep(self._config.retry_backoff_ms / 1000)


def heartbeat_refusal(error: grpc.RpcError) -> tuple[ErrorCode, str | None]:
    """Why the coordinator refused a heartbeat as sent (INVALID_ARGUMENT, RESOURCE_EXHAUSTED: too
    big for its member's record, or the group's ACLs), in the consumer's terms, with the code
    poll() raises; None when a retry may pass."""
    if not isinstance(error, (grpc.Call, grpc.aio.AioRpcError)):
        return ErrorCode.NETWORK_EXCEPTION, None
    if refused := authorization_error(error):
        return refused.code, str(refused)
    code = error.code()
    if code not in REFUSED_AS_SENT:
        return ErrorCode.NETWORK_EXCEPTION, None
    hint = ""
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        hint = " (its size is the subscription's, client.id's and group.instance.id's)"
    return ErrorCode.INVALID_REQUEST, (
        f"the coordinator refuses this member's heartbeat ({code.name}), as it will every time: "
        f"{error.details() or 'no reason given'}{hint}"
    )
