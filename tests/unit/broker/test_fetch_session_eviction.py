"""Goal: no fetcher can keep the broker's fetch sessions (KIP-227) from its followers. Any client
may open sessions, naming up to request_partitions_max partitions each (existing or not); the
cache holds a bounded count of partitions in all. A follower must still get a session once the
cache is full of consumers' sessions (Kafka's privileged eviction), and anyone once the sessions
holding the room have been idle for the eviction time. Without that a stranger's few fetches
turned every follower's fetch into a full one, for as long as the broker ran.

Method: the real fetch adapter (services/broker/requests/fetch.py) over real logs in tmp_path,
with a small cache; the sessions opened are read back from the cache.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, single_broker_image

from samsa.metadata.image import PartitionState
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.v1 import broker_pb2

TOPIC_ID = b"\x0d" * 16
LEADER, FOLLOWER = 1, 2


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[PartitionHost]:
    states = {p: PartitionState(p, (1, 2), (1, 2), LEADER, 0, 0) for p in range(4)}
    image = single_broker_image({"t": (TOPIC_ID, states)})
    with hosting(tmp_path, image, broker_id=LEADER) as host:
        yield host


def opening(topic: str, partitions: int, replica_id: int | None) -> broker_pb2.FetchRequest:
    wanted = [
        broker_pb2.FetchRequest.PartitionData(partition=p, fetch_offset=0)
        for p in range(partitions)
    ]
    request = broker_pb2.FetchRequest(
        session_id=0,
        session_epoch=0,
        topics=[broker_pb2.FetchRequest.TopicData(name=topic, partitions=wanted)],
    )
    if replica_id is not None:
        request.replica_id = replica_id
    return request


def test_a_follower_evicts_consumers_sessions_that_fill_the_cache(
    leader: PartitionHost,
) -> None:
    cache = FetchSessionCache(sessions_max=10, partitions_max=100, idle_ms=3_600_000)

    async def scenario() -> tuple[int, int]:
        # A stranger's two fetches, naming partitions that do not even exist, fill the cache.
        for _ in range(2):
            taken = await fetch(leader, opening("nope", 50, replica_id=None), cache)
            assert taken.session_id != 0
        follower = await fetch(leader, opening("t", 4, replica_id=FOLLOWER), cache)
        # 46 partitions are free: a consumer asking for 50 gets no session, as it evicts none.
        consumer = await fetch(leader, opening("nope", 50, replica_id=None), cache)
        return follower.session_id, consumer.session_id

    follower_session, consumer_session = asyncio.run(scenario())
    assert follower_session != 0, "the follower got no session: every fetch of it is full"
    assert consumer_session == 0, "a consumer does not evict a session in use"
    assert cache.partitions_held() <= 100
    watches = sum(len(wakes) for wakes in leader.watchers.values())
    assert watches == cache.partitions_held(), "an evicted session left its watches behind"


def test_sessions_idle_for_the_eviction_time_make_room_for_partitions(
    leader: PartitionHost,
) -> None:
    cache = FetchSessionCache(sessions_max=10, partitions_max=100, idle_ms=1)

    async def scenario() -> int:
        taken = await fetch(leader, opening("nope", 100, replica_id=None), cache)
        assert taken.session_id != 0
        time.sleep(0.01)  # ten times the eviction time
        later = await fetch(leader, opening("t", 4, replica_id=None), cache)
        return later.session_id

    assert asyncio.run(scenario()) != 0, "an idle session kept a new one out"
    assert len(cache) == 1 and cache.partitions_held() == 4
