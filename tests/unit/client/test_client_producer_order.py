"""Goal: one partition's batches reach the broker in the order they were drained (hence
created), however many threads call `send()` (Samsa issue 11). The old producer had two drivers
with linger.ms=0 — the caller's thread and the sender thread — each draining under the lock and
sending after releasing it; a thread delayed between its drain and its send was overtaken by
another's, so a later batch reached the wire first (with sequence numbers:
OUT_OF_ORDER_SEQUENCE_NUMBER).

Method: linger.ms=0 (every send wakes the driver), small batches, two threads sending to one
partition, and the window between drain and send held open on purpose: the first call of
`ProduceSender.send` (the step that hands a drained request to the stream) waits until a second call
starts, or HOLD_S passes. In the old design the second call came from another thread at once and
overtook the first: run against HEAD's producer.py this test failed every time (wire order !=
drain order). Now only the driver's task drains and sends, so nothing can overtake: the wait
times out, and the order the fake broker received batches in must be the order `drain()`
returned them in, with `send` never entered twice at once nor from two threads.
"""

from __future__ import annotations

import threading

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import Producer
from samsa.client.accumulator import RecordAccumulator
from samsa.client.produce_sender import ProduceSender
from samsa.client.producer_batch import ProducerBatch
from samsa.client.record_future import RecordFuture

TOPIC = "events"
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
SENDERS = 2
RECORDS_PER_SENDER = 300
HOLD_S = 0.5  # how long the first request waits to be overtaken (never, with one driver)
BATCH_BYTES = 300  # a few records per batch: many batches to keep in order


def test_two_sending_threads_never_reorder_a_partitions_batches(monkeypatch: pytest.MonkeyPatch):
    cluster = FakeCluster(TOPIC, partitions=1)
    cluster.install(monkeypatch)
    drained: list[bytes | None] = []  # each drained batch's first value, in drain order
    drain = RecordAccumulator.drain

    def recording_drain(self: RecordAccumulator, *args: int) -> list[ProducerBatch]:
        batches = drain(self, *args)
        drained.extend(batch.values[0] for batch in batches)
        return batches

    send_request = ProduceSender.send
    second_call = threading.Event()
    calls: list[str] = []  # the thread of each send call
    concurrency = {"now": 0, "max": 0}  # send calls in progress
    concurrency_lock = threading.Lock()

    def held_send_request(self: ProduceSender, *args: object) -> None:
        with concurrency_lock:
            calls.append(threading.current_thread().name)
            concurrency["now"] += 1
            concurrency["max"] = max(concurrency["max"], concurrency["now"])
        if len(calls) == 1:
            second_call.wait(HOLD_S)  # the first drained request, not yet handed to the stream
        else:
            second_call.set()
        send_request(self, *args)
        with concurrency_lock:
            concurrency["now"] -= 1

    monkeypatch.setattr(RecordAccumulator, "drain", recording_drain)
    monkeypatch.setattr(ProduceSender, "send", held_send_request)
    futures: dict[bytes, RecordFuture] = {}
    with Producer(
        {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0, "batch.size": BATCH_BYTES}
    ) as producer:

        def sender(name: str) -> None:
            for n in range(RECORDS_PER_SENDER):
                value = b"%s-%04d" % (name.encode(), n)
                futures[value] = producer.send(TOPIC, value, partition=0)

        threads = [threading.Thread(target=sender, args=(f"s{i}",)) for i in range(SENDERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.flush(timeout=30)

    arrived = [batch.values[0] for _, _, batch in cluster.brokers[1].received]
    assert len(arrived) > SENDERS, "the test needs several batches to be able to reorder them"
    assert arrived == drained, "a batch reached the broker before one drained ahead of it"
    assert set(calls) == {"samsa-producer"}, "a thread other than the driver's sent requests"
    assert concurrency["max"] == 1, "two requests were being sent at once"
    log = cluster.log(TOPIC, 0)
    assert len(log) == SENDERS * RECORDS_PER_SENDER
    for value, future in futures.items():
        assert log[future.result(timeout=0).offset] == value
