"""Goal: one Produce request names at most `limits.request_partitions_max` partitions, the most a
broker accepts (request_checks.too_many_partitions: RESOURCE_EXHAUSTED, whatever their bytes).
0d113f6 bounded the consumer's and the followers' fetches and ListOffsets that way, but the
producer's drain() fills a request by bytes only (max.request.size), so a producer with small
batches ready for more partitions of one leader than the limit (10,001 batches of ~70 bytes fit
in 1 MiB) sends a request the broker refuses as a whole. The partitions left out go in the next
requests, in turn: none waits behind the others for ever.

Method: the pure RecordAccumulator (accumulator_helpers), the limit lowered to 2, batches ready
in partitions led by broker 1; each drain() for broker 1 must take at most 2 partitions, and
under steady load every partition must go within ceil(partitions / 2) drains.
"""

from __future__ import annotations

import pytest
from accumulator_helpers import append, make

from samsa.client.producer_batch import ProducerBatch
from samsa.common import limits

LIMIT = 2


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "request_partitions_max", LIMIT)


def partitions_of(drained: list[ProducerBatch]) -> set[tuple[str, int]]:
    return {(batch.topic, batch.partition) for batch in drained}


def test_one_drain_names_at_most_the_request_limit_of_partitions() -> None:
    accumulator = make(idempotent=False)
    leaders = {("t", p): 1 for p in range(LIMIT + 1)}
    for partition in range(LIMIT + 1):
        append(accumulator, partition)
    assert accumulator.ready(0, leaders).ready_nodes == {1}
    drained = accumulator.drain(1, 1 << 20, 0)
    partitions = partitions_of(drained)
    assert len(partitions) <= LIMIT, f"{len(partitions)} partitions in one Produce request"
    # The one left out goes in the next request.
    assert accumulator.ready(0, leaders).ready_nodes == {1}
    assert partitions_of(accumulator.drain(1, 1 << 20, 0)) == leaders.keys() - partitions


def test_several_batches_of_one_partition_still_go_together() -> None:
    """The limit counts partitions, not batches: a partition's queue goes whole, as before."""
    accumulator = make(idempotent=False, batch_size=100)
    leaders = {("t", p): 1 for p in range(LIMIT + 1)}
    for partition in range(LIMIT + 1):
        for _ in range(3):
            append(accumulator, partition, value=b"v" * 60)  # one batch each (batch.size 100)
    accumulator.ready(0, leaders)
    drained = accumulator.drain(1, 1 << 20, 0)
    assert len(partitions_of(drained)) == LIMIT
    assert len(drained) == 3 * LIMIT


def test_every_partition_goes_in_turn_under_steady_load() -> None:
    """Every partition has a new batch before each drain (answers come back at once): each
    must be in at least one of any ceil(count / LIMIT) consecutive requests."""
    count = 5
    accumulator = make(idempotent=False)
    leaders = {("t", p): 1 for p in range(count)}
    last_sent = dict.fromkeys(leaders, 0)
    longest_wait = 0
    for request in range(1, 31):
        for partition in range(count):
            append(accumulator, partition, now_ms=request)
        assert accumulator.ready(request, leaders).ready_nodes == {1}
        drained = accumulator.drain(1, 1 << 20, request)
        assert len(partitions_of(drained)) == LIMIT
        for batch in drained:
            last_sent[(batch.topic, batch.partition)] = request
            accumulator.on_batch_acked(batch.batch_id, 0)
        longest_wait = max(longest_wait, *(request - sent for sent in last_sent.values()))
    assert longest_wait < -(-count // LIMIT), f"a partition waited {longest_wait} requests"
