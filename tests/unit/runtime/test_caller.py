"""Goal: a handler can ask about its caller without grpc plumbing (caller.py): with an authorizer
the interceptor sets a caller whose `may` answers from the caller's ACLs (a super user and a
cluster member's call may do anything); unset (authorization off) everyone may do anything; a
listing filter shows everything to a caller with DESCRIBE on the cluster, else what it may
DESCRIBE.

Method: the pure helpers with a fake caller; then a real grpc.aio TLS server in this process with
the guard and the AuthorizingInterceptor (test_authorization_interceptor's certificates), whose
fake DescribeTopics answers the names of a fixed list that `caller.topics_visible()` admits (each
name asked for, a refused one with the caller's `principal()`), and
ListGroups those of `caller.listing_filter`, as the real servicers pass them to their cores.
"""

from __future__ import annotations

import asyncio

import grpc
from test_authorization_interceptor import KEY, pki, tls  # noqa: F401  (pki: a fixture)

from samsa.metadata.acls import (
    CLUSTER_NAME,
    AclBinding,
    Acls,
    AuthorizerSettings,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.runtime import caller
from samsa.services.runtime.authorization import Authorization, AuthorizingInterceptor
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.server import RpcGuard
from samsa.v1 import controller_pb2, controller_pb2_grpc, coordinator_pb2_grpc
from samsa.v1 import coordinator_pb2 as g

ALICE = "User:CN=alice,O=samsa"
NAMES = ["a-1", "a-2", "b-1"]
DESCRIBE_TOPICS = "/samsa.v1.ControllerService/DescribeTopics"


class Allowed:
    """A fake caller allowed exactly these (operation, type, name)."""

    def __init__(self, *allowed: tuple[Operation, ResourceType, str]) -> None:
        self.allowed = set(allowed)

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return (operation, resource_type, name) in self.allowed

    def principal(self) -> str:
        return ALICE


def test_unset_the_caller_is_everyone_and_nothing_is_filtered() -> None:
    assert caller.current_caller() is caller.EVERYONE
    assert caller.topics_visible() is caller.everything
    assert caller.listing_filter(caller.EVERYONE, ResourceType.GROUP) is caller.everything


def test_a_listing_shows_all_with_describe_on_the_cluster_else_what_may_be_described() -> None:
    cluster = Allowed((Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME))
    assert caller.listing_filter(cluster, ResourceType.GROUP)("anything")
    one = Allowed((Operation.DESCRIBE, ResourceType.GROUP, "mine"))
    shown = caller.listing_filter(one, ResourceType.GROUP)
    assert [shown(name) for name in ("mine", "other")] == [True, False]
    topics = caller.visible(one, Operation.DESCRIBE, ResourceType.TOPIC)
    assert not topics("mine")  # a group's grant is not a topic's


class FakeController(controller_pb2_grpc.ControllerServiceServicer):
    async def DescribeTopics(self, request, context):
        visible = caller.topics_visible()
        Topic = controller_pb2.DescribeTopicsResponse.Topic
        if request.names:  # each name answered; a refused one names the caller
            who = caller.current_caller().principal
            topics = [Topic(name=n, error_message="" if visible(n) else who()) for n in NAMES]
        else:
            topics = [Topic(name=n) for n in NAMES if visible(n)]
        return controller_pb2.DescribeTopicsResponse(topics=topics)


class FakeGroups(coordinator_pb2_grpc.GroupCoordinatorServiceServicer):
    async def ListGroups(self, request, context):
        visible = caller.listing_filter(caller.current_caller(), ResourceType.GROUP)
        return g.ListGroupsResponse(groups=[g.ListedGroup(group_id=n) for n in NAMES if visible(n)])


def prefixed(resource_type: ResourceType, prefix: str) -> AclBinding:
    return AclBinding(
        resource_type,
        prefix,
        PatternType.PREFIXED,
        ALICE,
        "*",
        Operation.DESCRIBE,
        Permission.ALLOW,
    )


def listed(pki, acls: Acls, calls) -> list[list[str]]:  # noqa: F811
    """For each (who, method, metadata) of `calls`: the names its answer lists."""

    async def main() -> list[list[str]]:
        authorization = Authorization(
            settings=AuthorizerSettings(super_users=frozenset({"User:CN=admin,O=samsa"})),
            rules=PrincipalRules.parse("DEFAULT"),
            acls=lambda: acls,
            member_key=KEY,
        )
        server = grpc.aio.server(interceptors=[RpcGuard(), AuthorizingInterceptor(authorization)])
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(FakeController(), server)
        coordinator_pb2_grpc.add_GroupCoordinatorServiceServicer_to_server(FakeGroups(), server)
        credentials = tls(pki["server"], pki["ca"], "required").server_credentials()
        port = server.add_secure_port("127.0.0.1:0", credentials)
        await server.start()
        answers = []
        try:
            for who, method, metadata in calls:
                channel_credentials = tls(pki[who], pki["ca"]).channel_credentials()
                async with grpc.aio.secure_channel(f"127.0.0.1:{port}", channel_credentials) as ch:
                    if method in ("topics", "named"):
                        stub = controller_pb2_grpc.ControllerServiceStub(ch)
                        names = NAMES if method == "named" else []
                        request = controller_pb2.DescribeTopicsRequest(names=names)
                        answer = await stub.DescribeTopics(request, timeout=5, metadata=metadata)
                        answers.append([t.name + t.error_message for t in answer.topics])
                    else:
                        groups = coordinator_pb2_grpc.GroupCoordinatorServiceStub(ch)
                        answer = await groups.ListGroups(g.ListGroupsRequest(), timeout=5)
                        answers.append([group.group_id for group in answer.groups])
        finally:
            await server.stop(0)
        return answers

    return asyncio.run(main())


def test_through_the_interceptor_each_caller_lists_what_it_may_describe(pki) -> None:  # noqa: F811
    acls = Acls.empty().with_added(
        [prefixed(ResourceType.TOPIC, "a-"), prefixed(ResourceType.GROUP, "b-")]
    )
    member = MemberSigner(KEY, 3).metadata(DESCRIBE_TOPICS)
    answers = listed(
        pki,
        acls,
        [
            ("alice", "topics", None),
            ("bob", "topics", None),
            ("admin", "topics", None),  # a super user
            ("bob", "topics", member),  # a cluster member's call
            ("alice", "groups", None),
            ("bob", "groups", None),
        ],
    )
    assert answers == [["a-1", "a-2"], [], NAMES, NAMES, ["b-1"], []]


def test_describe_on_the_cluster_lists_every_group(pki) -> None:  # noqa: F811
    cluster = AclBinding(
        ResourceType.CLUSTER,
        CLUSTER_NAME,
        PatternType.LITERAL,
        ALICE,
        "*",
        Operation.DESCRIBE,
        Permission.ALLOW,
    )
    answers = listed(pki, Acls.empty().with_added([cluster]), [("alice", "groups", None)])
    assert answers == [NAMES]


def test_named_topics_reach_the_handler_which_learns_who_asked(pki) -> None:  # noqa: F811
    """Named DescribeTopics is not refused whole by the interceptor: the handler answers each
    name, and a refused one with the caller's principal (metadata_reads.describe_topics)."""
    acls = Acls.empty().with_added([prefixed(ResourceType.TOPIC, "a-")])
    member = MemberSigner(KEY, 3).metadata(DESCRIBE_TOPICS)
    answers = listed(pki, acls, [("alice", "named", None), ("bob", "named", member)])
    assert answers == [["a-1", "a-2", f"b-1{ALICE}"], NAMES]
