"""Goal: `ask_leaders` never names more partitions in one request than a leader accepts
(request_partitions_max): a leader refuses such a request whole, and the call retried it until
request.timeout.ms and then blamed the leader. Method: the real `ask_leaders` with the client's
metadata and channels replaced by plain objects, and an `ask` that answers like a leader,
refusing a request over the limit."""

from __future__ import annotations

import contextlib

import grpc

from samsa.client.leader_calls import ask_leaders
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2


class Metadata:
    def __init__(self, partitions: int) -> None:
        self.partition_counts = {"t": partitions, "u": partitions}
        self.leaders = {(t, p): p % 2 for t in ("t", "u") for p in range(partitions)}
        self.endpoints = {0: "127.0.0.1:1", 1: "127.0.0.1:2"}

    def refresh(self, topics: object, timeout_s: float) -> None:
        pass

    def mark_stale(self) -> None:
        pass

    def transient(self, topics: object) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


class Calls:
    request_timeout_ms = 30_000

    def __init__(self) -> None:
        self.channels = {e: grpc.insecure_channel(e) for e in ("127.0.0.1:1", "127.0.0.1:2")}

    def deadline(self) -> float:
        import time

        return time.monotonic() + 30

    def attempt_s(self, deadline: float) -> float:
        return 10.0

    def wait_before_retry(self) -> None:
        raise AssertionError("nothing should be asked twice")


def test_a_leader_is_never_asked_more_partitions_than_a_request_may_name() -> None:
    limit = limits.request_partitions_max
    partitions = limit + 5  # two topics over two leaders: each leads limit + 4 or limit + 6
    sizes: list[int] = []

    def ask(stub: object, numbers: dict[str, list[int]], timeout_s: float):
        count = sum(len(ps) for ps in numbers.values())
        assert count <= limit, f"a leader refuses {count} partitions in one request"
        sizes.append(count)
        return broker_pb2.ListOffsetsResponse(
            topics=[
                broker_pb2.ListOffsetsResponse.TopicResponse(
                    name=topic,
                    partitions=[
                        broker_pb2.ListOffsetsResponse.PartitionResponse(partition=p, offset=p)
                        for p in ps
                    ],
                )
                for topic, ps in numbers.items()
            ]
        )

    calls = Calls()
    wanted = [(t, p) for t in ("t", "u") for p in range(partitions)]
    try:
        answers = ask_leaders(calls, Metadata(partitions), wanted, ask, _error, "listed offsets")  # type: ignore[arg-type]
    finally:
        for channel in calls.channels.values():
            channel.close()
    assert list(answers) == wanted and all(answers[k].offset == k[1] for k in wanted)
    assert sorted(sizes) == [4, 6, limit, limit]


def _error(message: str, code: ErrorCode) -> Exception:
    return RuntimeError(f"{code.name}: {message}")


class Refused(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return "timeout_ms 0 is not 1 to 300000"


def test_a_request_refused_as_sent_is_raised_at_once_not_retried() -> None:
    """INVALID_ARGUMENT or RESOURCE_EXHAUSTED: every leader would refuse it again, so the call
    fails with the broker's message (INVALID_REQUEST), not after request.timeout.ms blaming the
    leader (Calls.wait_before_retry fails the test on a second round)."""

    def ask(stub: object, numbers: dict[str, list[int]], timeout_s: float):
        raise Refused()

    calls = Calls()
    try:
        try:
            ask_leaders(calls, Metadata(2), [("t", 0)], ask, _error, "deleted records")  # type: ignore[arg-type]
        except RuntimeError as error:
            assert str(error) == "INVALID_REQUEST: timeout_ms 0 is not 1 to 300000"
        else:
            raise AssertionError("not raised")
    finally:
        for channel in calls.channels.values():
            channel.close()
