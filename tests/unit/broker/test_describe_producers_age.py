"""Goal: DescribeProducers ages each producer by the leader's own clock, so that AbortTransaction
refuses to abort a live transaction whatever timestamps its records carry. When the guard read
last_timestamp_ms (the largest record timestamp, the producer's clock under CreateTime), a
transaction stamping a time an hour old was aborted at once: its ABORT marker landed, and its
coordinator's COMMIT was then taken as a retry of a marker already written.

Method: a PartitionHost over a real log (one replica); producer 5's transactional batch carries
a timestamp an hour before the leader's clock NOW. DescribeProducers is answered at NOW + 1 s
and at NOW + transaction.max.timeout.ms, and its answer goes to `abort_decision` as the
coordinator passes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.describe_producers import describe_producers
from samsa.services.coordinator.hanging_transactions import (
    AbortMarker,
    AbortRefused,
    abort_decision,
)
from samsa.v1 import broker_pb2 as b

NOW = 1_700_000_000_000
MAX_TIMEOUT_MS = 900_000


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    image = single_broker_image({"t": (b"\x0c" * 16, led_partitions(1))})
    with hosting(tmp_path, image) as hosted:
        yield hosted


def described(host: PartitionHost, now_ms: int) -> list[b.DescribeProducersResponse.ProducerState]:
    request = b.DescribeProducersRequest(
        topics=[b.DescribeProducersRequest.TopicRequest(name="t", partitions=[0])]
    )
    (answer,) = describe_producers(host, request, now_ms).topics[0].partitions
    assert answer.error_code == ErrorCode.NONE, answer
    return list(answer.active_producers)


def test_a_live_transaction_stamping_old_times_is_not_aborted(host: PartitionHost) -> None:
    hosted = host.get("t", 0)
    assert hosted is not None
    stamped = NOW - 3_600_000
    data = build_batch(
        [b"v"],
        timestamps=stamped,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    hosted.log.append_as_leader(
        data, leader_epoch=hosted.leader_epoch, now_ms=NOW, allow_transactional=True
    )
    (state,) = described(host, NOW + 1_000)
    assert (state.last_timestamp_ms, state.last_append_age_ms) == (stamped, 1_000)
    refused = abort_decision(
        "t-0", [state], producer_id=5, producer_epoch=0, max_timeout_ms=MAX_TIMEOUT_MS
    )
    assert isinstance(refused, AbortRefused), refused
    assert refused.code == ErrorCode.CONCURRENT_TRANSACTIONS
    (state,) = described(host, NOW + MAX_TIMEOUT_MS)
    decision = abort_decision(
        "t-0", [state], producer_id=5, producer_epoch=0, max_timeout_ms=MAX_TIMEOUT_MS
    )
    assert decision == AbortMarker(5, 1, 0), "silent for the maximum timeout: hanging"
    (state,) = described(host, NOW - 5_000)
    assert state.last_append_age_ms == 0, "the clock went back: young, not negative"
