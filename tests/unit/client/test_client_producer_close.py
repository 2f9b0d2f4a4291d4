"""Goal: Producer.close() ends the producer from wherever an application calls it, a send()
callback included (Kafka's producer allows close() in a callback: it cannot wait there for the
callback thread, which is the caller).

Method: the sync Producer against in-memory brokers (fake_produce_cluster.py); waits on events
with generous timeouts, never fixed sleeps.
"""

from __future__ import annotations

import threading

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import Producer
from samsa.client.record_future import RecordFuture

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=3, brokers=1)
    fake.install(monkeypatch)
    return fake


def test_close_inside_a_callback_closes_the_producer(cluster: FakeCluster) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000})
    finished = threading.Event()
    outcome: list[BaseException | None] = []

    def close_here(_: RecordFuture) -> None:
        try:
            producer.close(WAIT_S)
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)
        finished.set()

    future = producer.send(TOPIC, b"first", partition=0)
    future.add_done_callback(close_here)  # lingering: registered before the answer
    producer.flush(WAIT_S)
    assert finished.wait(WAIT_S)
    assert outcome == [None]
    assert future.result(timeout=0).offset == 0
    assert cluster.log(TOPIC, 0) == [b"first"]
