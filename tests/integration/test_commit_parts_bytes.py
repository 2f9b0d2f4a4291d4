"""The Python SDK's OffsetCommit and TxnOffsetCommit of more bytes than one batch of
__consumer_offsets holds (group_driver.commit, transaction_client.add_offsets).

Goal: a commit's records are written as one batch, and the coordinator refuses a commit whose
records would not fit (RESOURCE_EXHAUSTED, group_offsets.commit_size_problem); the broker refuses
such a transactional batch too. The SDK split commits only by partition count, so a consumer of a
few thousand partitions with long names (4,000 of a 200-character topic: 1.1 MB) failed every
commit, each part being under the count limit. Now each request also stays under the
coordinator's byte bound; the parts go in order and every offset lands.

Method: GroupDriver and TransactionClient on an event loop against a fake coordinator on loopback
gRPC (fake_offsets_coordinator.py) that refuses with the coordinator's own checks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping

import pytest
from fake_offsets_coordinator import FakeOffsetsCoordinator, serving

from samsa.client.channels import AioChannels
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver
from samsa.client.transaction_client import TransactionClient
from samsa.common import limits

pytestmark = pytest.mark.timeout(60)

GROUP = "consumer-group-of-the-pipeline"  # 30 characters
TOPIC = "t" * 200


def commit_and_read(
    endpoint: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata]
) -> dict[tuple[str, int], int]:
    """`offsets` committed by a GroupDriver (outside the group protocol), then read back."""
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": endpoint, "group.id": GROUP, "default.api.timeout.ms": 10_000}
    )

    async def main() -> dict[tuple[str, int], int]:
        channels = AioChannels()
        driver = GroupDriver(
            config, threading.Lock(), FetchState(config), [endpoint], channels, lambda: None
        )
        try:
            await driver.commit(offsets)
            found = await driver.fetch_committed(list(offsets))
        finally:
            await channels.close()
        return {tp: at.offset for tp, at in found.items() if at is not None}

    return asyncio.run(main())


def test_a_commit_over_one_batch_goes_in_parts_under_the_bound_in_order() -> None:
    fake = FakeOffsetsCoordinator()
    wanted = {(TOPIC, p): OffsetAndMetadata(10**9 + p, 3, "m" * 20) for p in range(4_000)}
    with serving(fake) as endpoint:
        found = commit_and_read(endpoint, wanted)
    assert fake.refusals == []
    assert found == {tp: at.offset for tp, at in wanted.items()}
    parts = [partitions for method, partitions in fake.requests if method == "OffsetCommit"]
    assert len(parts) == 2
    assert [tp for part in parts for tp in part] == list(wanted)  # each once, in order


def test_metadata_counts_toward_the_bound() -> None:
    # 300 partitions of 4 KiB of metadata (1.3 MB): a handful of parts, where the count alone
    # would send one.
    fake = FakeOffsetsCoordinator()
    wanted = {("short", p): OffsetAndMetadata(p, -1, "é" * 2048) for p in range(300)}
    with serving(fake) as endpoint:
        found = commit_and_read(endpoint, wanted)
    assert fake.refusals == []
    assert found == {tp: at.offset for tp, at in wanted.items()}
    assert len(fake.requests) > 1


def test_txn_offsets_over_one_batch_go_in_parts_under_the_bound() -> None:
    # A group id of 255 four-byte characters and the longest topic name: 1,000 offsets (the
    # most one TxnOffsetCommit may name) take 1.34 MB, over one batch.
    fake = FakeOffsetsCoordinator()
    group_id = "\U0001d11e" * limits.group_id_length_max
    topic = "x" * limits.topic_name_length_max
    wanted = {(topic, p): 10**12 + p for p in range(2 * limits.admin_request_items_max)}

    async def main(endpoint: str) -> None:
        channels = AioChannels()
        client = TransactionClient(channels, lambda: [endpoint], "t", 60_000)
        try:
            deadline = asyncio.get_running_loop().time() + 30
            await client.add_offsets((7, 0), wanted, group_id, "", -1, deadline)
        finally:
            await client.close()
            await channels.close()

    with serving(fake) as endpoint:
        asyncio.run(main(endpoint))
    assert fake.refusals == []
    assert fake.committed == wanted
    parts = [partitions for method, partitions in fake.requests if method == "TxnOffsetCommit"]
    assert len(parts) > 2  # more than the count limit alone makes
    assert [tp for part in parts for tp in part] == sorted(wanted)
