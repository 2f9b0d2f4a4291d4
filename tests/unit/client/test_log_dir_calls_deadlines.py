"""Goal: Admin.describe_log_dirs gives each broker a deadline of its own, so that a broker that
is down (asked first) fails alone and a broker asked after it, whose first call fails (say it
is restarting), is asked again and answers; with one shared deadline the first broker's retries
spent it all and the later broker's first failure was final.

Method: LogDirCalls with a real CoordinatorCalls (a short request.timeout.ms) and stubs in place
of gRPC: broker 1 answers UNAVAILABLE every time, broker 2 once and then one page. No channel, no
broker.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import grpc
import pytest

from samsa.client import coordinator_calls, log_dir_calls
from samsa.client.coordinator_calls import CoordinatorCalls
from samsa.client.errors import KafkaError
from samsa.client.log_dir_calls import LogDirCalls
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2 as b
from samsa.v1 import controller_pb2 as c


class Down(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection refused"


class Stub:
    calls: ClassVar[list[str]] = []

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def DescribeLogDirs(self, request: b.DescribeLogDirsRequest, timeout: float) -> Any:
        Stub.calls.append(self.endpoint)
        if self.endpoint == "h:1" or Stub.calls.count("h:2") == 1:
            raise Down()
        answer = b.DescribeLogDirsResponse()
        log_dir = answer.log_dirs.add(path="/data/2", total_bytes=10, usable_bytes=5)
        log_dir.topics.add(name="t").partitions.add(partition=0, size_bytes=7)
        return answer


def test_a_broker_down_fails_alone_and_the_next_broker_still_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(coordinator_calls, "RETRY_BACKOFF_S", 0.02)
    monkeypatch.setattr(log_dir_calls.broker_pb2_grpc, "BrokerServiceStub", Stub)
    cluster = c.DescribeClusterResponse(
        brokers=[
            c.DescribeClusterResponse.Broker(broker_id=1, endpoint="h:1"),
            c.DescribeClusterResponse.Broker(broker_id=2, endpoint="h:2"),
        ]
    )
    controller = SimpleNamespace(describe_cluster=lambda: cluster)
    channels = SimpleNamespace(get=lambda endpoint: endpoint)
    calls = CoordinatorCalls(channels, [], controller, request_timeout_ms=300)  # type: ignore[arg-type]
    with pytest.raises(KafkaError) as failed:
        LogDirCalls(calls, controller).describe_log_dirs(None, None)  # type: ignore[arg-type]
    assert failed.value.code == ErrorCode.BROKER_NOT_AVAILABLE
    assert "broker 1 at h:1" in str(failed.value)
    assert set(failed.value.errors) == {1}, failed.value.errors  # broker 2 answered
    assert Stub.calls.count("h:2") == 2
