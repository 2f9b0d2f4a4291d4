"""Goal: fetch sessions (KIP-227) make a fetch cost what changed. An idle session's fetch reads
no partition and answers none; a partition that gets data is in the next answer, and wakes a
parked fetch; lost or repeated requests are detected by the epoch; the cache stays bounded; and
a follower driven by the session client ends up with exactly the leader's log ends and high
watermarks, as a full fetch would give it.

Method: a real PartitionHost leading many partitions of real logs in tmp_path (hand-made
metadata images, as in test_corrupt_replica_repair), and the real fetch adapter
(services/broker/requests/fetch.py) called directly on an event loop; Log.read calls are counted by
wrapping the method, so "no per-partition work" is observed rather than assumed.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, two_broker_image
from loop_turns import turns

from samsa.common.errors import ErrorCode
from samsa.common.fetch_session_client import FetchParts, FetchPosition, FetchSessionClient
from samsa.common.record.codec import build_batch
from samsa.services.broker.log.log import Log
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.replica_fetcher import _request
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.v1 import broker_pb2

TOPIC_ID = b"\x07" * 16
LEADER, FOLLOWER = 1, 2
PARTITIONS = 200


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[PartitionHost]:
    with hosting(tmp_path, two_broker_image(TOPIC_ID, PARTITIONS), LEADER) as host:
        yield host


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directory of every Log.read call, in order."""
    calls: list[Path] = []
    original = Log.read

    def counted(self: Log, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        calls.append(self.directory)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Log, "read", counted)
    return calls


def produce(host: PartitionHost, partition: int, values: int = 1) -> None:
    """What produce.py does for one batch: append, wake, move the high watermark."""
    hosted = host.get("t", partition)
    assert hosted is not None
    batch = build_batch([b"v%d" % n for n in range(values)])
    hosted.log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    hosted.notify_appended()
    hosted.advance_high_watermark()


def position(offset: int) -> FetchPosition:
    return FetchPosition(offset, 0, -1, 1 << 20)


def request(parts: FetchParts, max_wait_ms: int = 0) -> broker_pb2.FetchRequest:
    built = _request(FOLLOWER, parts)
    built.max_wait_ms = max_wait_ms
    return built


def answered(
    response: broker_pb2.FetchResponse,
) -> dict[int, broker_pb2.FetchResponse.PartitionResponse]:
    return {p.partition: p for topic in response.topics for p in topic.partitions}


def test_an_idle_session_reads_and_answers_nothing_and_data_shows_up_next(
    leader: PartitionHost, reads: list[Path]
) -> None:
    cache = FetchSessionCache()
    client = FetchSessionClient()
    for p in range(PARTITIONS):
        client.set(("t", p), position(0))

    async def scenario() -> None:
        parts = client.build()
        opening = await fetch(leader, request(parts), cache)
        assert opening.session_id != 0 and len(answered(opening)) == PARTITIONS
        client.on_answer(parts, opening.session_id)
        assert len(reads) == PARTITIONS

        reads.clear()
        parts = client.build()
        assert parts.partitions == {} and parts.session_epoch == 1
        idle = await fetch(leader, request(parts), cache)
        assert idle.error_code == ErrorCode.NONE and idle.session_id == opening.session_id
        assert answered(idle) == {} and reads == [], "an idle fetch read or answered partitions"
        client.on_answer(parts, idle.session_id)

        produce(leader, 7, values=3)
        parts = client.build()
        news = await fetch(leader, request(parts), cache)
        assert list(answered(news)) == [7] and answered(news)[7].records
        assert len(reads) == 1, "only the partition that changed was read"
        client.on_answer(parts, news.session_id)

        # The follower appended the three records: only t-7 is named, and its new position
        # moves the high watermark (ISR {1, 2}), which is news in the same answer.
        client.set(("t", 7), position(3))
        parts = client.build()
        assert list(parts.partitions) == [("t", 7)]
        moved = await fetch(leader, request(parts), cache)
        assert list(answered(moved)) == [7] and answered(moved)[7].high_watermark == 3
        client.on_answer(parts, moved.session_id)

        reads.clear()
        parts = client.build()
        quiet = await fetch(leader, request(parts), cache)
        assert answered(quiet) == {} and reads == []

    asyncio.run(scenario())


