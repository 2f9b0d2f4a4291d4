"""Goal: abort_transaction() after a batch of the transaction failed before any request of it
was sent leaves the producer able to commit again, as Kafka's does (an abort after an abortable
error bumps the epoch, which resets the sequences: KIP-360, KIP-890). The batch took its
sequence when it was drained; failing for good, it made the producer require a sequence reset.
The transaction counted as started only once a request left, so its abort ended locally, with
no EndTxn and so no new epoch: the reset never came, and every later transaction failed with
"an earlier batch of this transaction failed".

Method: a transactional sync Producer against in-memory brokers (fake_produce_cluster.py), its
coordinator's EndTxn replaced by a stand-in that bumps the epoch. The batch fails unsent in two
ways: the codec refuses it, or its leader has no address in the metadata until
delivery.timeout.ms. The abort must send EndTxn(abort), and the next transaction's record, on
the same partition, must be written under the new epoch from sequence 0 and committed.
"""

from __future__ import annotations

import pytest
from fake_produce_cluster import POISON, FakeCluster, refuse_to_encode

from samsa.client import Producer
from samsa.client.transaction_manager import TransactionAbortableError

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake
PRODUCER_ID = 7


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=2, brokers=1)
    fake.install(monkeypatch)
    refuse_to_encode(monkeypatch)
    return fake


@pytest.mark.parametrize("failure", ["unencodable", "no_endpoint"])
def test_abort_after_an_unsent_batch_failed_lets_the_next_transaction_commit(
    cluster: FakeCluster, failure: str
) -> None:
    ends: list[tuple[tuple[int, int], bool]] = []

    async def end(identity: tuple[int, int], committed: bool, deadline: float) -> tuple[int, int]:
        ends.append((identity, committed))
        return identity[0], identity[1] + 1

    config = {
        "bootstrap.servers": BOOTSTRAP,
        "linger.ms": 0,
        "transactional.id": "t",
        "delivery.timeout.ms": 600,
        "request.timeout.ms": 500,
        "retry.backoff.ms": 20,
    }
    producer = Producer(config)
    driver = producer._driver
    driver._txn_client.end = end  # type: ignore[union-attr, method-assign]
    with driver.lock:  # as init_transactions() leaves it (no coordinator here)
        driver.accumulator.set_producer_id(PRODUCER_ID, 0)
        driver.txn.on_initialized()  # type: ignore[union-attr]
    endpoints = dict(cluster.metadata.endpoints)  # type: ignore[union-attr]
    try:
        producer.begin_transaction()
        if failure == "unencodable":
            lost = producer.send(TOPIC, POISON, partition=0)
        else:
            cluster.metadata.endpoints.clear()  # type: ignore[union-attr]  # leader known, address not
            lost = producer.send(TOPIC, b"lost", partition=0)
        with pytest.raises(TransactionAbortableError):
            producer.commit_transaction(WAIT_S)
        assert lost.exception(timeout=0) is not None
        assert cluster.brokers[1].received == [], "the failed batch was never sent"
        cluster.metadata.endpoints.update(endpoints)  # type: ignore[union-attr]
        producer.abort_transaction(WAIT_S)
        assert ends == [((PRODUCER_ID, 0), False)], "the abort asks the coordinator for an epoch"

        producer.begin_transaction()
        committed = producer.send(TOPIC, b"next", partition=0)
        producer.commit_transaction(WAIT_S)
        assert committed.result(timeout=0).offset == 0
        assert ends[1:] == [((PRODUCER_ID, 1), True)]
        [(topic, partition, batch)] = cluster.brokers[1].received
        assert (topic, partition) == (TOPIC, 0)
        assert (batch.header.producer_epoch, batch.header.base_sequence) == (1, 0)
    finally:
        producer.close(WAIT_S)
