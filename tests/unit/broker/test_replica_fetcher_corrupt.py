"""Goal: a partition the follower stopped fetching because the scrubber found its own log corrupt
is fetched again once repaired, also when it was the only partition this broker follows from
that leader and the repair came from the scrubber's repair loop rather than a metadata change
(the replica was already outside the ISR: catching up after a restart); and one repaired before
the fetcher ever left it out is fetched from its new log end at once, never reported to the
leader at the end it had before the repair cut it.

Method: `ReplicaFetchers` against the in-memory host and parking link of
test_replica_fetcher_leadership.py. The partition is marked corrupt, the fetcher leaves it out
of its session, then the repair truncates it with no reconcile; a fetch naming it must follow.
Before the fix the loop found its session empty and slept, and only looked for repaired
partitions when the session had others: none ever came.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from samsa.services.broker.replica import replica_fetcher
from samsa.services.broker.replica.replica_fetcher import ReplicaFetchers
from samsa.v1 import broker_pb2
from tests.unit.broker.test_replica_fetcher_leadership import (
    FOLLOWER,
    IDLE,
    LEADER,
    Host,
    ParkingLink,
    hosted,
    named,
    next_request,
)


def test_the_only_partition_from_a_leader_is_fetched_again_once_repaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replica_fetcher, "ERROR_BACKOFF_S", 0.01)

    async def run() -> None:
        link = ParkingLink()
        monkeypatch.setattr(replica_fetcher, "leader_link", lambda signer: link)
        host = Host()
        signer = SimpleNamespace(member_id=FOLLOWER)
        fetchers = ReplicaFetchers(host, FOLLOWER, signer)  # type: ignore[arg-type]
        monkeypatch.setattr(fetchers, "_channel", lambda leader_id: object())
        partition = hosted()
        partition.isr = (LEADER,)  # outside the ISR: the repair needs no metadata change
        host.partitions[IDLE] = partition
        fetchers.reconcile([IDLE])
        try:
            assert named(await next_request(link)) == {IDLE}
            partition.corrupt_from = 5  # the scrubber marks it (PartitionHost.mark_corrupt)
            host.corrupt_partitions.add(IDLE)
            for _ in range(5):  # answer what comes meanwhile
                if link._answer is not None and not link._answer.done():
                    link._answer.set_result(broker_pb2.FetchResponse(session_id=7))
                await asyncio.sleep(0.02)
            assert not fetchers._sessions[LEADER].wanted, "left out while corrupt"
            sent = len(link.requests)
            # PartitionHost.repair_corrupt, run by the scrubber's repair loop: truncated.
            partition.corrupt_from = None
            partition.log.log_end_offset = 5
            host.corrupt_partitions.discard(IDLE)
            request = await next_request(link)
            assert len(link.requests) > sent
            assert named(request) == {IDLE}
            assert request.topics[0].partitions[0].fetch_offset == 5
        finally:
            await fetchers.close()

    asyncio.run(run())


def test_a_partition_repaired_while_its_fetch_is_parked_is_fetched_from_its_new_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Marked and repaired between two fetches (the scrubber's repair loop runs every 250 ms,
    an idle partition's fetch is parked up to 500 ms), the replica was never left out of its
    session, so nothing moved its position there: being outside the ISR, it named its old log
    end (10) in every request although its log now ended at 5, skipped every answer the leader
    sent from 10 (not current), and the leader counted it at 10, enough to propose it for the
    ISR without the records it cut. `repaired` (PartitionHost.on_repaired) cuts the parked
    fetch, and the next one names 5."""

    async def run() -> None:
        link = ParkingLink()
        monkeypatch.setattr(replica_fetcher, "leader_link", lambda signer: link)
        host = Host()
        signer = SimpleNamespace(member_id=FOLLOWER)
        fetchers = ReplicaFetchers(host, FOLLOWER, signer)  # type: ignore[arg-type]
        monkeypatch.setattr(fetchers, "_channel", lambda leader_id: object())
        partition = hosted()
        partition.isr = (LEADER,)
        host.partitions[IDLE] = partition
        fetchers.reconcile([IDLE])
        try:
            assert (await next_request(link)).topics[0].partitions[0].fetch_offset == 10
            partition.log.log_end_offset = 5  # marked corrupt at 5 and truncated, while parked
            fetchers.repaired([IDLE])
            request = await next_request(link)
            assert link.cancelled == 1, "the parked fetch was cut short"
            assert request.session_epoch == 0, "the session started over"
            assert named(request) == {IDLE}
            assert request.topics[0].partitions[0].fetch_offset == 5
        finally:
            await fetchers.close()

    asyncio.run(run())
