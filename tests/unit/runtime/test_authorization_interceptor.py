"""Goal: with an authorizer, a call is decided before its servicer runs, from the principal its TLS
client certificate names (mapped by ssl.principal.mapping.rules; User:ANONYMOUS without one) and
the peer's host; each message of a request stream is decided as it is read; a call carrying a
valid membership proof is the cluster's own and skips ACLs; a refusal is PERMISSION_DENIED naming
who, what and how to grant it. Produce decides its topics in the handler (caller.topic_refusals,
the caller the interceptor sets): a refused topic is answered TOPIC_AUTHORIZATION_FAILED with the
same message, and a ProduceStream goes on after one.

Method: a real grpc.aio server in this process on a loopback TLS port, with the RPC guard and the
AuthorizingInterceptor as a service has them, serving a fake BrokerService (Produce,
ProduceStream, each refusing topics as the real one does) and ControllerService (DescribeCluster)
that record what they wrote; clients
dial with certificates of the same CA (alice, bob) or none. The ACLs are an `Acls` built here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.common.errors import ErrorCode
from samsa.common.tls import TlsSettings
from samsa.metadata.acls import (
    AclBinding,
    Acls,
    AuthorizerSettings,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.runtime import membership
from samsa.services.runtime.authorization import Authorization, AuthorizingInterceptor, host_of
from samsa.services.runtime.caller import topic_refusals
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.server import RpcGuard
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc

KEY = membership.derive_key("cluster secret")
PRODUCE = "/samsa.v1.BrokerService/Produce"


def grant(principal: str, operation: Operation, topic: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        PatternType.LITERAL,
        principal,
        "*",
        operation,
        Permission.ALLOW,
    )


class FakeBroker(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self) -> None:
        self.produced: list[str] = []

    def _produce(self, request: broker_pb2.ProduceRequest) -> broker_pb2.ProduceResponse:
        refused = topic_refusals(Operation.WRITE)
        response = broker_pb2.ProduceResponse()
        for topic in request.topics:
            why = None if refused is None else refused(topic.name)
            result = response.topics.add(name=topic.name).partitions.add(partition=0)
            if why is None:
                self.produced.append(topic.name)
            else:
                result.error_code, result.error_message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, why
        return response

    async def Produce(self, request, context):
        return self._produce(request)

    async def ProduceStream(self, requests, context):
        async for message in requests:
            response = self._produce(message.request)
            yield broker_pb2.ProduceStreamResponse(
                correlation_id=message.correlation_id, response=response
            )


def refused_topic(response: broker_pb2.ProduceResponse) -> str:
    """ "OK", or the first partition's refusal: "TOPIC_AUTHORIZATION_FAILED: <message>"."""
    for topic in response.topics:
        for result in topic.partitions:
            if result.error_code:
                return f"{ErrorCode(result.error_code).name}: {result.error_message}"
    return "OK"


class FakeController(controller_pb2_grpc.ControllerServiceServicer):
    async def DescribeCluster(self, request, context):
        return controller_pb2.DescribeClusterResponse()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca(directory)
    return {
        "ca": ca,
        "server": issue(ca, directory, "broker-1", ["127.0.0.1"]),
        "alice": issue(ca, directory, "alice", []),
        "bob": issue(ca, directory, "bob", []),
        "admin": issue(ca, directory, "admin", []),
    }


def tls(pair: KeyPair | None, ca: KeyPair, client_auth: str = "none") -> TlsSettings:
    return TlsSettings.load(
        ca_location=str(ca.certificate),
        certificate_location=None if pair is None else str(pair.certificate),
        key_location=None if pair is None else str(pair.key),
        client_auth=client_auth,
    )


class Harness:
    """A TLS server with the guard and the authorizer; `call` dials it as someone."""

    def __init__(self, pki: dict[str, KeyPair], acls: Acls, rules: str = "DEFAULT") -> None:
        self.pki = pki
        self.acls = acls
        self.broker = FakeBroker()
        self.authorization = Authorization(
            settings=AuthorizerSettings(super_users=frozenset({"User:CN=admin,O=samsa"})),
            rules=PrincipalRules.parse(rules),
            acls=lambda: self.acls,
            member_key=KEY,
        )
        self.server = grpc.aio.server(
            interceptors=[RpcGuard(), AuthorizingInterceptor(self.authorization)]
        )
        broker_pb2_grpc.add_BrokerServiceServicer_to_server(self.broker, self.server)
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(FakeController(), self.server)
        credentials = tls(pki["server"], pki["ca"], "required").server_credentials()
        self.port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.plain_port = self.server.add_insecure_port("127.0.0.1:0")  # User:ANONYMOUS

    def channel(self, who: str | None) -> grpc.aio.Channel:
        """TLS with `who`'s certificate; plaintext for None."""
        if who is None:
            return grpc.aio.insecure_channel(f"127.0.0.1:{self.plain_port}")
        credentials = tls(self.pki[who], self.pki["ca"]).channel_credentials()
        return grpc.aio.secure_channel(f"127.0.0.1:{self.port}", credentials)


async def produce(harness: Harness, who: str | None, topic: str, metadata=None) -> str:
    """ "OK", or the refusal: "<code>: <details>"."""
    async with harness.channel(who) as channel:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        request = broker_pb2.ProduceRequest(
            topics=[broker_pb2.ProduceRequest.TopicData(name=topic)]
        )
        try:
            return refused_topic(await stub.Produce(request, timeout=5, metadata=metadata))
        except grpc.aio.AioRpcError as error:
            return f"{error.code().name}: {error.details()}"