def test_a_parked_fetch_wakes_for_the_partition_that_gets_data(leader: PartitionHost) -> None:
    cache = FetchSessionCache()
    client = FetchSessionClient()
    for p in range(PARTITIONS):
        client.set(("t", p), position(0))

    async def scenario() -> broker_pb2.FetchResponse:
        parts = client.build()
        client.on_answer(parts, (await fetch(leader, request(parts), cache)).session_id)
        parts = client.build()
        parked = asyncio.ensure_future(fetch(leader, request(parts, max_wait_ms=30_000), cache))
        await turns()
        assert not parked.done(), "an idle session's fetch must wait for data"
        produce(leader, 42)
        # Bounded only so that a broken wake fails instead of hanging for 30 s.
        return await asyncio.wait_for(parked, 10)

    woken = asyncio.run(scenario())
    assert list(answered(woken)) == [42] and answered(woken)[42].records


def test_a_parked_fetch_with_nothing_new_answers_when_its_wait_ends(
    leader: PartitionHost,
) -> None:
    cache = FetchSessionCache()
    client = FetchSessionClient()
    client.set(("t", 0), position(0))

    async def scenario() -> tuple[broker_pb2.FetchResponse, float]:
        parts = client.build()
        client.on_answer(parts, (await fetch(leader, request(parts), cache)).session_id)
        parts = client.build()
        started = asyncio.get_running_loop().time()
        quiet = await asyncio.wait_for(fetch(leader, request(parts, max_wait_ms=50), cache), 10)
        return quiet, asyncio.get_running_loop().time() - started

    quiet, waited_s = asyncio.run(scenario())
    assert quiet.error_code == ErrorCode.NONE and answered(quiet) == {}
    assert waited_s >= 0.045, "the fetch must wait out its max_wait_ms"
    (session,) = cache.sessions()
    assert session.on_wake is None and not session.busy, "the park leaves no wake behind"


def test_lost_repeated_and_foreign_requests_are_caught_by_the_session_epoch(
    leader: PartitionHost,
) -> None:
    cache = FetchSessionCache()

    async def scenario() -> None:
        opening = await fetch(
            leader, request(FetchParts(0, 0, True, {("t", 0): position(0)}, ())), cache
        )
        session_id = opening.session_id
        ok = await fetch(leader, request(FetchParts(session_id, 1, False, {}, ())), cache)
        assert ok.error_code == ErrorCode.NONE
        again = await fetch(leader, request(FetchParts(session_id, 1, False, {}, ())), cache)
        assert again.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert "expects epoch 2" in again.error_message
        unknown = await fetch(leader, request(FetchParts(session_id + 1, 1, False, {}, ())), cache)
        assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        foreign = request(FetchParts(session_id, 2, False, {}, ()))
        foreign.replica_id = 3
        assert (await fetch(leader, foreign, cache)).error_code == (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )
        # Nor may another fetcher close it: a consumer naming the follower's session.
        stranger = broker_pb2.FetchRequest(session_id=session_id, session_epoch=-1)
        await fetch(leader, stranger, cache)
        assert len(cache) == 1
        # Starting over with the old id and epoch 0 closes the old session.
        restart = await fetch(
            leader, request(FetchParts(session_id, 0, True, {("t", 0): position(0)}, ())), cache
        )
        assert restart.session_id not in (0, session_id) and len(cache) == 1

    asyncio.run(scenario())


def test_a_forgotten_partition_is_neither_watched_nor_answered(leader: PartitionHost) -> None:
    cache = FetchSessionCache()
    client = FetchSessionClient()
    client.set(("t", 1), position(0))
    client.set(("t", 2), position(0))

    async def scenario() -> None:
        parts = client.build()
        client.on_answer(parts, (await fetch(leader, request(parts), cache)).session_id)
        client.set(("t", 1), None)
        parts = client.build()
        assert parts.forgotten == (("t", 1),) and parts.partitions == {}
        client.on_answer(parts, (await fetch(leader, request(parts), cache)).session_id)
        assert ("t", 1) not in leader.watchers and ("t", 2) in leader.watchers
        produce(leader, 1)
        produce(leader, 2)
        parts = client.build()
        assert list(answered(await fetch(leader, request(parts), cache))) == [2]

    asyncio.run(scenario())


