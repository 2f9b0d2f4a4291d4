"""Goal: the FindCoordinator adapter every service runs accepts GROUP and TRANSACTION keys (and
nothing else, refused whole with INVALID_ARGUMENT), answers each key from the one image it read,
and the pure code's key-type constants are the wire enum's values.

Method: CoordinatorLookupServicer over a hand-made image (both coordinator topics, one partition
each, owned by two coordinators), called with a fake gRPC context whose `abort` raises, as
grpc.aio's does.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import grpc
import pytest

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    TRANSACTION_STATE_TOPIC,
)
from samsa.metadata.image import (
    CoordinatorAssignment,
    CoordinatorRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.services.runtime.coordinator_lookup import CoordinatorLookupServicer
from samsa.v1 import coordinator_pb2 as pb


class Aborted(Exception):
    pass


class FakeContext:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


def image() -> MetadataImage:
    partition = {0: PartitionState(0, (1,), (1,), 1, 0, 0)}
    topics = {
        name: TopicImage(name, bytes([n]) * 16, partition)
        for n, name in enumerate((CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC))
    }
    return replace(
        MetadataImage.empty(),
        end_offset=42,
        topics=topics,
        coordinators={
            1: CoordinatorRegistration(1, "a", "group-host:1", 10),
            2: CoordinatorRegistration(2, "b", "txn-host:2", 20),
        },
        coordinator_assignments={
            (CONSUMER_OFFSETS_TOPIC, 0): CoordinatorAssignment(
                CONSUMER_OFFSETS_TOPIC, 0, 1, 10, 0, 5
            ),
            (TRANSACTION_STATE_TOPIC, 0): CoordinatorAssignment(
                TRANSACTION_STATE_TOPIC, 0, 2, 20, 0, 6
            ),
        },
    )


def find(request: pb.FindCoordinatorRequest) -> pb.FindCoordinatorResponse:
    servicer = CoordinatorLookupServicer(
        image=image,
        offsets_topic_replication_factor=None,
        transaction_state_log_replication_factor=None,
    )
    return asyncio.run(servicer.FindCoordinator(request, FakeContext()))


def test_the_key_type_constants_are_the_wire_enum() -> None:
    assert GROUP_KEY_TYPE == pb.COORDINATOR_KEY_TYPE_GROUP
    assert TRANSACTION_KEY_TYPE == pb.COORDINATOR_KEY_TYPE_TRANSACTION


def test_transactional_ids_are_answered_from_the_transaction_topic() -> None:
    request = pb.FindCoordinatorRequest(
        key_type=pb.COORDINATOR_KEY_TYPE_TRANSACTION, keys=["payments", ""]
    )
    found, empty = find(request).coordinators
    assert (found.key, found.error_code, found.coordinator_id) == ("payments", ErrorCode.NONE, 2)
    assert (found.endpoint, found.partition, found.metadata_offset) == ("txn-host:2", 0, 42)
    assert empty.error_code == ErrorCode.INVALID_REQUEST and empty.coordinator_id == -1
    group = find(pb.FindCoordinatorRequest(key_type=pb.COORDINATOR_KEY_TYPE_GROUP, keys=["g"]))
    assert (group.coordinators[0].coordinator_id, group.coordinators[0].endpoint) == (
        1,
        "group-host:1",
    )


@pytest.mark.parametrize("key_type", [pb.COORDINATOR_KEY_TYPE_UNSPECIFIED, 3])
def test_other_key_types_are_refused_whole(key_type: int) -> None:
    with pytest.raises(Aborted) as refused:
        find(pb.FindCoordinatorRequest(key_type=key_type, keys=["g"]))  # type: ignore[arg-type]
    code, details = refused.value.args
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "COORDINATOR_KEY_TYPE_TRANSACTION" in details
