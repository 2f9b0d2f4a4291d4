"""Goal: a member may not subscribe by name to topics its principal may not DESCRIBE (KIP-848, as
Kafka's ConsumerGroupHeartbeat refuses them): the heartbeat is answered
TOPIC_AUTHORIZATION_FAILED naming the refused topics and the principal, before any group state
is touched; a heartbeat without a subscription change, a regex subscription, or a caller allowed
every name goes on to the group.

Method: the coordinator's servicer with no coordinator behind it (a call that reached the group
would fail on it), under a fake caller set in caller.CALLER as the authorizing interceptor sets
it.
"""

from __future__ import annotations

import asyncio

import pytest

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.services.runtime import caller
from samsa.v1 import coordinator_pb2 as c

ALICE = "User:CN=alice,O=samsa"


class MayDescribe:
    """A fake caller that may DESCRIBE exactly these topics."""

    def __init__(self, *topics: str) -> None:
        self.topics = set(topics)

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return (operation, resource_type) == (Operation.DESCRIBE, ResourceType.TOPIC) and (
            name in self.topics
        )

    def principal(self) -> str:
        return ALICE


class NoGroups:
    """Stands for the coordinator: reaching it means the heartbeat went on to the group."""

    def partition_for(self, group_id: str) -> None:
        raise LookupError(f"reached the group {group_id}")


def heartbeat(who: caller.Caller, request: c.ConsumerGroupHeartbeatRequest):  # type: ignore[no-untyped-def]
    servicer = GroupCoordinatorServicer(NoGroups())  # type: ignore[arg-type]

    async def call():  # type: ignore[no-untyped-def]
        token = caller.CALLER.set(who)
        try:
            return await servicer.ConsumerGroupHeartbeat(request, None)
        finally:
            caller.CALLER.reset(token)

    return asyncio.run(call())


def join(*names: str, regex: str = "") -> c.ConsumerGroupHeartbeatRequest:
    request = c.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)
    if regex:
        request.subscription.topic_regex = regex
    else:
        request.subscription.topic_names.extend(names)
    return request


def test_a_subscription_naming_undescribable_topics_is_refused_naming_them() -> None:
    answer = heartbeat(MayDescribe("a"), join("a", "z", "b", "z"))
    assert answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert f"{ALICE} may not DESCRIBE the subscribed topic(s) b, z" in answer.error_message
    assert (answer.member_id, answer.member_epoch) == ("m", 0)
    assert not answer.HasField("assignment")


@pytest.mark.parametrize(
    "request_",
    [
        join("a"),  # every name allowed
        join(regex="a.*"),  # regexes are not filtered per member
        c.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=3),  # no change
    ],
    ids=["allowed", "regex", "unchanged"],
)
def test_other_heartbeats_go_on_to_the_group(request_: c.ConsumerGroupHeartbeatRequest) -> None:
    with pytest.raises(LookupError, match="reached the group g"):
        heartbeat(MayDescribe("a"), request_)


def test_with_authorization_off_every_name_goes_on() -> None:
    with pytest.raises(LookupError):
        heartbeat(caller.EVERYONE, join("anything"))
