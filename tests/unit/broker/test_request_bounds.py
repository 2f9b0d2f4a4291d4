"""Goal: the bounds in common/limits.py that had no test of their own hold where a peer could send
too much: typed records per partition in a Produce, configs per topic and the length of a config
value, the produce timeout an acks=all writer may ask for, and the long-poll a fetcher may ask
for. Each refusal names the bound, so the caller knows what to change; each clamp keeps what a
peer asks for within the broker's bound instead of refusing it.

Method: the pure checks are called directly (request_checks, topic_configs, wait_timeout_s), with
the bound lowered by monkeypatch where building a request over the real one would be wasteful;
the long-poll clamp is a real fetch against a real log in a temp dir that asks for 10 minutes
with the broker's bound lowered to 50 ms, and must be answered within seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common import limits
from samsa.common.errors import InvalidConfigError
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.produce_stream import wait_timeout_s
from samsa.services.broker.requests.request_checks import produce_refusal
from samsa.services.runtime.topic_configs import validate_topic_configs
from samsa.v1 import broker_pb2, records_pb2

TOPIC_ID = b"\x09" * 16


def produce_with_typed(count: int, timeout_ms: int = 0) -> broker_pb2.ProduceRequest:
    records = [records_pb2.Record(value=b"v") for _ in range(count)]
    data = broker_pb2.ProduceRequest.PartitionData(partition=0, typed_records=records)
    topic = broker_pb2.ProduceRequest.TopicData(name="t", partitions=[data])
    return broker_pb2.ProduceRequest(acks=1, timeout_ms=timeout_ms, topics=[topic])


def test_typed_records_per_partition_are_bounded_and_the_refusal_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "typed_records_per_partition_max", 3)
    assert produce_refusal(produce_with_typed(3)) is None
    refusal = produce_refusal(produce_with_typed(4))
    assert refusal is not None
    code, message = refusal
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert message == (
        "t-0: 4 typed records in one request; send at most 3 per partition, or encoded batches"
    )


def test_configs_per_topic_and_value_length_are_bounded() -> None:
    bound = limits.topic_configs_per_request_max
    many = {f"k{i}": "1" for i in range(bound + 1)}
    with pytest.raises(InvalidConfigError, match=rf"{bound + 1} configs; at most {bound}"):
        validate_topic_configs(many, 1)
    long_value = "1" * (limits.config_value_length_max + 1)
    with pytest.raises(InvalidConfigError, match=r"retention\.ms: value of \d+ characters"):
        validate_topic_configs({"retention.ms": long_value}, 1)
    validate_topic_configs({"retention.ms": "1" * 10}, 1)  # within both bounds: accepted


def test_the_produce_timeout_a_writer_asks_for_is_clamped_to_the_brokers_bound() -> None:
    asked_ms = limits.produce_timeout_ms_max * 10
    assert wait_timeout_s(produce_with_typed(1, asked_ms)) == limits.produce_timeout_ms_max / 1000
    assert wait_timeout_s(produce_with_typed(1, 2_000)) == 2.0
    assert 0 < wait_timeout_s(produce_with_typed(1, 0)) <= limits.produce_timeout_ms_max / 1000


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    with hosting(tmp_path, single_broker_image({"t": (TOPIC_ID, led_partitions(1))})) as hosted:
        yield hosted


def test_the_long_poll_a_fetcher_asks_for_is_clamped_to_the_brokers_bound(
    host: PartitionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "fetch_wait_ms_max", 50)
    partition = broker_pb2.FetchRequest.PartitionData(partition=0, fetch_offset=0)
    request = broker_pb2.FetchRequest(
        max_wait_ms=600_000,  # ten minutes, on an empty partition
        min_bytes=1,
        topics=[broker_pb2.FetchRequest.TopicData(name="t", partitions=[partition])],
    )

    async def main() -> broker_pb2.FetchResponse:
        # Without the clamp this waits the ten minutes asked for, and wait_for raises.
        return await asyncio.wait_for(fetch(host, request), timeout=10)

    response = asyncio.run(main())
    assert [p.records for t in response.topics for p in t.partitions] == [b""]
