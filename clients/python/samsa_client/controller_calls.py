"""Admin's calls to the controllers: writes to the active one, reads that see those writes.

The servers `bootstrap.servers` lists are brokers (as in Kafka) or controllers. Writes go to the
active controller: a broker forwards them there and answers its answer (KIP-590); a controller that
is not active answers NOT_CONTROLLER with the active one's address, and `write` follows it,
whether or not bootstrap.servers lists it (as Kafka's admin sends writes to the active controller
it learns of; at once the first time, after WRITE_RETRY_BACKOFF_S from then on: two controllers
may name each other while an election runs), or tries the next server while an election runs, or
while a broker cannot reach the active controller. Each write answers with the
metadata offset it was committed at; reads ask for at least the highest one seen
(`metadata_offset`), so Admin always reads its own writes, whichever server answers. A write gives
up after request.timeout.ms (at most WRITE_TIMEOUT_S), a read after request.timeout.ms (at most
READ_TIMEOUT_S), or both after default.api.timeout.ms when it is set (Kafka's deadline of a whole
call, retries included: `admin_timeouts`), and either at once when no bootstrap server is a
Samsa service, or when the request itself is refused as invalid or over a limit
(INVALID_ARGUMENT, RESOURCE_EXHAUSTED: KafkaError INVALID_REQUEST).

What Admin asks and how it reads the answers lives in admin.py; this module only carries calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from samsa.client.cluster_metadata import (
    REFUSED_AS_SENT,
    ClusterMetadata,
    unreachable_reason,
)
from samsa.client.errors import KafkaError, NoBrokersAvailable
from samsa.client.refusals import authorization_error
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.v1 import controller_pb2 as c

WRITE_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 10.0
# Between tries of the next bootstrap server: an election runs, or a server is down or starting.
WRITE_RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_MS_DEFAULT = 30_000  # Kafka's request.timeout.ms for the admin client


def admin_timeouts(config: Mapping[str, object]) -> tuple[int, int | None]:
    """request.timeout.ms (30 s unless set) and default.api.timeout.ms (None unless set: then
    each call gives up after request.timeout.ms, as it always did here) of an Admin config.
    As Kafka's admin, a default.api.timeout.ms below request.timeout.ms is refused."""
    request_ms = _positive_ms(config, "request.timeout.ms", REQUEST_TIMEOUT_MS_DEFAULT)
    if "default.api.timeout.ms" not in config:
        return request_ms, None
    api_ms = _positive_ms(config, "default.api.timeout.ms", 0)
    if api_ms < request_ms:
        raise InvalidConfigError(
            f"default.api.timeout.ms ({api_ms}) must be no smaller than request.timeout.ms "
            f"({request_ms})"
        )
    return request_ms, api_ms


def _positive_ms(config: Mapping[str, object], key: str, default: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidConfigError(f"{key} must be an integer, not {value!r}")
    if not str(value).isdigit() or int(value) < 1:
        raise InvalidConfigError(f"{key} must be a positive integer: {value}")
    return int(value)


class ControllerCalls:
    """Writes to the active controller and reads at or after the last write's metadata offset."""

    def __init__(
        self, metadata: ClusterMetadata, request_timeout_ms: int, api_timeout_ms: int | None = None
    ) -> None:
        assert request_timeout_ms > 0, request_timeout_ms
        self._metadata = metadata
        self._request_timeout_ms = request_timeout_ms
        self._api_timeout_ms = api_timeout_ms  # default.api.timeout.ms, when set
        self._active: str | None = None  # the endpoint that last answered a write
        self.metadata_offset = 0  # the highest any write answered: reads ask for at least it
        self._offset_lock = threading.Lock()

    def write(self, method: str, request: Any) -> Any:
        """`method` at the active controller; KafkaError for a refusal, NoBrokersAvailable when
        no active controller answered in time."""
        endpoints = self._metadata.bootstrap
        timeout_s = min(WRITE_TIMEOUT_S, self._request_timeout_ms / 1000)
        if self._api_timeout_ms is not None:
            timeout_s = self._api_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        attempt_s = self._request_timeout_ms / 1000  # each attempt's, within the deadline
        endpoint = self._active or endpoints[0]
        index = 0
        last: grpc.RpcError | None = None  # the last attempt's failure, when it had no answer
        refusal = ""  # the last NOT_CONTROLLER answer's message
        not_samsa: set[str] = set()
        redirected = False  # a redirect was followed: the next one waits a backoff first
        while time.monotonic() < deadline and len(not_samsa) < len(endpoints):
            try:
                answer = getattr(self._metadata.stub(endpoint), method)(
                    request, timeout=max(0.1, min(10.0, attempt_s, deadline - time.monotonic()))
                )
            except grpc.RpcError as error:
                if error.code() in REFUSED_AS_SENT:
                    raise KafkaError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                if refused := authorization_error(error):  # so would every server
                    raise refused from None
                last, answer = error, None
                if not unreachable_reason(error)[1] and endpoint in endpoints:
                    not_samsa.add(endpoint)
            else:
                last = None
            if answer is not None and answer.status.error_code != ErrorCode.NOT_CONTROLLER:
                self._active = endpoint
                with self._offset_lock:  # writes on several threads answer in any order
                    self.metadata_offset = max(self.metadata_offset, answer.status.metadata_offset)
                self._metadata.advance(answer.status.metadata_offset)
                if answer.status.error_code != ErrorCode.NONE:
                    raise KafkaError.of(answer.status.error_code, answer.status.error_message)
                return answer
            redirect = answer.status.active_controller.endpoint if answer is not None else ""
            refusal = answer.status.error_message if answer is not None else refusal
            if redirect and redirect != endpoint:
                if redirected:  # controllers naming each other while an election runs
                    time.sleep(WRITE_RETRY_BACKOFF_S)
                endpoint, redirected = redirect, True
                continue
            index += 1
            endpoint = endpoints[index % len(endpoints)]
            if len(not_samsa) < len(endpoints):
                time.sleep(WRITE_RETRY_BACKOFF_S)
        if last is not None:
            reason, _ = unreachable_reason(last)
            within = "" if len(not_samsa) == len(endpoints) else f" within {timeout_s:.3g} s"
            raise NoBrokersAvailable(
                f"no Samsa broker or controller answered {method} at {', '.join(endpoints)}"
                f"{within}: {reason}"
            ) from last
        raise NoBrokersAvailable(
            f"{method}: no active controller answered through {', '.join(endpoints)} "
            f"within {timeout_s:.3g} s: {refusal}"
        )

    def read_timeout_s(self) -> float:
        if self._api_timeout_ms is not None:
            return self._api_timeout_ms / 1000
        return min(READ_TIMEOUT_S, self._request_timeout_ms / 1000)

    def read(self, method: str, request: Any) -> Any:
        """`method` at any bootstrap server (the request names `metadata_offset` itself)."""
        return self._metadata.read(method, request, timeout_s=self.read_timeout_s())

    def describe_cluster(self) -> c.DescribeClusterResponse:
        request = c.DescribeClusterRequest(min_metadata_offset=self.metadata_offset)
        return self.read("DescribeCluster", request)

    def describe_topics(self, names: Sequence[str]) -> c.DescribeTopicsResponse:
        """The topics named (empty: all), every page of the answer merged."""
        return self._metadata.describe_topics(names, self.metadata_offset, self.read_timeout_s())
