"""Goal: a ReplicaFetchStream request is refused exactly when Fetch would refuse it, plus when it
is not a follower's or names another broker than the stream proved to be — each with a status
and a message saying what to fix (services/broker/replica/replica_stream.py).

Method: the pure checks `replica_refusal` and `fetch_refusal` on hand-built requests; no server.
"""

from __future__ import annotations

import grpc
import pytest

from samsa.common import limits
from samsa.services.broker.replica.replica_stream import replica_refusal
from samsa.services.broker.requests.request_checks import fetch_refusal
from samsa.v1 import broker_pb2

Request = broker_pb2.FetchRequest


def item(request: broker_pb2.FetchRequest | None) -> broker_pb2.ReplicaFetchStreamRequest:
    if request is None:
        return broker_pb2.ReplicaFetchStreamRequest()
    return broker_pb2.ReplicaFetchStreamRequest(request=request)


def follower_fetch(replica_id: int = 2, **fields: object) -> broker_pb2.FetchRequest:
    request = Request(
        topics=[
            Request.TopicData(
                name="t", partitions=[Request.PartitionData(partition=0, fetch_offset=3)]
            )
        ],
        **{"max_wait_ms": 500, **fields},  # type: ignore[arg-type]
    )
    request.replica_id = replica_id
    return request


def test_a_follower_fetch_passes_before_and_after_the_stream_proved_its_member() -> None:
    assert replica_refusal(item(follower_fetch()), None) is None
    assert replica_refusal(item(follower_fetch()), 2) is None


@pytest.mark.parametrize(
    ("request_", "phrase"),
    [
        (None, "must carry a FetchRequest"),
        (Request(max_wait_ms=500), "set replica_id"),
        (follower_fetch(replica_id=-1), "set replica_id"),
    ],
)
def test_only_followers_use_the_stream(request_, phrase: str) -> None:  # type: ignore[no-untyped-def]
    refusal = replica_refusal(item(request_), None)
    assert refusal is not None
    assert refusal[0] == grpc.StatusCode.INVALID_ARGUMENT and phrase in refusal[1]


def test_a_request_in_another_brokers_name_is_refused() -> None:
    refusal = replica_refusal(item(follower_fetch(replica_id=3)), 2)
    assert refusal is not None
    assert refusal[0] == grpc.StatusCode.PERMISSION_DENIED
    assert "broker 2" in refusal[1] and "replica_id=3" in refusal[1]


@pytest.mark.parametrize(
    "fields",
    [
        {"max_wait_ms": -1},
        {"min_bytes": -1},
        {"max_bytes": -1},
        {"session_id": -1},
        {"session_id": 4, "session_epoch": -2},
    ],
)
def test_negative_sizes_and_session_fields_are_refused_as_fetch_refuses_them(
    fields: dict[str, int],
) -> None:
    refusal = replica_refusal(item(follower_fetch(**fields)), 2)
    assert refusal is not None and refusal[0] == grpc.StatusCode.INVALID_ARGUMENT


def test_negative_offsets_and_partition_sizes_name_the_partition() -> None:
    for wanted in (
        Request.PartitionData(partition=1, fetch_offset=-1),
        Request.PartitionData(partition=1, partition_max_bytes=-1),
    ):
        request = follower_fetch()
        request.topics.append(Request.TopicData(name="u", partitions=[wanted]))
        refusal = fetch_refusal(request)
        assert refusal is not None
        assert refusal[0] == grpc.StatusCode.INVALID_ARGUMENT and "u-1" in refusal[1]


def test_a_partition_named_twice_is_refused_and_named() -> None:
    """An answer carries one result and one set of records per partition (fetch_wire.py)."""
    request = follower_fetch()
    request.topics.append(
        Request.TopicData(
            name="u",
            partitions=[
                Request.PartitionData(partition=1, fetch_offset=0),
                Request.PartitionData(partition=1, fetch_offset=7),
            ],
        )
    )
    refusal = fetch_refusal(request)
    assert refusal is not None
    assert refusal[0] == grpc.StatusCode.INVALID_ARGUMENT and "u-1 is named twice" in refusal[1]
    request.topics[-1].partitions[1].partition = 2
    assert fetch_refusal(request) is None


def test_too_many_partitions_counting_forgotten_ones_is_resource_exhausted() -> None:
    half = limits.request_partitions_max // 2 + 1
    request = follower_fetch(session_id=1, session_epoch=1)
    request.topics[0].partitions.extend(Request.PartitionData(partition=p) for p in range(1, half))
    request.forgotten_topics.append(Request.ForgottenTopic(name="t", partitions=range(half)))
    refusal = fetch_refusal(request)
    assert refusal is not None and refusal[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(limits.request_partitions_max) in refusal[1]
