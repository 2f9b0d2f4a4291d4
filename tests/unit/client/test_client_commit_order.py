"""Goal: a consumer's commits land in the order they were made, so an older one retried after a
STALE_MEMBER_EPOCH cannot overwrite a newer one. An auto-commit spawned by poll() that was
refused at the old epoch sleeps retry.backoff.ms and is sent again; the commit before
on_partitions_revoked, made meanwhile with the positions the application reached since, used to
land first, and the retry then moved the partition's committed offset back: its next owner read
again what this member had processed. Commits are now sent one after the other (as Kafka's
consumer makes commitSync wait for the async commits before it).

Method: a GroupDriver whose coordinator calls are a fake keeping the last committed offset per
partition, answering the first OffsetCommit STALE_MEMBER_EPOCH; a second commit is started while
the first waits to retry.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver
from samsa.client.group_member import MemberState
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

TP = ("orders", 0)


class FakeCoordinator:
    def __init__(self) -> None:
        self.asked = 0
        self.committed: dict[tuple[str, int], int] = {}

    async def ask(self, method: str, request: Any, error_of: Any) -> c.OffsetCommitResponse:
        self.asked += 1
        stale = self.asked == 1
        response = c.OffsetCommitResponse()
        for topic in request.topics:
            result = response.topics.add(name=topic.name)
            for p in topic.partitions:
                code = ErrorCode.STALE_MEMBER_EPOCH if stale else ErrorCode.NONE
                if not stale:
                    self.committed[(topic.name, p.partition)] = p.committed_offset
                result.partitions.add(partition=p.partition, error_code=code)
        return response


def test_an_older_commit_retried_after_stale_epoch_does_not_overwrite_a_newer_one() -> None:
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": "x:1", "group.id": "g", "retry.backoff.ms": 50}
    )
    group = GroupDriver(
        config, threading.Lock(), FetchState(config), ["x:1"], AioChannels(), lambda: None
    )
    group.member.state = MemberState.STABLE
    group.member.member_epoch = 5
    group.member.owned = frozenset({TP})
    fake = FakeCoordinator()
    group._coordinator = fake  # type: ignore[assignment]

    async def main() -> None:
        older = asyncio.ensure_future(group.commit({TP: OffsetAndMetadata(100)}))
        while fake.asked == 0:  # the older one was refused and now waits to retry
            await asyncio.sleep(0)
        await group.commit({TP: OffsetAndMetadata(150)})  # e.g. before on_partitions_revoked
        await older

    asyncio.run(main())
    assert fake.committed == {TP: 150}, "the newer commit is the one that stays"