def test_the_cache_is_bounded_and_a_full_cache_still_answers_full_fetches(
    leader: PartitionHost,
) -> None:
    cache = FetchSessionCache(sessions_max=1, partitions_max=10, idle_ms=1_000)
    wanted = {("t", p): position(0) for p in range(20)}

    async def scenario() -> None:
        too_big = await fetch(leader, request(FetchParts(0, 0, True, wanted, ())), cache)
        assert too_big.session_id == 0 and len(answered(too_big)) == 20 and len(cache) == 0
        few = dict(list(wanted.items())[:5])
        first = await fetch(leader, request(FetchParts(0, 0, True, few, ())), cache)
        assert first.session_id != 0
        # The one slot is in use (not idle for idle_ms): a second fetcher gets no session.
        second = await fetch(leader, request(FetchParts(0, 0, True, few, ())), cache)
        assert second.session_id == 0 and len(answered(second)) == 5
        # Growing the session past the cache's partitions closes it.
        grow = dict(list(wanted.items())[5:15])
        grown = await fetch(
            leader, request(FetchParts(first.session_id, 1, False, grow, ())), cache
        )
        assert grown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and len(cache) == 0
        assert all(not wakes for wakes in leader.watchers.values())

    asyncio.run(scenario())


def test_a_follower_fed_by_its_session_converges_on_the_leader(leader: PartitionHost) -> None:
    """Random appends between rounds of fetches, with requests lost now and then: once the
    appends stop, the follower's model log ends and high watermarks equal the leader's."""
    rng = random.Random(20261123)
    cache = FetchSessionCache()
    client = FetchSessionClient()
    ends = dict.fromkeys(range(PARTITIONS), 0)  # the follower's log end per partition
    high_watermarks = dict.fromkeys(range(PARTITIONS), 0)
    for p in range(PARTITIONS):
        client.set(("t", p), position(0))

    async def round_trip(lose: bool) -> None:
        parts = client.build()
        response = await fetch(leader, request(parts), cache)
        if lose or response.error_code:  # the answer never arrived, or the session is gone
            client.reset()
            return
        client.on_answer(parts, response.session_id)
        for p, result in answered(response).items():
            assert result.error_code == ErrorCode.NONE
            if result.records:
                ends[p] = result.next_fetch_offset
                client.set(("t", p), position(ends[p]))
            high_watermarks[p] = min(result.high_watermark, ends[p])

    async def scenario() -> None:
        for _ in range(300):
            for _ in range(rng.randrange(4)):
                produce(leader, rng.randrange(PARTITIONS), values=rng.randrange(1, 4))
            await round_trip(lose=rng.random() < 0.05)
        for _ in range(4):  # quiet: data, then the high watermarks it moves
            await round_trip(lose=False)

    asyncio.run(scenario())
    for p in range(PARTITIONS):
        hosted = leader.get("t", p)
        assert hosted is not None
        assert ends[p] == hosted.log.log_end_offset, f"t-{p}: follower log end"
        assert high_watermarks[p] == hosted.high_watermark == ends[p], f"t-{p}: high watermark"


def test_a_partition_left_out_of_a_full_answer_comes_in_the_next_fetch(
    leader: PartitionHost,
) -> None:
    """A pass skips the partitions max_bytes has no room for; the next fetch of the session must
    read them. Neither dirty nor named again (their position did not move), they were left
    unread until their next append: a partition that got none was never delivered."""
    cache = FetchSessionCache()
    client = FetchSessionClient()
    for p in range(3):
        produce(leader, p)
        client.set(("t", p), position(0))
    one_batch = len(build_batch([b"v0"]))
    delivered: set[int] = set()

    async def scenario() -> None:
        for _ in range(4):
            parts = client.build()
            built = request(parts)
            built.max_bytes = one_batch  # room for one partition's batch per answer
            response = await fetch(leader, built, cache)
            assert response.error_code == ErrorCode.NONE
            client.on_answer(parts, response.session_id)
            for p, result in answered(response).items():
                if result.records:
                    delivered.add(p)
                    client.set(("t", p), position(result.next_fetch_offset))

    asyncio.run(scenario())
    assert delivered == {0, 1, 2}


def test_a_follower_fetch_that_leaves_partitions_for_later_does_not_long_poll() -> None:
    """More partitions from one leader than a request may name: the fetch naming the first of
    them answers at once, so the rest are named without a long poll's wait each."""
    position = FetchPosition(0, -1, 0, 1 << 20)
    some = FetchParts(0, 0, True, {("t", 0): position}, (), more=True)
    every = FetchParts(0, 0, True, {("t", 0): position}, ())
    assert _request(7, some).max_wait_ms == 0
    assert _request(7, every).max_wait_ms > 0
