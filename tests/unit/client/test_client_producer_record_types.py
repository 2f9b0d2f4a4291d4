"""Goal: a record send() cannot encode is refused by send() itself, with an error that names what
is wrong, and never reaches the accumulator: there it would fail to encode on the driver's loop
at every turn, never be sent, never settle, and hold back every record of its batch and
partition (a flush waiting for ever). A float timestamp (`time.time() * 1000`) or partition is
the usual way to get there.

Method: both facades against the in-memory brokers (fake_produce_cluster.py); after the refused
records, a good record is acknowledged and a flush completes, so nothing was left behind.
"""

from __future__ import annotations

import asyncio

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AsyncProducer, Producer
from samsa.common.errors import InvalidRecordError

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake

BAD_SENDS = [
    ({"timestamp": 1_700_000_000_000.5}, "timestamp"),
    ({"partition": 1.0}, "partition"),
    ({"partition": "1"}, "partition"),
    ({"key": "text"}, "key"),
]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=1)
    fake.install(monkeypatch)
    return fake


@pytest.mark.parametrize(("kwargs", "named"), BAD_SENDS)
def test_send_refuses_what_it_cannot_encode(
    cluster: FakeCluster, kwargs: dict[str, object], named: str
) -> None:
    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000}) as producer:
        good = producer.send(TOPIC, b"before", partition=1)
        with pytest.raises(InvalidRecordError, match=named):
            producer.send(TOPIC, b"bad", **kwargs)  # type: ignore[arg-type]
        producer.flush(WAIT_S)
        assert good.result(timeout=0).offset == 0
    assert cluster.log(TOPIC, 1) == [b"before"]


def test_send_many_refuses_a_float_timestamp_or_partition(cluster: FakeCluster) -> None:
    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000}) as producer:
        with pytest.raises(InvalidRecordError, match="timestamp"):
            producer.send_many(TOPIC, [b"a"], timestamp=1.5)  # type: ignore[arg-type]
        with pytest.raises(InvalidRecordError, match="partition"):
            producer.send_many(TOPIC, [b"a"], partitions=[1.0])  # type: ignore[list-item]
        written = producer.send_many(TOPIC, [b"b"], partitions=[2])
        producer.flush(WAIT_S)
        assert written.result(timeout=0) == 1
    assert cluster.log(TOPIC, 2) == [b"b"]


@pytest.mark.parametrize(("kwargs", "named"), BAD_SENDS)
def test_async_send_refuses_what_it_cannot_encode(
    cluster: FakeCluster, kwargs: dict[str, object], named: str
) -> None:
    async def scenario() -> None:
        async with AsyncProducer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000}) as p:
            good = await p.send(TOPIC, b"before", partition=1)
            with pytest.raises(InvalidRecordError, match=named):
                await p.send(TOPIC, b"bad", **kwargs)  # type: ignore[arg-type]
            await p.flush(WAIT_S)
            assert (await good).offset == 0

    asyncio.run(scenario())
    assert cluster.log(TOPIC, 1) == [b"before"]
