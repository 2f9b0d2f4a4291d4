"""Goal: a leader's log start that retention moved reaches its followers' fetch sessions. A
follower in an incremental session (KIP-227) is answered only about partitions that changed;
retention deleting a partition's records (all of them, once the active segment goes too) is such
a change, as in Kafka, whose sessions answer a partition whose log start offset moved. Before,
an idle partition's followers were never told: their log start (and the leader's low watermark,
which a DeleteRecords waits for) stayed where it was.

Method: a real PartitionHost leading one partition of a real log in tmp_path, the real fetch
adapter and the session client, and the maintenance pass's retention (`retention_pass`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_host import hosting, two_broker_image

from samsa.common.fetch_session_client import FetchPosition, FetchSessionClient
from samsa.common.record.codec import build_batch
from samsa.services.broker.maintenance import retention_pass
from samsa.services.broker.replica.replica_fetcher import _request
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.fetch_session import FetchSessionCache

TOPIC_ID = b"\x09" * 16
LEADER, FOLLOWER = 1, 2


def test_retention_of_an_idle_partition_reaches_the_followers_session(tmp_path: Path) -> None:
    image = two_broker_image(TOPIC_ID, 1, {"retention.ms": "1000"})
    with hosting(tmp_path, image, LEADER) as host:
        hosted = host.get("t", 0)
        assert hosted is not None
        batch = build_batch([b"a", b"b"], timestamps=5)
        hosted.log.append_as_leader(batch, leader_epoch=0, now_ms=5)
        hosted.notify_appended()
        client, sessions = FetchSessionClient(), FetchSessionCache()

        async def fetched(offset: int) -> dict[int, object]:
            client.set(("t", 0), FetchPosition(offset, 0, -1, 1 << 20, log_start_offset=0))
            parts = client.build()
            response = await fetch(host, _request(FOLLOWER, parts), sessions)
            client.on_answer(parts, response.session_id)
            return {p.partition: p for topic in response.topics for p in topic.partitions}

        async def scenario() -> None:
            assert (await fetched(0))[0].records  # opens the session with the two records
            assert (await fetched(2))[0].high_watermark == 2  # the follower holds them
            assert await fetched(2) == {}, "an idle partition is not answered"
            retention_pass(host, now_ms=10_000, producer_id_expiration_ms=1 << 40)
            assert (hosted.log.log_start_offset, hosted.log.log_end_offset) == (2, 2)
            told = await fetched(2)
            assert 0 in told, "the follower was not told that the leader's log start moved"
            assert told[0].log_start_offset == 2

        asyncio.run(scenario())
