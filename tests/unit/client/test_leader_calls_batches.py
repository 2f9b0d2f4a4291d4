"""Goal: `ask_leaders` never names more partitions in one request than a leader accepts
(request_partitions_max): a leader refuses such a request whole, and the call retried it until
request.timeout.ms and then blamed the leader. Method: the real `ask_leaders` with the client's
metadata and channels replaced by plain objects, and an `ask` that answers like a leader,
refusing a request over the limit."""

from __future__ import annotations

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
