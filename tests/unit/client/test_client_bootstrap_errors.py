"""Goal: a bootstrap server that cannot answer is one line naming it and why, and the client gives
up on it at once when it cannot be a Samsa service (another gRPC service: UNIMPLEMENTED; not gRPC
at all), but keeps trying until its timeout when it may just not have started (nothing listens,
no answer yet), and still uses the other bootstrap servers that answer.

Method: `unreachable_reason` on fake gRPC errors carrying the details gRPC gave in real runs
(loopback, grpcio 1.85); `ClusterMetadata.read` with stubs replaced by fakes that fail or answer
per endpoint, timed with generous bounds only.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from fake_rpc_error import FakeRpcError

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata, unreachable_reason
from samsa.client.errors import NoBrokersAvailable

REFUSED = FakeRpcError(
    grpc.StatusCode.UNAVAILABLE,
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to "
    "connect to remote host: Connection refused",
)
NOT_GRPC = FakeRpcError(
    grpc.StatusCode.UNAVAILABLE,
    "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:46599: Failed "
    "parsing HTTP/2 (Expected SETTINGS frame as the first frame, got frame type 79)",
)
OTHER_GRPC = FakeRpcError(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")


@pytest.mark.parametrize(
    ("error", "reason", "retriable"),
    [
        (REFUSED, "connection refused", True),
        (NOT_GRPC, "what answers there does not speak gRPC", False),
        (OTHER_GRPC, "a gRPC service other than Samsa answers there", False),
        (
            FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
            "no answer in time",
            True,
        ),
        (
            FakeRpcError(
                grpc.StatusCode.UNAVAILABLE,
                "errors resolving nosuchhost.invalid:9: [field:hostname lookup error:address "
                "lookup failed for nosuchhost.invalid:9: Domain name not found]",
            ),
            "unknown host",
            True,
        ),
        (FakeRpcError(grpc.StatusCode.UNAVAILABLE, "Socket closed; more"), "Socket closed", True),
    ],
)
def test_each_failure_has_a_reason_in_words_and_says_whether_to_retry(
    error: FakeRpcError, reason: str, retriable: bool
) -> None:
    assert unreachable_reason(error) == (reason, retriable)


class FakeStub:
    def __init__(self, outcome: Any, calls: list[str], endpoint: str) -> None:
        self.outcome, self.calls, self.endpoint = outcome, calls, endpoint

    def DescribeCluster(self, request: Any, timeout: float) -> Any:
        self.calls.append(self.endpoint)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


class FakeMetadata(ClusterMetadata):
    def __init__(self, outcomes: dict[str, Any]) -> None:
        super().__init__(list(outcomes), Channels())
        self.outcomes = outcomes
        self.calls: list[str] = []

    def stub(self, endpoint: str) -> Any:  # type: ignore[override]
        return FakeStub(self.outcomes[endpoint], self.calls, endpoint)


def test_servers_that_are_not_samsa_fail_at_once_naming_them() -> None:
    metadata = FakeMetadata({"a:1": OTHER_GRPC, "b:2": NOT_GRPC})
    started = time.monotonic()
    with pytest.raises(NoBrokersAvailable) as failed:
        metadata.read("DescribeCluster", object(), timeout_s=30)
    assert time.monotonic() - started < 10, "not the 30 s timeout"
    assert str(failed.value) == (
        "no Samsa broker or controller answered DescribeCluster at a:1, b:2: what answers there "
        "does not speak gRPC"
    )
    assert sorted(metadata.calls) == ["a:1", "b:2"], "each asked once"


def test_nothing_listening_is_retried_until_the_timeout() -> None:
    metadata = FakeMetadata({"a:1": REFUSED})
    with pytest.raises(NoBrokersAvailable) as failed:
        metadata.read("DescribeCluster", object(), timeout_s=0.3)
    assert str(failed.value) == (
        "no Samsa broker or controller answered DescribeCluster at a:1 within 0.3 s: "
        "connection refused"
    )
    assert len(metadata.calls) > 1
    assert isinstance(failed.value.__cause__, grpc.Call), "the CLI explains the cause"


def test_a_server_that_answers_is_used_past_one_that_is_not_samsa() -> None:
    metadata = FakeMetadata({"a:1": OTHER_GRPC, "b:2": "answer"})
    assert metadata.read("DescribeCluster", object(), timeout_s=30) == "answer"
    assert metadata.read("DescribeCluster", object(), timeout_s=30) == "answer"
    assert metadata.calls == ["a:1", "b:2", "b:2"], "the one that answered is kept"
