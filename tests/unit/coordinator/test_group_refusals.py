"""Goal: DescribeGroups and DeleteGroups answer each group the caller may not DESCRIBE / DELETE
with GROUP_AUTHORIZATION_FAILED (naming principal, operation and group) and hand only the others
to the coordinator, as Kafka answers per group; with ACLs off every group goes to it.

Method: the GroupCoordinatorServicer over a stand-in coordinator that owns nothing (each group
it is asked about answers NOT_COORDINATOR, and it records which), with a stand-in Caller set in
caller.CALLER as the authorizer's interceptor sets it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.services.runtime.caller import CALLER
from samsa.services.runtime.session_access import NO_GRANT, SessionGrant
from samsa.v1 import coordinator_pb2 as c

ALICE = "User:CN=alice"


class OwnsNothing:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def partition_for(self, key: str) -> None:
        self.asked.append(key)
        raise PartitionUnavailableError(ErrorCode.NOT_COORDINATOR, "not here")


class Alice:
    def __init__(self, *allowed: tuple[Operation, str]) -> None:
        self.allowed = set(allowed)

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return resource_type == ResourceType.GROUP and (operation, name) in self.allowed

    def principal(self) -> str:
        return ALICE

    def grant(self) -> SessionGrant:
        return NO_GRANT


@pytest.mark.parametrize(
    ("method", "request_of", "operation"),
    [
        ("DescribeGroups", c.DescribeGroupsRequest, Operation.DESCRIBE),
        ("DeleteGroups", c.DeleteGroupsRequest, Operation.DELETE),
    ],
)
def test_each_group_is_decided_on_its_own(
    method: str, request_of: Any, operation: Operation
) -> None:
    coordinator = OwnsNothing()
    call = getattr(GroupCoordinatorServicer(coordinator), method)  # type: ignore[arg-type]

    async def main(caller: Any) -> Any:
        if caller is not None:
            CALLER.set(caller)
        return await call(request_of(group_ids=["mine", "theirs"]), None)

    answer = asyncio.run(main(Alice((operation, "mine"))))
    assert [g.group_id for g in answer.groups] == ["mine", "theirs"]  # in request order
    mine, theirs = answer.groups
    assert mine.error_code == ErrorCode.NOT_COORDINATOR  # asked of the coordinator
    assert theirs.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert theirs.error_message.startswith(f"{ALICE} may not {operation.name} group theirs (")
    assert coordinator.asked == ["mine"]
    coordinator.asked.clear()
    asyncio.run(main(None))  # ACLs off
    assert coordinator.asked == ["mine", "theirs"]