def run(pki: dict[str, KeyPair], acls: Acls, body, rules: str = "DEFAULT"):
    async def main():
        harness = Harness(pki, acls, rules)
        await harness.server.start()
        try:
            return await body(harness)
        finally:
            await harness.server.stop(0)

    return asyncio.run(main())


ALICE = "User:CN=alice,O=samsa"


def test_a_granted_call_reaches_the_servicer_and_a_refused_one_does_not(pki) -> None:
    acls = Acls.empty().with_added([grant(ALICE, Operation.WRITE, "orders")])

    async def body(harness: Harness):
        answers = [
            await produce(harness, "alice", "orders"),
            await produce(harness, "alice", "other"),
            await produce(harness, "bob", "orders"),
            await produce(harness, None, "orders"),
            await produce(harness, "admin", "other"),  # a super user
        ]
        return answers, harness.broker.produced

    answers, produced = run(pki, acls, body)
    assert answers[0] == "OK"
    assert answers[1] == (
        "TOPIC_AUTHORIZATION_FAILED: User:CN=alice,O=samsa may not WRITE topic other (no ALLOW "
        "ACL, or a DENY one; samsa acls --add --allow-principal User:CN=alice,O=samsa "
        "--operation Write --topic other)"
    )
    assert answers[2].startswith("TOPIC_AUTHORIZATION_FAILED: User:CN=bob,O=samsa may not WRITE")
    assert answers[3].startswith(
        "TOPIC_AUTHORIZATION_FAILED: User:ANONYMOUS may not WRITE topic orders"
    )
    assert answers[4] == "OK"
    assert produced == ["orders", "other"]


def test_the_mapping_rules_name_the_principal(pki) -> None:
    acls = Acls.empty().with_added([grant("User:alice", Operation.WRITE, "orders")])

    async def body(harness: Harness):
        return [await produce(harness, "alice", "orders"), await produce(harness, "bob", "orders")]

    answers = run(pki, acls, body, rules="RULE:^CN=([^,]*),.*$/$1/L,DEFAULT")
    assert answers[0] == "OK"
    assert answers[1].startswith("TOPIC_AUTHORIZATION_FAILED: User:bob may not WRITE topic orders")


def test_a_membership_proof_skips_the_acls_and_a_bad_one_does_not(pki) -> None:
    good = MemberSigner(KEY, 3).metadata(PRODUCE)
    foreign = MemberSigner(membership.derive_key("another secret"), 3).metadata(PRODUCE)

    async def body(harness: Harness):
        return [
            await produce(harness, "bob", "__consumer_offsets", good),
            await produce(harness, "bob", "orders", good),
            await produce(harness, "bob", "orders", foreign),
            await produce(harness, "bob", "__consumer_offsets"),
        ]

    answers = run(pki, Acls.empty(), body)
    assert answers[:2] == ["OK", "OK"]
    assert answers[2].startswith("TOPIC_AUTHORIZATION_FAILED: User:CN=bob,O=samsa may not WRITE")
    assert answers[3].startswith(
        "PERMISSION_DENIED: User:CN=bob,O=samsa may not call Produce: __consumer_offsets is "
        "internal"
    )


def test_anyone_may_describe_the_cluster(pki) -> None:
    async def body(harness: Harness):
        async with harness.channel("bob") as channel:
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            await stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=5)
        return "OK"

    assert run(pki, Acls.empty(), body) == "OK"


def test_each_stream_message_is_decided_as_it_is_read(pki) -> None:
    acls = Acls.empty().with_added([grant(ALICE, Operation.WRITE, "orders")])

    async def body(harness: Harness):
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        async def requests() -> AsyncIterator[broker_pb2.ProduceStreamRequest]:
            correlation = 0
            while (topic := await queue.get()) is not None:
                correlation += 1
                yield broker_pb2.ProduceStreamRequest(
                    correlation_id=correlation,
                    request=broker_pb2.ProduceRequest(
                        topics=[broker_pb2.ProduceRequest.TopicData(name=topic)]
                    ),
                )

        async with harness.channel("alice") as channel:
            call = broker_pb2_grpc.BrokerServiceStub(channel).ProduceStream(requests(), timeout=5)
            await queue.put("orders")
            first = await call.read()
            await queue.put("other")
            refusal = refused_topic((await call.read()).response)
            harness.acls = harness.acls.with_added([grant(ALICE, Operation.WRITE, "other")])
            await queue.put("other")  # the same stream sees the ACLs change
            later = refused_topic((await call.read()).response)
            await queue.put(None)
        return first.correlation_id, refusal, later, harness.broker.produced

    correlation, refusal, later, produced = run(pki, acls, body)
    assert correlation == 1
    assert refusal.startswith(
        "TOPIC_AUTHORIZATION_FAILED: User:CN=alice,O=samsa may not WRITE topic other"
    )
    assert later == "OK"
    assert produced == ["orders", "other"]


def test_an_acl_added_later_is_seen_by_the_next_call(pki) -> None:
    async def body(harness: Harness):
        before = await produce(harness, "alice", "orders")
        assert harness.broker.produced == []
        harness.acls = harness.acls.with_added([grant(ALICE, Operation.WRITE, "orders")])
        return before, await produce(harness, "alice", "orders")

    before, after = run(pki, Acls.empty(), body)
    assert before.startswith("TOPIC_AUTHORIZATION_FAILED")
    assert after == "OK"


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:127.0.0.1:5555", "127.0.0.1"),
        ("ipv6:[::1]:5555", "::1"),
        ("ipv6:[2001:db8::7]:80", "2001:db8::7"),
        ("unix:/tmp/socket", ""),
        (None, ""),
    ],
)
def test_the_host_is_the_peer_address(peer: str | None, host: str) -> None:
    assert host_of(peer) == host
