"""Goal: a follower starts fetching a partition that just moved to a leader it already follows at
once, not after the long-poll its fetch loop is parked in (a rolling restart measured 380–520 ms
acks=all stalls from that), and a partition refused only because the leader has not applied the
move yet is fetched again after LEADER_BEHIND_BACKOFF_S, not the general error backoff.

Method: `ReplicaFetchers` (services/broker/replica/replica_fetcher.py) on an event loop against an
in-memory host and a fake link in place of the stream: the link records every request and parks
each fetch until the test answers it or the loop cuts it short (raising a CancelledError without
the cancellation's message, as grpc.aio does), so no step depends on timing. A fetch loop that
ended for any reason is started again by the next metadata change.
`_leader_behind` is a pure function, tested on answers as a leader writes them.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from samsa.common.errors import ErrorCode
from samsa.services.broker.replica import replica_fetcher
from samsa.services.broker.replica.replica_fetcher import ReplicaFetchers, _leader_behind
from samsa.services.broker.replica.replication_throttle import ReplicationThrottles
from samsa.v1 import broker_pb2

FOLLOWER, LEADER = 3, 2
IDLE, MOVED = ("idle", 0), ("moved", 0)


def hosted(leader_epoch: int = 1) -> SimpleNamespace:
    """A partition this broker follows, as the fetcher reads it."""
    log = SimpleNamespace(log_end_offset=10, latest_epoch=leader_epoch, log_start_offset=0)
    return SimpleNamespace(
        is_leader=False,
        leader_id=LEADER,
        leader_epoch=leader_epoch,
        isr=(LEADER, FOLLOWER),
        corrupt_from=None,
        log=log,
        topic_id=b"\x01" * 16,
    )


class Host:
    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], SimpleNamespace] = {}
        self.corrupt_partitions: set[tuple[str, int]] = set()
        self.image = SimpleNamespace(
            brokers={LEADER: SimpleNamespace(endpoint="leader:1")}, configs={}, topics={}
        )
        self.throttles = ReplicationThrottles(FOLLOWER)  # no rate set: never throttled

    def get(self, topic: str, partition: int) -> SimpleNamespace | None:
        return self.partitions.get((topic, partition))


class ParkingLink:
    """Stands in for the stream to the leader: each fetch waits until answered or cancelled."""

    def __init__(self) -> None:
        self.requests: list[broker_pb2.FetchRequest] = []
        self.cancelled = 0
        self.arrived = asyncio.Event()
        self._answer: asyncio.Future[broker_pb2.FetchResponse] | None = None

    async def fetch(self, channel: object, request: broker_pb2.FetchRequest, timeout_s: float):
        self.requests.append(request)
        self.arrived.set()
        self._answer = asyncio.get_running_loop().create_future()
        try:
            return await self._answer
        except asyncio.CancelledError:
            self.cancelled += 1
            raise asyncio.CancelledError() from None  # as grpc.aio: the message is dropped

    def close(self) -> None:
        pass


def named(request: broker_pb2.FetchRequest) -> set[tuple[str, int]]:
    return {(topic.name, p.partition) for topic in request.topics for p in topic.partitions}


async def next_request(link: ParkingLink) -> broker_pb2.FetchRequest:
    link.arrived.clear()
    await asyncio.wait_for(link.arrived.wait(), 5)
    return link.requests[-1]


async def following_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Host, ReplicaFetchers, ParkingLink, broker_pb2.FetchRequest]:
    """Fetchers following IDLE from LEADER, their first fetch parked at the fake link."""
    link = ParkingLink()
    monkeypatch.setattr(replica_fetcher, "leader_link", lambda signer: link)
    host = Host()
    fetchers = ReplicaFetchers(host, FOLLOWER, SimpleNamespace(member_id=FOLLOWER))  # type: ignore[arg-type]
    monkeypatch.setattr(fetchers, "_channel", lambda leader_id: object())
    host.partitions[IDLE] = hosted()
    fetchers.reconcile([IDLE])
    return host, fetchers, link, await next_request(link)


def test_a_partition_moving_to_a_followed_leader_cuts_its_long_poll_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        host, fetchers, link, first = await following_idle(monkeypatch)
        try:
            assert named(first) == {IDLE}  # parked: the idle partition has nothing new
            host.partitions[MOVED] = hosted()  # the metadata log moved MOVED to the same leader
            fetchers.reconcile([MOVED])
            second = await next_request(link)
            assert link.cancelled == 1, "the parked fetch was cut short"
            assert named(second) == {IDLE, MOVED}, "a full fetch that names the moved partition"
            assert second.session_epoch == 0, "the session started over"
            assert not fetchers._loops[LEADER].done(), "the loop lives on after the cut"
            fetchers.reconcile([MOVED])  # nothing new for this leader: the fetch stays parked
            await asyncio.sleep(0)
            assert link.cancelled == 1 and len(link.requests) == 2
        finally:
            await fetchers.close()  # a parked loop stops on close (not taken for a cut)

    asyncio.run(run())


def test_a_loop_that_stops_following_is_not_taken_for_a_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        host, fetchers, _, _ = await following_idle(monkeypatch)
        try:
            loop_task = fetchers._loops[LEADER]
            del host.partitions[IDLE]  # no longer hosted here: the loop for LEADER ends
            fetchers.reconcile([IDLE])
            await asyncio.gather(loop_task, return_exceptions=True)
            assert loop_task.cancelled() and LEADER not in fetchers._loops
        finally:
            await fetchers.close()

    asyncio.run(run())


def test_a_loop_that_ended_is_started_again_by_the_next_reconcile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        host, fetchers, link, _ = await following_idle(monkeypatch)
        try:
            dead = fetchers._loops[LEADER]
            dead.cancel()  # as a bug would end it
            await asyncio.gather(dead, return_exceptions=True)
            host.partitions[MOVED] = hosted()
            fetchers.reconcile([MOVED])
            assert named(await next_request(link)) == {IDLE, MOVED}
            assert fetchers._loops[LEADER] is not dead
        finally:
            await fetchers.close()

    asyncio.run(run())


def answer(code: ErrorCode, leader_epoch: int | None = None):  # type: ignore[no-untyped-def]
    result = broker_pb2.FetchResponse.PartitionResponse(error_code=code)
    if leader_epoch is not None:
        result.current_leader.leader_id = 1
        result.current_leader.leader_epoch = leader_epoch
    return result


@pytest.mark.parametrize(
    ("result", "behind"),
    [
        (answer(ErrorCode.UNKNOWN_LEADER_EPOCH), True),
        (answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=4), True),
        (answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=5), False),
        (answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=6), False),
        (answer(ErrorCode.NOT_LEADER_OR_FOLLOWER), False),
        (answer(ErrorCode.FENCED_LEADER_EPOCH), False),
        (answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), False),
    ],
    ids=[
        "unknown epoch",
        "names the leader before",
        "names our leader",
        "names a newer one",
        "names none",
        "we are behind",
        "other error",
    ],
)
def test_only_a_leader_behind_our_metadata_gets_the_short_backoff(result, behind) -> None:  # type: ignore[no-untyped-def]
    assert _leader_behind(hosted(leader_epoch=5), result) is behind  # type: ignore[arg-type]
