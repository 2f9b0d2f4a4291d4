"""Goal: every ACL refusal carries, besides its message, the trailing metadata a client in any
language acts on: `samsa-error-code` (Kafka's TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_
AUTHORIZATION_FAILED for the refused resource's type) and `samsa-resource` (`topic:orders`), on
unary calls and on request streams alike (a stream's refusal goes through the guard's abort), and
a members-only call or a certificate no mapping rule fits answers CLUSTER_AUTHORIZATION_FAILED.

Method: the harness of test_authorization_interceptor.py (a real grpc.aio TLS server in this
process with the RPC guard and the AuthorizingInterceptor) refuses calls; the trailing metadata is
read off the client's AioRpcError. The pure mapping (access_rules.refusal_code) is checked for
each resource type.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import CLUSTER_NAME, Acls, Operation, ResourceType
from samsa.services.runtime import access_rules
from samsa.v1 import broker_pb2, broker_pb2_grpc
from tests.unit.runtime.test_authorization_interceptor import ALICE, Harness, grant, run


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca(directory)
    return {
        "ca": ca,
        "server": issue(ca, directory, "broker-1", ["127.0.0.1"]),
        "alice": issue(ca, directory, "alice", []),
        "admin": issue(ca, directory, "admin", []),
    }


def _refusal(error: grpc.aio.AioRpcError) -> tuple[str, dict[str, str]]:
    return error.code().name, dict(error.trailing_metadata() or ())


async def _produce(
    harness: Harness, who: str, topic: str, txn: str = ""
) -> tuple[str, dict[str, str]]:
    """A Produce; its topics are decided per partition by the handler, its transactional id
    (and an internal topic) by the interceptor, whole."""
    async with harness.channel(who) as channel:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        request = broker_pb2.ProduceRequest(
            transactional_id=txn, topics=[broker_pb2.ProduceRequest.TopicData(name=topic)]
        )
        try:
            await stub.Produce(request, timeout=5)
        except grpc.aio.AioRpcError as error:
            return _refusal(error)
    return "OK", {}


def test_a_refused_unary_call_names_its_code_and_resource(pki) -> None:
    acls = Acls.empty().with_added([grant(ALICE, Operation.WRITE, "orders")])

    async def body(harness: Harness):
        return [
            await _produce(harness, "alice", "orders"),
            await _produce(harness, "alice", "orders", txn="tx"),
            await _produce(harness, "alice", "__consumer_offsets"),  # members only
        ]

    answers = run(pki, acls, body)
    assert answers[0] == ("OK", {})
    assert answers[1] == (
        "PERMISSION_DENIED",
        {"samsa-error-code": "53", "samsa-resource": "transactional-id:tx"},
    )
    assert answers[2] == (
        "PERMISSION_DENIED",
        {"samsa-error-code": "31", "samsa-resource": f"cluster:{CLUSTER_NAME}"},
    )


def test_a_refused_stream_message_names_its_code_and_resource(pki) -> None:
    acls = Acls.empty().with_added([grant(ALICE, Operation.WRITE, "orders")])

    async def body(harness: Harness):
        async def requests() -> AsyncIterator[broker_pb2.ProduceStreamRequest]:
            for correlation, txn in enumerate(["", "tx"]):
                yield broker_pb2.ProduceStreamRequest(
                    correlation_id=correlation,
                    request=broker_pb2.ProduceRequest(
                        transactional_id=txn,
                        topics=[broker_pb2.ProduceRequest.TopicData(name="orders")],
                    ),
                )
                await asyncio.sleep(0.05)

        async with harness.channel("alice") as channel:
            call = broker_pb2_grpc.BrokerServiceStub(channel).ProduceStream(requests(), timeout=5)
            try:
                async for _ in call:
                    pass
            except grpc.aio.AioRpcError as error:
                return _refusal(error)
        return "no refusal", {}

    assert run(pki, acls, body) == (
        "PERMISSION_DENIED",
        {"samsa-error-code": "53", "samsa-resource": "transactional-id:tx"},
    )


def test_a_certificate_no_rule_maps_is_refused_as_the_cluster(pki) -> None:
    async def body(harness: Harness):
        return await _produce(harness, "alice", "orders")

    answer = run(pki, Acls.empty(), body, rules="RULE:^CN=nobody,(.*)$/$1/")
    assert answer == (
        "UNAUTHENTICATED",
        {"samsa-error-code": "31", "samsa-resource": f"cluster:{CLUSTER_NAME}"},
    )


@pytest.mark.parametrize(
    ("resource_type", "name", "code", "resource"),
    [
        (ResourceType.TOPIC, "orders", ErrorCode.TOPIC_AUTHORIZATION_FAILED, "topic:orders"),
        (ResourceType.GROUP, "billing", ErrorCode.GROUP_AUTHORIZATION_FAILED, "group:billing"),
        (
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"cluster:{CLUSTER_NAME}",
        ),
        (
            ResourceType.TRANSACTIONAL_ID,
            "tx-1",
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactional-id:tx-1",
        ),
    ],
)
def test_each_resource_type_has_its_code(
    resource_type: ResourceType, name: str, code: ErrorCode, resource: str
) -> None:
    need = (access_rules.Access(Operation.READ, resource_type, name),)
    assert access_rules.refusal_code(need) == (code, resource)
    refusal = access_rules.refusal("User:bob", need)
    assert refusal.trailing_metadata == (
        ("samsa-error-code", str(int(code))),
        ("samsa-resource", resource),
    )
