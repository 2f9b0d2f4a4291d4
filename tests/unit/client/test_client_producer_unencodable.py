"""Goal: a batch that cannot be encoded fails, with the reason, instead of staying in flight for
ever. The driver drains batches (they are in flight from then on) and encodes them after; an
encoding that raised left them drained but never sent, so no answer and no deadline ever came:
their futures never settled, flush() and close() hung, and their partition stayed blocked.

Method: the sync Producer against in-memory brokers (fake_produce_cluster.py), with the batch
encoder made to refuse any batch holding a marked value (standing in for any record the codec
cannot encode).
"""

from __future__ import annotations

import pytest
from fake_produce_cluster import POISON, FakeCluster, refuse_to_encode

from samsa.client import ProduceError, Producer
from samsa.common.errors import ErrorCode

TOPIC = "events"
WAIT_S = 10
BOOTSTRAP = "fake:9092"  # never dialled: the metadata is fake


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(TOPIC, partitions=2, brokers=1)
    fake.install(monkeypatch)
    refuse_to_encode(monkeypatch)
    return fake


def test_a_batch_that_cannot_be_encoded_fails_and_blocks_nothing(cluster: FakeCluster) -> None:
    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 60_000}) as producer:
        poisoned = producer.send(TOPIC, POISON, partition=0)
        beside = producer.send(TOPIC, b"other partition", partition=1)
        producer.flush(WAIT_S)
        error = poisoned.exception(timeout=0)
        assert isinstance(error, ProduceError) and error.code == ErrorCode.INVALID_RECORD
        assert "the codec refused this batch" in str(error)
        assert beside.result(timeout=0).offset == 0
        after = producer.send(TOPIC, b"after", partition=0)  # the partition goes on
        producer.flush(WAIT_S)
        assert after.result(timeout=0).offset == 0
    assert cluster.log(TOPIC, 0) == [b"after"]
