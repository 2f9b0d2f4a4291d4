"""Goal: an OffsetCommit or OffsetFetch the coordinator refuses for its size (RESOURCE_EXHAUSTED:
more than request_partitions_max partitions, or a commit whose records would not fit one batch
of __consumer_offsets) fails at once with the coordinator's message, as Admin's calls do
(b13153d), and a consumer owning more partitions than one request may name commits and reads its
offsets in several requests. Before, the refusal was taken for an unreachable coordinator: the
call was sent again (the coordinator forgotten and found again each time) for
default.api.timeout.ms, 60 s, then failed as REQUEST_TIMED_OUT "did not answer"; so a consumer
assigned more than 10,000 partitions never started (resolving its committed offsets failed) and
never committed.

Method: GroupCoordinatorCalls and GroupDriver on an event loop with the coordinator's stub
replaced by a fake that refuses requests naming more than a small limit (monkeypatched
request_partitions_max); no network.
"""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest

from samsa.client import group_driver
from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

LIMIT = 3
CONFIG = ConsumerConfig.from_dict(
    {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "default.api.timeout.ms": 3000}
)


def refused(details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(), grpc.aio.Metadata(), details
    )


class FakeCoordinator:
    """Refuses requests naming more than LIMIT partitions; remembers committed offsets."""

    def __init__(self) -> None:
        self.committed: dict[tuple[str, int], int] = {}
        self.requests = 0

    def _check(self, request: object) -> None:
        self.requests += 1
        count = sum(len(t.partitions) for t in request.topics)  # type: ignore[attr-defined]
        if count > LIMIT:
            raise refused(f"{count} partitions in one request; send at most {LIMIT}")

    async def OffsetCommit(self, request: c.OffsetCommitRequest, timeout: float) -> object:
        self._check(request)
        answer = c.OffsetCommitResponse()
        for topic in request.topics:
            result = answer.topics.add(name=topic.name)
            for p in topic.partitions:
                self.committed[(topic.name, p.partition)] = p.committed_offset
                result.partitions.add(partition=p.partition)
        return answer

    async def OffsetFetch(self, request: c.OffsetFetchRequest, timeout: float) -> object:
        self._check(request)
        answer = c.OffsetFetchResponse()
        for topic in request.topics:
            result = answer.topics.add(name=topic.topic)
            for number in topic.partitions:
                offset = self.committed.get((topic.topic, number), -1)
                result.partitions.add(partition=number, committed_offset=offset)
        return answer


def driver_over(coordinator: FakeCoordinator) -> GroupDriver:
    driver = GroupDriver(
        CONFIG, threading.Lock(), FetchState(CONFIG), ["127.0.0.1:1"], AioChannels(), lambda: None
    )
    calls = driver._coordinator
    calls._endpoint = "coordinator"
    calls.stub = lambda endpoint: coordinator  # type: ignore[method-assign,assignment,return-value]
    return driver


def test_a_refused_request_fails_at_once_with_the_coordinators_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Not split here: the request goes whole, and is refused.
    monkeypatch.setattr(group_driver, "REQUEST_PARTITIONS_MAX", 10**9)
    coordinator = FakeCoordinator()
    driver = driver_over(coordinator)
    offsets = {("t", p): OffsetAndMetadata(p) for p in range(LIMIT + 1)}
    began = time.monotonic()
    with pytest.raises(KafkaError, match="send at most") as raised:
        asyncio.run(driver.commit(offsets))
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    assert time.monotonic() - began < 1 and coordinator.requests == 1


def test_more_partitions_than_a_request_may_name_go_in_several(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(group_driver, "REQUEST_PARTITIONS_MAX", LIMIT)
    coordinator = FakeCoordinator()
    driver = driver_over(coordinator)
    wanted = [("t", p) for p in range(3 * LIMIT + 1)]

    async def main() -> dict:
        await driver.commit({tp: OffsetAndMetadata(10 + tp[1]) for tp in wanted})
        return await driver.fetch_committed(wanted)

    found = asyncio.run(main())
    assert {tp: at.offset for tp, at in found.items() if at is not None} == {
        tp: 10 + tp[1] for tp in wanted
    }
    assert coordinator.requests == 8  # 4 commits and 4 fetches of at most LIMIT partitions
