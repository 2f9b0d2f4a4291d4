"""Goal: max.partition.fetch.bytes=0 and fetch.max.bytes=0, the lowest values Kafka (and the
consumer's config) accept, mean what they mean in Kafka: no bytes but the one batch KIP-74 lets
through, so a fetch reads one batch. They went out as 0, which the broker reads as unset
(broker.proto): 1 MiB a partition, 50 MiB an answer, so the setting was silently ignored and a
fetch of three batches read all three. The consumer now sends them as 1.

Method: the pure FetchState plans the fetch; a real broker host (logs in a temp dir) answers it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.common.record.codec import build_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2

T0 = ("t", 0)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    image = single_broker_image({"t": (b"\x0b" * 16, led_partitions(1))})
    with hosting(tmp_path, image) as hosted:
        for _ in range(3):
            data = broker_pb2.ProduceRequest.PartitionData(
                partition=0, records=build_batch([b"x" * 100])
            )
            topic = broker_pb2.ProduceRequest.TopicData(name="t", partitions=[data])
            answer, _ = produce(hosted, broker_pb2.ProduceRequest(acks=1, topics=[topic]), 5)
            assert answer.topics[0].partitions[0].error_code == 0
        yield hosted


@pytest.mark.parametrize("setting", ["max.partition.fetch.bytes", "fetch.max.bytes"])
def test_zero_bytes_reads_one_batch_a_fetch(host: PartitionHost, setting: str) -> None:
    config = {"bootstrap.servers": "x:1", "auto.offset.reset": "earliest", setting: 0}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign([T0])
    state.seek(T0, 0)
    for offset in range(3):
        ((node, request),) = state.fetches_to_send({T0: 1}, 1_000).requests
        state.on_fetch_answer(node, asyncio.run(fetch(host, request)))
        assert [r.offset for r in state.take(100)] == [offset]
