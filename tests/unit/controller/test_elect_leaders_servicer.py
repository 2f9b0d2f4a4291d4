"""Goal: the controller's ElectLeaders adapter commits what the pure decision elects, with the
write's metadata offset in its status, and refuses a request over admin_request_items_max
partitions whole (RESOURCE_EXHAUSTED, as every admin call's count bound) before deciding.

Method: the real ControllerServicer over test_unregister_servicer's CommittingDriver (the pure
decision on an image built with the real control plane, its records replayed at once), an
offline partition from test_elect_leaders_control, and a context whose abort raises.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from reassignment_helpers import state
from test_elect_leaders_control import offline
from test_unregister_servicer import CommittingDriver

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.services.controller import servicer
from samsa.v1 import controller_pb2 as c


class Aborted(Exception):
    pass


class AbortingContext:
    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        raise Aborted(details)


def service_over(image: MetadataImage) -> Any:
    service = object.__new__(servicer.ControllerServicer)
    service.driver = CommittingDriver(image)  # type: ignore[assignment]
    service.defaults = cp.ClusterDefaults()
    service.controller_endpoints, service.controller_internal_endpoints = {1: "h:1"}, {}
    return service


def test_an_election_is_committed_and_answered_with_its_offset() -> None:
    image = offline()
    service = service_over(image)
    request = c.ElectLeadersRequest(election_type=c.ELECTION_TYPE_UNCLEAN)
    request.partitions.add(topic="t", partition=0)
    answer = asyncio.run(service.ElectLeaders(request, AbortingContext()))
    assert [(r.topic, r.partition, r.error_code) for r in answer.partitions] == [
        ("t", 0, ErrorCode.NONE)
    ]
    assert answer.status.error_code == ErrorCode.NONE
    assert answer.status.metadata_offset == image.end_offset + 1
    assert state(service.driver.image).leader == 2


def test_too_many_partitions_are_refused_whole_before_deciding() -> None:
    image = offline()
    service = service_over(image)
    request = c.ElectLeadersRequest(election_type=c.ELECTION_TYPE_UNCLEAN)
    for _ in range(limits.admin_request_items_max + 1):
        request.partitions.add(topic="t", partition=0)
    context = AbortingContext()
    with pytest.raises(Aborted) as refused:
        asyncio.run(service.ElectLeaders(request, context))
    assert context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(limits.admin_request_items_max) in str(refused.value)
    assert service.driver.image is image, "nothing decided, nothing written"
