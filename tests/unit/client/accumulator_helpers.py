"""Helpers shared by the accumulator's scenario tests: one RecordAccumulator built from a
ProducerConfig, appends, drains to every ready leader, and decoded batch values.

Not a test module: imported by the tests beside it (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import random

from samsa.client.accumulator import RecordAccumulator
from samsa.client.config import ProducerConfig
from samsa.client.producer_batch import BATCH_OVERHEAD_BYTES, RECORD_OVERHEAD_BYTES, ProducerBatch
from samsa.client.record_batcher import AppendResult
from samsa.common.record import codec

LEADERS = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2, ("u", 0): 2}
VALUE = b"v" * 10
RECORD_BYTES = RECORD_OVERHEAD_BYTES + len(VALUE)  # keyless, headerless
PRODUCER_ID, PRODUCER_EPOCH = 1000, 0


class FixedRandom:
    """random() always 0.5: the jitter factor is exactly 1, so backoffs are exact."""

    def random(self) -> float:
        return 0.5


def make(
    idempotent: bool = True, random_source: object = None, **settings: object
) -> RecordAccumulator:
    """An accumulator with linger.ms 0 and `settings` (`batch_size` for batch.size, ...); an
    idempotent one already holds PRODUCER_ID at PRODUCER_EPOCH."""
    config = ProducerConfig.from_dict(
        {
            "bootstrap.servers": "localhost:9092",
            "linger.ms": 0,
            "enable.idempotence": idempotent,
            **{key.replace("_", "."): value for key, value in settings.items()},
        }
    )
    accumulator = RecordAccumulator(config, random_source or random.Random(0))
    if idempotent:
        accumulator.set_producer_id(PRODUCER_ID, PRODUCER_EPOCH)
    return accumulator


def batch_size_for(record_count: int) -> int:
    return BATCH_OVERHEAD_BYTES + record_count * RECORD_BYTES


def append(
    accumulator: RecordAccumulator,
    partition: int = 0,
    now_ms: int = 0,
    topic: str = "t",
    value: bytes = VALUE,
    **options: object,
) -> AppendResult:
    result = accumulator.append(topic, partition, None, value, None, None, now_ms, **options)
    assert isinstance(result, AppendResult), result
    return result


def drain_encoded(
    accumulator: RecordAccumulator, node: int, max_request_bytes: int, now_ms: int
) -> list[ProducerBatch]:
    """drain() then encode(), as the driver does (it encodes outside its lock)."""
    drained = accumulator.drain(node, max_request_bytes, now_ms)
    accumulator.encode(drained)
    return drained


def drain_all(
    accumulator: RecordAccumulator, now_ms: int, max_request_bytes: int = 1 << 20
) -> list[ProducerBatch]:
    ready = accumulator.ready(now_ms, LEADERS)
    drained = []
    for node in sorted(ready.ready_nodes):
        drained += drain_encoded(accumulator, node, max_request_bytes, now_ms)
    return drained


def values_of(batch: ProducerBatch) -> list[bytes | None]:
    assert batch.encoded is not None
    return codec.decode_batch(batch.encoded).values
