"""Goal: the coordinator's look-up of log ends (OffsetsLog.list_offsets, which DescribeGroupLag
and the lag metrics use) asks each leader in requests it accepts. A broker refuses a ListOffsets
naming more than request_partitions_max partitions whole (RESOURCE_EXHAUSTED), and a group may
have committed offsets of more partitions than that on one leader: asked in one request, every
partition answered NETWORK_EXCEPTION and the group's lag was unknown.

Method: request_partitions_max lowered to 3; a fake broker that checks each ListOffsets as the
broker's adapter does (request_checks.too_many_partitions) and answers 100 + partition.
"""

from __future__ import annotations

import asyncio

import grpc
from broker_host import led_partitions, single_broker_image

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.services.broker.requests.request_checks import too_many_partitions
from samsa.services.coordinator.offsets_log import OffsetsLog
from samsa.services.runtime.member_auth import MemberSigner
from samsa.v1 import broker_pb2 as b


class _Refused(grpc.aio.AioRpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class _FakeBroker:
    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def ListOffsets(
        self,
        request: b.ListOffsetsRequest,
        timeout: float | None = None,
        metadata: object = None,  # the coordinator's membership proof
    ) -> b.ListOffsetsResponse:
        refusal = too_many_partitions(request)
        if refusal is not None:
            raise _Refused(*refusal)
        self.sizes.append(sum(len(topic.partitions) for topic in request.topics))
        answer = b.ListOffsetsResponse()
        for topic in request.topics:
            answered = answer.topics.add(name=topic.name)
            for wanted in topic.partitions:
                answered.partitions.add(partition=wanted.partition, offset=100 + wanted.partition)
        return answer


def test_a_leader_is_asked_in_requests_of_at_most_request_partitions_max(monkeypatch):
    monkeypatch.setattr(limits, "request_partitions_max", 3)
    image = single_broker_image({"t": (b"\x01" * 16, led_partitions(7))})
    offsets_log = OffsetsLog(lambda: image, signer=MemberSigner(b"k" * 32, 1))
    broker = _FakeBroker()
    offsets_log._stub = lambda endpoint: broker  # type: ignore[assignment,method-assign,return-value]
    wanted = [("t", p) for p in range(7)]
    ends = asyncio.run(offsets_log.list_offsets(wanted, b.OFFSET_SPEC_LATEST))
    assert {key: (end.error_code, end.offset) for key, end in ends.items()} == {
        ("t", p): (ErrorCode.NONE, 100 + p) for p in range(7)
    }
    assert sorted(broker.sizes) == [1, 3, 3]
