"""Acknowledging acks=all produces once replicated: asyncio waits on the partitions' events."""

from __future__ import annotations

import asyncio
import contextlib

from samsa.common.errors import ErrorCode
from samsa.services.broker.requests.fetch import first_of
from samsa.services.broker.requests.produce import ReplicationWait, fail


def settled(wait: ReplicationWait) -> bool:
    """Whether an acks=all append is answered now (its result says how): the high watermark
    passed it (success), leadership moved (NOT_LEADER_OR_FOLLOWER, naming the new leader as
    KIP-951 asks), or the ISR fell below min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    Leadership that moved counts even if it came back before this look (a later leader epoch):
    the log may have been truncated and rewritten meanwhile, so a high watermark past the
    append no longer says that the records at its offsets are the ones it wrote.
    No I/O: the replication simulation (tests/unit/broker/test_replication_simulation.py) settles
    its produces with it after every step, as the waits here do on every wake-up."""
    hosted = wait.hosted
    moved = not hosted.is_leader or hosted.leader_epoch != wait.leader_epoch
    if not moved and hosted.high_watermark >= wait.end_offset:
        return True
    if moved:
        fail(
            wait.result,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            "leadership moved before the write was replicated; retry at the new leader",
        )
        if hosted.leader_id >= 0:  # KIP-951: the producer retries there at once
            wait.result.current_leader.leader_id = hosted.leader_id
            wait.result.current_leader.leader_epoch = hosted.leader_epoch
        return True
    if len(hosted.isr) < hosted.min_insync_replicas:
        fail(
            wait.result,
            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            f"written to the leader, but the ISR {list(hosted.isr)} fell below "
            f"min.insync.replicas={hosted.min_insync_replicas} before it replicated",
        )
        return True
    return False


async def await_replication(waits: list[ReplicationWait], timeout_s: float) -> None:
    """Answer acks=all appends once the high watermark passes them: NOT_ENOUGH_REPLICAS_AFTER_
    APPEND if the ISR fell below min.insync.replicas meanwhile, REQUEST_TIMED_OUT after the
    request's timeout. Waits on the partitions' events, no thread parked per request."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pending = list(waits)
    while pending:
        pending = [wait for wait in pending if not settled(wait)]
        remaining = deadline - loop.time()
        if not pending:
            return
        if remaining <= 0:
            for wait in pending:
                fail(
                    wait.result,
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"not replicated to the ISR within {timeout_s * 1000:.0f} ms",
                )
            return
        if len(pending) == 1:  # the usual case: one partition, waited on with no extra task
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await pending[0].hosted.data_arrived.wait()
        else:
            await first_of([wait.hosted.data_arrived for wait in pending], remaining)
