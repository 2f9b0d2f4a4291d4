"""Goal: over real gRPC and TLS, a client that runs one SCRAM exchange with SaslService gets a
ticket, and with it its calls pass the SASL gate as User:<name>, the principal the authorizer and
the servicer (and a stream's reader task) see; a wrong password answers SASL_AUTHENTICATION_FAILED;
a call without a ticket, or whose credential has changed since, answers UNAUTHENTICATED with
`samsa-error-code: 58`; an open stream ends so at its next message when the credential changes,
and at its ticket's expiry too, then with the marker `samsa-sasl-session: expired` (KIP-368: log
in again, not a refusal); the cluster's own calls (membership proof) and health checks need no
ticket; an exchange left waiting ends with DEADLINE_EXCEEDED.

Method: a grpc.aio server on 127.0.0.1 in this process, TLS with certificates made as the other
tests make them, with the RPC guard, the SASL gate and the authorizer (User:alice a super user)
(its clock skewed on demand) in front of small fake servicers that record the principal they see;
driven by a gRPC client using common.scram.ScramClient.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.common.tls import TlsSettings
from samsa.metadata.acls import Acls, AuthorizerSettings
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.runtime import sasl_exchange, sasl_tickets
from samsa.services.runtime.authorization import (
    Authorization,
    AuthorizingInterceptor,
    principal_of,
)
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.sasl_gate import SaslConfig
from samsa.services.runtime.sasl_interceptor import SaslGateInterceptor
from samsa.services.runtime.sasl_servicer import SaslServicer
from samsa.services.runtime.server import RpcGuard
from samsa.v1 import (
    broker_pb2,
    broker_pb2_grpc,
    coordinator_pb2,
    coordinator_pb2_grpc,
    security_pb2,
    security_pb2_grpc,
)

KEY = b"k" * 32
RULES = PrincipalRules.parse("DEFAULT")
FIND = "/samsa.v1.CoordinatorLookupService/FindCoordinator"


def credential(password: str) -> scram.ScramCredential:
    salt = b"salt-" + password.encode()
    return scram.credential_for_password(scram.SCRAM_SHA_512, password, salt)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca(directory)
    return {"ca": ca, "server": issue(ca, directory, "broker-1", ["127.0.0.1"])}


class Lookup(coordinator_pb2_grpc.CoordinatorLookupServiceServicer):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def FindCoordinator(self, request: Any, context: Any) -> Any:
        self.seen.append(principal_of(context, RULES))
        return coordinator_pb2.FindCoordinatorResponse()


class Broker(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def FetchStream(self, request_iterator: Any, context: Any) -> Any:
        async def read() -> int:  # a reader task, as the real streams have
            count = 0
            async for _request in request_iterator:
                self.seen.append(principal_of(context, RULES))
                count += 1
            return count

        for _ in range(await asyncio.create_task(read())):
            yield broker_pb2.FetchStreamResponse()


class Harness:
    def __init__(self, pki: dict[str, KeyPair]) -> None:
        self.pki = pki
        self.credentials = {("alice", 2): credential("alice-pw"), ("bob", 2): credential("bob-pw")}
        sasl = SaslConfig((scram.SCRAM_SHA_512,), 60_000).bind(KEY, lambda: self.credentials)
        self.skew_ms = 0  # added to the gate's clock: 60_000 is past every ticket's lifetime
        authorization = Authorization(
            AuthorizerSettings(super_users=frozenset({"User:alice"})), RULES, Acls.empty, KEY
        )
        self.server = grpc.aio.server(
            interceptors=[
                RpcGuard(),
                SaslGateInterceptor(sasl, lambda: int(time.time() * 1000) + self.skew_ms),
                AuthorizingInterceptor(authorization),
            ]
        )
        self.lookup, self.broker = Lookup(), Broker()
        lookup_servicer = coordinator_pb2_grpc.add_CoordinatorLookupServiceServicer_to_server
        lookup_servicer(self.lookup, self.server)
        broker_pb2_grpc.add_BrokerServiceServicer_to_server(self.broker, self.server)
        security_pb2_grpc.add_SaslServiceServicer_to_server(SaslServicer(sasl), self.server)
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), self.server)
        settings = TlsSettings.load(
            ca_location=str(pki["ca"].certificate),
            certificate_location=str(pki["server"].certificate),
            key_location=str(pki["server"].key),
            client_auth="none",
        )
        self.port = self.server.add_secure_port("127.0.0.1:0", settings.server_credentials())

    def channel(self) -> grpc.aio.Channel:
        settings = TlsSettings.load(
            ca_location=str(self.pki["ca"].certificate),
            certificate_location=None,
            key_location=None,
            client_auth="none",
        )
        return grpc.aio.secure_channel(f"127.0.0.1:{self.port}", settings.channel_credentials())


def run(pki: dict[str, KeyPair], body: Any) -> Any:
    async def main() -> Any:
        harness = Harness(pki)
        await harness.server.start()
        try:
            async with harness.channel() as channel:
                return await body(harness, channel)
        finally:
            await harness.server.stop(0)

    return asyncio.run(main())


async def authenticate(channel: grpc.aio.Channel, user: str, password: str) -> Any:
    """The last response of one exchange (the ticket's, or the error's)."""
    client = scram.ScramClient(scram.SCRAM_SHA_512, user, password, "client-nonce-1")
    call = security_pb2_grpc.SaslServiceStub(channel).SaslAuthenticate(timeout=10)
    await call.write(
        security_pb2.SaslAuthenticateRequest(
            mechanism="SCRAM-SHA-512", auth_bytes=client.client_first()
        )
    )
    first = await call.read()
    assert first.error_code == ErrorCode.NONE, first
    await call.write(
        security_pb2.SaslAuthenticateRequest(auth_bytes=client.client_final(first.auth_bytes))
    )
    final = await call.read()
    if final.error_code == ErrorCode.NONE:
        client.check_server_final(final.auth_bytes)
    assert await call.read() is grpc.aio.EOF  # one exchange per stream
    return final


async def find(channel: grpc.aio.Channel, metadata: Any = ()) -> tuple[str, dict[str, str]]:
    stub = coordinator_pb2_grpc.CoordinatorLookupServiceStub(channel)
    try:
        await stub.FindCoordinator(
            coordinator_pb2.FindCoordinatorRequest(keys=["g"]), metadata=metadata, timeout=5
        )
    except grpc.aio.AioRpcError as error:
        return f"{error.code().name}: {error.details()}", dict(error.trailing_metadata() or ())
    return "OK", {}


def ticket_of(response: Any) -> tuple[tuple[str, str], ...]:
    return ((sasl_tickets.METADATA_KEY, response.session_ticket),)


def test_a_good_password_gets_a_ticket_that_lets_calls_through_as_the_user(pki) -> None:
    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        alice = await authenticate(channel, "alice", "alice-pw")
        assert alice.session_lifetime_ms == 60_000 and alice.session_ticket
        answer = await find(channel, ticket_of(alice))
        stream = broker_pb2_grpc.BrokerServiceStub(channel).FetchStream(
            iter([broker_pb2.FetchStreamRequest()] * 2), metadata=ticket_of(alice), timeout=5
        )
        answers = [response async for response in stream]
        bob = await find(channel, ticket_of(await authenticate(channel, "bob", "bob-pw")))
        return answer, len(answers), bob

    answer, streamed, bob = run(pki, body)
    assert answer == ("OK", {})
    assert streamed == 2
    assert bob[0].startswith("PERMISSION_DENIED: User:bob may not")  # the authorizer saw bob


def test_the_servicer_and_a_streams_reader_see_the_sasl_principal(pki) -> None:
    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        alice = await authenticate(channel, "alice", "alice-pw")
        await find(channel, ticket_of(alice))
        stream = broker_pb2_grpc.BrokerServiceStub(channel).FetchStream(
            iter([broker_pb2.FetchStreamRequest()]), metadata=ticket_of(alice), timeout=5
        )
        _ = [response async for response in stream]
        return harness.lookup.seen, harness.broker.seen

    assert run(pki, body) == (["User:alice"], ["User:alice"])


def test_a_wrong_password_and_an_unknown_user_fail_alike(pki) -> None:
    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        return [
            await authenticate(channel, "alice", "guess"),
            await authenticate(channel, "mallory", "alice-pw"),
        ]

    wrong, unknown = run(pki, body)
    for answer in (wrong, unknown):
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert not answer.session_ticket
    assert wrong.error_message == unknown.error_message


def test_calls_without_a_valid_ticket_are_unauthenticated_with_code_58(pki) -> None:
    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        alice = await authenticate(channel, "alice", "alice-pw")
        before = await find(channel, ticket_of(alice))
        harness.credentials[("alice", 2)] = credential("new-pw")  # the password changed
        return [
            await find(channel),
            await find(channel, ((sasl_tickets.METADATA_KEY, "forged"),)),
            before,
            await find(channel, ticket_of(alice)),
        ], harness.lookup.seen

    (none, forged, before, revoked), seen = run(pki, body)
    code = {"samsa-error-code": "58"}
    assert none == (
        "UNAUTHENTICATED: this cluster requires SASL: set security.protocol=SASL_SSL, "
        "sasl.mechanism, and sasl.username and sasl.password (SCRAM) or the sasl.oauthbearer.* "
        "keys (OAUTHBEARER)",
        code,
    )
    assert forged[0].startswith("UNAUTHENTICATED: the SASL ticket is refused") and forged[1] == code
    assert before == ("OK", {})
    assert "was deleted or replaced" in revoked[0] and revoked[1] == code
    assert seen == ["User:alice"]  # no refused call reached the servicer


def test_members_and_health_checks_need_no_ticket(pki) -> None:
    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        member = await find(channel, MemberSigner(KEY, 1).metadata(FIND))
        checked = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
        return member, checked.status

    assert run(pki, body) == (("OK", {}), health_pb2.HealthCheckResponse.SERVING)


def test_an_exchange_left_waiting_ends_with_deadline_exceeded(pki, monkeypatch) -> None:
    monkeypatch.setattr(sasl_exchange, "EXCHANGE_MS_MAX", 200)

    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        call = security_pb2_grpc.SaslServiceStub(channel).SaslAuthenticate(timeout=10)
        try:
            await call.read()
        except grpc.aio.AioRpcError as error:
            return error.code()
        return None

    assert run(pki, body) == grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_stream_without_a_ticket_is_refused_as_it_opens(pki) -> None:
    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        stream = broker_pb2_grpc.BrokerServiceStub(channel).FetchStream(
            iter([broker_pb2.FetchStreamRequest()]), timeout=5
        )
        try:
            _ = [response async for response in stream]
        except grpc.aio.AioRpcError as error:
            return error.code().name, dict(error.trailing_metadata() or ()), harness.broker.seen
        return None

    assert run(pki, body) == ("UNAUTHENTICATED", {"samsa-error-code": "58"}, [])


@pytest.mark.parametrize("ending", ["expired", "revoked"])
def test_an_open_stream_ends_at_its_tickets_expiry_with_the_marker(pki, ending: str) -> None:
    """The first message passes; the next, after the ticket expired (or the password changed),
    ends the stream UNAUTHENTICATED with code 58; only an expiry carries the marker."""

    async def body(harness: Harness, channel: grpc.aio.Channel) -> Any:
        bob = await authenticate(channel, "bob", "bob-pw")
        stream = broker_pb2_grpc.BrokerServiceStub(channel).FetchStream(
            metadata=ticket_of(bob), timeout=10
        )
        await stream.write(broker_pb2.FetchStreamRequest())
        async with asyncio.timeout(10):
            while not harness.broker.seen:  # the first message passed the gate
                await asyncio.sleep(0.01)
        if ending == "expired":
            harness.skew_ms = 60_000  # the ticket's lifetime (60 s) has passed
        else:
            harness.credentials[("bob", 2)] = credential("new-pw")
        try:
            await stream.write(broker_pb2.FetchStreamRequest())
            await stream.read()
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass
        trailing = dict(await stream.trailing_metadata() or ())
        return await stream.code(), await stream.details(), trailing, harness.broker.seen

    code, details, trailing, seen = run(pki, body)
    assert code == grpc.StatusCode.UNAUTHENTICATED and seen == ["User:bob"]
    if ending == "expired":
        assert trailing == {"samsa-error-code": "58", "samsa-sasl-session": "expired"}
        assert details.startswith("the SASL session of user 'bob' expired"), details
        assert details.endswith("log in again and reopen the stream"), details
    else:
        assert trailing == {"samsa-error-code": "58"}  # a refusal: no marker
        assert "was deleted or replaced" in details, details
