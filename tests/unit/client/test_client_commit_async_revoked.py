"""Goal: a commit handed over before a revocation never commits the revoked partition, also when
its task first runs after the revocation (an AsyncConsumer's commit_async() and then a poll()
whose synchronous listener call revokes, with nothing in between yielding to the loop). What the
member owned was taken when the task first ran: the revoked partition then looked like one it
never had, and a STALE_MEMBER_EPOCH retry sent its offset at the new epoch, although another
member may own it and have committed further.

Method: the real GroupDriver and GroupMember with its coordinator calls answered by a stand-in;
the heartbeats and the revocation (rebalance.py's steps) driven by hand.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_calls import offsets_to_commit
from samsa.client.fetch_state import FetchState
from samsa.client.group_commit import CommitFailedError
from samsa.client.group_driver import GroupDriver
from samsa.client.group_member import GroupMember, Subscription
from samsa.client.heartbeat_fields import partitions_to_proto
from samsa.client.rebalance import begin_step, end_step
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

A, B = ("orders", 0), ("orders", 1)
CONFIG = ConsumerConfig.from_dict(
    {"bootstrap.servers": "x:1", "group.id": "g", "enable.auto.commit": False}
)


class Holder:
    """What offsets_to_commit reads of a consumer driver."""

    def __init__(self, lock: threading.Lock, state: FetchState) -> None:
        self.lock, self.state = lock, state


def assigned(member: GroupMember, state: FetchState, epoch: int, *partitions: int) -> None:
    """A heartbeat answered with this assignment at this epoch, and its steps run."""
    member.heartbeat_request(0)
    assignment = partitions_to_proto(frozenset(("orders", p) for p in partitions))
    answer = c.ConsumerGroupHeartbeatResponse(
        member_id=member.settings.member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=1000,
        assignment=assignment,
    )
    member.on_heartbeat_answer(answer, 0)
    while (step := begin_step(member, state, False)) is not None:
        end_step(member, state, step, 0)


@pytest.mark.parametrize("task_starts_first", [True, False])
def test_a_commit_handed_over_before_a_revocation_never_commits_the_revoked_partition(
    task_starts_first: bool,
) -> None:
    async def run() -> tuple[list[c.OffsetCommitRequest], BaseException | None]:
        lock = threading.Lock()
        state = FetchState(CONFIG)
        group = GroupDriver(CONFIG, lock, state, ["x:1"], None, lambda: None)  # type: ignore[arg-type]
        group._loop = asyncio.get_running_loop()
        member = group.member
        member.subscribe(Subscription(topics=frozenset({"orders"})), 0)
        assigned(member, state, 1, 0, 1)
        state.seek(A, 10)
        state.seek(B, 20)
        sent: list[c.OffsetCommitRequest] = []

        async def ask(method: str, request: c.OffsetCommitRequest, error_of: object) -> object:
            sent.append(request)
            code = ErrorCode.STALE_MEMBER_EPOCH if len(sent) == 1 else ErrorCode.NONE
            results = [
                c.OffsetCommitTopicResult(
                    name=topic.name,
                    partitions=[
                        c.OffsetCommitPartitionResult(partition=p.partition, error_code=code)
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ]
            return c.OffsetCommitResponse(topics=results)

        group._coordinator.ask = ask  # type: ignore[method-assign]
        task = group.spawn(group.commit(offsets_to_commit(Holder(lock, state), None)))
        if task_starts_first:
            await asyncio.sleep(0)
        assigned(member, state, 2, 1)  # A revoked at epoch 2
        try:
            await task
        except BaseException as error:  # what the task ended with
            return sent, error
        return sent, None

    sent, error = asyncio.run(run())
    assert isinstance(error, CommitFailedError), error
    named = [{(t.name, p.partition) for t in r.topics for p in t.partitions} for r in sent]
    assert not [
        r for r, names in zip(sent, named, strict=True) if r.member_epoch == 2 and A in names
    ]
