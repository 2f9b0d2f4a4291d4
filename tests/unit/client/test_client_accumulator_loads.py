"""Goal: the loads the sticky partitioner weighs (KIP-794) are what the accumulator holds: each
partition's batches not yet sent (in flight ones are not waiting), nothing with adaptive
partitioning off, and UNAVAILABLE for a partition whose oldest unsent batch has waited longer than
linger.ms + partitioner.availability.timeout.ms, or that has one that old in flight unanswered
(only when that timeout is set).

Method: a RecordAccumulator from a ProducerConfig (accumulator_helpers.py), time a plain number.
"""

from __future__ import annotations

from accumulator_helpers import append, batch_size_for, drain_all, make

from samsa.client.partitioner import UNAVAILABLE


def test_a_partitions_load_is_its_batches_not_yet_sent() -> None:
    accumulator = make(batch_size=batch_size_for(2), linger_ms=50)
    for _ in range(5):  # three batches of t-0: two full, one open
        append(accumulator, partition=0, now_ms=0)
    append(accumulator, partition=1, now_ms=0)
    assert accumulator.partition_loads("t", 3, now_ms=0) == [3, 1, 0]
    drain_all(accumulator, now_ms=100)  # every batch in flight: none waits any more
    assert accumulator.partition_loads("t", 3, now_ms=100) == [0, 0, 0]


def test_without_adaptive_partitioning_every_load_is_zero() -> None:
    accumulator = make(batch_size=batch_size_for(2), partitioner_adaptive_partitioning_enable=False)
    for _ in range(5):
        append(accumulator, partition=0, now_ms=0)
    assert accumulator.partition_loads("t", 3, now_ms=0) == [0, 0, 0]


def test_a_partition_whose_oldest_batch_waited_past_the_availability_timeout_is_unavailable() -> (
    None
):
    for adaptive in (True, False):
        accumulator = make(
            linger_ms=5,
            partitioner_availability_timeout_ms=100,
            partitioner_adaptive_partitioning_enable=adaptive,
        )
        append(accumulator, partition=2, now_ms=1_000)
        waiting = 1 if adaptive else 0
        assert accumulator.partition_loads("t", 3, now_ms=1_105) == [0, 0, waiting]
        assert accumulator.partition_loads("t", 3, now_ms=1_106) == [0, 0, UNAVAILABLE]
        drained = drain_all(accumulator, now_ms=1_106)  # in flight, but still unanswered
        assert accumulator.partition_loads("t", 3, now_ms=1_106) == [0, 0, UNAVAILABLE]
        accumulator.on_batch_acked(drained[0].batch_id, 0)  # answered: available again
        assert accumulator.partition_loads("t", 3, now_ms=5_000) == [0, 0, 0]


def test_without_an_availability_timeout_a_waiting_partition_stays_available() -> None:
    accumulator = make(linger_ms=5)
    append(accumulator, partition=0, now_ms=0)
    assert accumulator.partition_loads("t", 3, now_ms=10_000_000) == [1, 0, 0]
