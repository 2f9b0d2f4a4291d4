"""A group coordinator stand-in for the SDK's commit retries: it answers the first OffsetCommit
STALE_MEMBER_EPOCH, after running `meanwhile` (what the test makes happen to the member while
that commit is in flight), and every later one NONE; it keeps every request it was asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c


class StaleOnceCoordinator:
    def __init__(self, meanwhile: Callable[[], object]) -> None:
        self.requests: list[c.OffsetCommitRequest] = []
        self.meanwhile = meanwhile

    async def ask(self, method: str, request: Any, error_of: Any) -> c.OffsetCommitResponse:
        assert method == "OffsetCommit"
        self.requests.append(c.OffsetCommitRequest.FromString(request.SerializeToString()))
        first = len(self.requests) == 1
        if first:
            self.meanwhile()
        code = ErrorCode.STALE_MEMBER_EPOCH if first else ErrorCode.NONE
        response = c.OffsetCommitResponse()
        for topic in request.topics:
            result = response.topics.add(name=topic.name)
            for partition in topic.partitions:
                result.partitions.add(partition=partition.partition, error_code=code)
        return response
