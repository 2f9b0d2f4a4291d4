"""Goal: Admin.create_acls, describe_acls and delete_acls carry the core's values to the
controllers and back as Kafka's AdminClient answers them: per binding an error or None (the
valid ones created even when others are refused), the bindings a filter selects, per filter the
bindings deleted or its error; writes follow NOT_CONTROLLER to the active controller and reads
see them; SECURITY_DISABLED (authorization off) is raised as KafkaError.

Method: the real Admin over real gRPC on loopback against a controller of the test's own
making whose decisions are the real pure ones (acl_control.py) over an image committed with the
real replay, behind a second controller that answers NOT_CONTROLLER naming it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_acl_controller import AclController
from fake_controllers import serving_controllers

from samsa.client import (
    AclBinding,
    AclDeletion,
    AclFilter,
    Admin,
    KafkaError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc


class Elsewhere(controller_pb2_grpc.ControllerServiceServicer):
    """Not the active controller: every ACL write answers NOT_CONTROLLER naming `active`; reads
    are answered from the same image (a follower that is up to date)."""

    active = ""

    def __init__(self, replica: AclController) -> None:
        self.replica = replica

    def DescribeAcls(self, request, context):  # type: ignore[no-untyped-def]
        return self.replica.DescribeAcls(request, context)

    def _redirect(self, response):  # type: ignore[no-untyped-def]
        response.status.error_code = ErrorCode.NOT_CONTROLLER
        response.status.active_controller.endpoint = self.active
        return response

    def CreateAcls(self, request, context):  # type: ignore[no-untyped-def]
        return self._redirect(c.CreateAclsResponse())

    def DeleteAcls(self, request, context):  # type: ignore[no-untyped-def]
        return self._redirect(c.DeleteAclsResponse())


def _admin(enabled: bool) -> Iterator[tuple[Admin, AclController]]:
    active = AclController(enabled)
    other = Elsewhere(active)
    with serving_controllers(other, active) as endpoints:
        other.active = endpoints[1]
        with Admin({"bootstrap.servers": endpoints[0]}) as admin:
            yield admin, active


@pytest.fixture
def admin() -> Iterator[tuple[Admin, AclController]]:
    yield from _admin(enabled=True)


@pytest.fixture
def disabled_admin() -> Iterator[tuple[Admin, AclController]]:
    yield from _admin(enabled=False)


def acl(name: str, principal: str = "User:alice", op: Operation = Operation.READ) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, name, PatternType.LITERAL, principal, "*", op, Permission.ALLOW
    )


def test_create_describe_delete(admin) -> None:  # type: ignore[no-untyped-def]
    client, controller = admin
    bad = AclBinding(
        ResourceType.CLUSTER,
        "c",
        PatternType.LITERAL,
        "User:a",
        "*",
        Operation.ALTER,
        Permission.ALLOW,
    )
    outcome = client.create_acls([acl("orders"), bad, acl("orders", "User:bob")])
    assert outcome[acl("orders")] is None and outcome[acl("orders", "User:bob")] is None
    assert isinstance(outcome[bad], KafkaError)
    assert outcome[bad].code == ErrorCode.INVALID_REQUEST
    assert "kafka-cluster" in str(outcome[bad])
    assert client.create_acls([acl("orders")]) == {acl("orders"): None}, "exists: success"
    assert client.describe_acls() == sorted([acl("orders"), acl("orders", "User:bob")])
    assert controller.read_at[-1] == controller.image.end_offset, "reads see the writes"
    assert client.describe_acls(AclFilter(principal="User:bob")) == [acl("orders", "User:bob")]
    everything = AclFilter()
    results = client.delete_acls([AclFilter(principal="User:bob"), everything])
    assert results == [
        AclDeletion(AclFilter(principal="User:bob"), [acl("orders", "User:bob")]),
        AclDeletion(everything, sorted([acl("orders"), acl("orders", "User:bob")])),
    ]
    assert client.describe_acls() == []
    assert client.create_acls([]) == {} and client.delete_acls([]) == []


def test_a_wrong_type_is_refused_before_sending(admin) -> None:  # type: ignore[no-untyped-def]
    client, _ = admin
    with pytest.raises(TypeError, match="AclBinding"):
        client.create_acls([AclFilter()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="AclFilter"):
        client.delete_acls([acl("x")])  # type: ignore[list-item]


def test_security_disabled_is_raised(disabled_admin) -> None:  # type: ignore[no-untyped-def]
    client, controller = disabled_admin
    for call in (
        lambda: client.create_acls([acl("orders")]),
        lambda: client.describe_acls(),
        lambda: client.delete_acls([AclFilter()]),
    ):
        with pytest.raises(KafkaError, match=r"authorizer\.class\.name") as refused:
            call()
        assert refused.value.code == ErrorCode.SECURITY_DISABLED
    assert controller.image.end_offset == 0
