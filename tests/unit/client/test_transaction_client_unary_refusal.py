"""Goal: a request the coordinator refuses (INVALID_ARGUMENT, RESOURCE_EXHAUSTED) fails at once
when sent as a unary call, as it does on the TransactionStream. The unary path took the status
from `grpc.Call`, which grpc.aio's errors are not: every refusal was read as "no answer", sent
again until the caller's deadline (60 s by default) and reported as "did not answer". Unary calls
are all there is while the application traces, or against a coordinator without the stream.

Method: a TransactionClient against a loopback fake coordinator without TransactionStream
(fake_offsets_coordinator.py) that refuses a TxnOffsetCommit naming more offsets than one may.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from fake_offsets_coordinator import FakeOffsetsCoordinator, serving

from samsa.client.channels import AioChannels
from samsa.client.errors import KafkaError
from samsa.client.transaction_client import TransactionClient
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x


def test_a_refused_unary_call_fails_at_once_with_the_coordinators_message() -> None:
    request = x.TxnOffsetCommitRequest(group_id="g")
    topic = request.topics.add(name="t")
    for number in range(limits.admin_request_items_max + 1):
        topic.partitions.add(partition=number, committed_offset=1)

    async def main(endpoint: str) -> None:
        channels = AioChannels()
        client = TransactionClient(channels, lambda: [endpoint], "t", 60_000)
        try:
            deadline = asyncio.get_running_loop().time() + 10
            await client._call(
                c.COORDINATOR_KEY_TYPE_GROUP, "TxnOffsetCommit", request, deadline, key="g"
            )
        finally:
            await client.close()
            await channels.close()

    fake = FakeOffsetsCoordinator()
    began = time.monotonic()
    with serving(fake) as endpoint, pytest.raises(KafkaError, match="send at most") as raised:
        asyncio.run(main(endpoint))
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    assert time.monotonic() - began < 5  # not sent again until the deadline (10 s)
    assert [method for method, _ in fake.requests] == ["TxnOffsetCommit"]
