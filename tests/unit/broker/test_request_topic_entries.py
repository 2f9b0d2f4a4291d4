"""Goal: a broker request with more topic entries than it may name partitions is refused before
any work (RESOURCE_EXHAUSTED naming the limit), as one naming too many partitions is. Entries
naming no partition were not counted: a Fetch of 490,000 empty topic entries (1 MB, no proof
needed) held the broker's event loop about a second (its followers' fetches, its heartbeats),
as did ListOffsets, DescribeProducers and Produce.

Method: the pure check every one of those adapters applies (`too_many_partitions`, and
`fetch_refusal` / `produce_refusal` that call it), on requests of empty entries.
"""

from __future__ import annotations

import grpc
import pytest

from samsa.common import limits
from samsa.services.broker.requests.request_checks import (
    fetch_refusal,
    produce_refusal,
    too_many_partitions,
)
from samsa.v1 import broker_pb2

LIMIT = limits.request_partitions_max


def _empty_entries(request_type: type, field: str, count: int):  # type: ignore[no-untyped-def]
    number = request_type.DESCRIPTOR.fields_by_name[field].number
    return request_type.FromString(bytes([(number << 3) | 2, 0]) * count)


@pytest.mark.parametrize(
    ("request_type", "field", "check"),
    [
        (broker_pb2.FetchRequest, "topics", fetch_refusal),
        (broker_pb2.FetchRequest, "forgotten_topics", fetch_refusal),
        (broker_pb2.ProduceRequest, "topics", produce_refusal),
        (broker_pb2.ListOffsetsRequest, "topics", too_many_partitions),
        (broker_pb2.DescribeProducersRequest, "topics", too_many_partitions),
    ],
)
def test_too_many_empty_topic_entries_are_refused(request_type, field, check) -> None:
    refusal = check(_empty_entries(request_type, field, LIMIT + 1))
    assert refusal is not None
    code, message = refusal
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"{LIMIT + 1} topic entries" in message and str(LIMIT) in message
    assert too_many_partitions(_empty_entries(request_type, field, LIMIT)) is None
