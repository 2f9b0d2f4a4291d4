"""Goal: while an assigned partition has no leader in the metadata (its topic was deleted under an
assign(), or it is offline), the consumer driver refreshes the metadata with a backoff
(retry.backoff.ms, doubling up to REFRESH_BACKOFF_MAX_S, as Kafka's KIP-580 metadata backoff)
rather than on every turn. Before, every fetch answer of the consumer's other partitions woke the
driver, which refreshed again at once: DescribeTopics back to back against the controllers, for
as long as the partition stayed leaderless (for ever, for a deleted topic); with nothing else to
fetch, every 50 ms.

Method: the ConsumerDriver on an event loop with a fake metadata that never learns T1's leader
and counts refreshes, and a fake broker (test_client_consumer_driver.py's) that the test answers:
T0's fetches are answered with nothing 30 times in a row, which used to mean 30 refreshes.
"""

from __future__ import annotations

import asyncio

from test_client_consumer_driver import T0, T1, FakeBroker, FakeLink, answer, turns

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import ConsumerDriver


class LeaderlessMetadata:
    """T1 has no leader, whatever a refresh says."""

    def __init__(self) -> None:
        self.leaders = {T0: 1}
        self.leader_epochs = {T0: 0}
        self.topic_ids: dict[str, bytes] = {}
        self.endpoints = {1: "broker-1"}
        self.partition_counts = {"t": 2}
        self.stale = False
        self.refreshes = 0

    def needs_refresh(self) -> bool:
        return self.stale

    def mark_stale(self) -> None:
        self.stale = True

    def refresh(self, topics: object = ()) -> None:
        self.refreshes += 1
        self.stale = False

    def keep(self, topics: object) -> None:
        pass


def test_a_leaderless_partition_does_not_refresh_the_metadata_on_every_turn() -> None:
    async def main() -> None:
        broker = FakeBroker()
        metadata = LeaderlessMetadata()
        config = ConsumerConfig.from_dict({"bootstrap.servers": "localhost:1"})
        driver = ConsumerDriver(config, metadata, lambda: None)  # type: ignore[arg-type]
        driver._stub = lambda endpoint: broker  # type: ignore[method-assign]
        driver._new_link = lambda: FakeLink(broker)  # type: ignore[assignment,return-value]
        await driver.start()
        try:
            with driver.lock:
                driver.state.assign([T0, T1])
                driver.state.seek(T0, 0)
                driver.state.seek(T1, 0)
            driver.wake()
            for _ in range(30):
                for _ in range(100):  # to_thread (the refresh) needs real time, not turns
                    if broker.fetches:
                        break
                    await asyncio.sleep(0.001)
                broker.fetches.pop()[1].set_result(answer())
                await turns()
            assert metadata.refreshes <= 2, f"{metadata.refreshes} refreshes in 30 turns"
        finally:
            for _, pending in broker.fetches:
                pending.cancel()
            await driver.stop()

    asyncio.run(main())
