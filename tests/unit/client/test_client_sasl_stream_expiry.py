"""Goal: the SDK tells a stream the server ended at its SASL ticket's expiry (KIP-368: code 58
with `samsa-sasl-session: expired`) from a refusal (code 58 alone). An expiry is no
AuthenticationError: every login drops its ticket (the reopened stream logs in again), a
ProduceStream's waiting requests fail with a retriable error (retried on a new stream; the
idempotent producer makes that safe), a consumer's fetch and a transactional call are retried as
after any broken stream. A refusal stays an AuthenticationError, raised at once.

Method: refusals.refusal_of / session_expired on statuses taken apart and on a fake RpcError; a
ProduceStream over a fake call that ends with that error; the transaction client's CallFailed
built from it. No gRPC, no server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from samsa.client.errors import AuthenticationError
from samsa.client.produce_message import EncodedRequest
from samsa.client.produce_stream import ProduceStream, StreamBroken, stream_error_outcome
from samsa.client.refusals import authorization_error, refusal_of, session_expired
from samsa.client.sasl_login import SaslLogin
from samsa.client.transaction_client import CallFailed
from samsa.common.errors import ErrorCode
from samsa.common.tls import SaslSettings

EXPIRED = (("samsa-error-code", "58"), ("samsa-sasl-session", "expired"))
REFUSED = (("samsa-error-code", "58"),)
DETAILS = "the SASL session of user 'alice' expired 3 ms ago: log in again and reopen the stream"


class Status(grpc.RpcError):
    """A failed call's status, as grpc.aio's AioRpcError gives it."""

    def __init__(self, trailing: tuple[tuple[str, str], ...], details: str = DETAILS) -> None:
        super().__init__(details)
        self._trailing = trailing
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAUTHENTICATED

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._trailing


class Exchanges:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, endpoint: str) -> tuple[str, int]:
        self.count += 1
        return f"ticket-{self.count}", 60_000


def a_login() -> SaslLogin:
    login = SaslLogin(SaslSettings("SCRAM-SHA-256", "alice", "secret"), Exchanges())
    assert login.ticket("b:1") == "ticket-1"
    return login


def test_an_expiry_is_not_a_refusal_but_drops_the_tickets() -> None:
    login = a_login()
    assert refusal_of(grpc.StatusCode.UNAUTHENTICATED, DETAILS, EXPIRED) is None
    assert login.state.session is None, "the reopened stream logs in again"
    assert login.ticket("b:1") == "ticket-2"


def test_a_refusal_without_the_marker_stays_an_authentication_error() -> None:
    login = a_login()
    refused = refusal_of(grpc.StatusCode.UNAUTHENTICATED, "deleted or replaced", REFUSED)
    assert isinstance(refused, AuthenticationError)
    assert login.state.session is None
    assert not session_expired(Status(REFUSED, "deleted or replaced"))
    assert isinstance(authorization_error(Status(REFUSED)), AuthenticationError)
    # the marker without code 58 is no expiry: whatever the code says
    other = (("samsa-error-code", "31"), ("samsa-sasl-session", "expired"))
    assert refusal_of(grpc.StatusCode.UNAUTHENTICATED, "no", other) is not None


def test_session_expired_reads_an_rpc_error() -> None:
    login = a_login()
    assert session_expired(Status(EXPIRED))
    assert login.state.session is None
    assert authorization_error(Status(EXPIRED)) is None


def test_a_transactional_call_on_an_expired_stream_is_retried() -> None:
    failed = CallFailed(grpc.StatusCode.UNAUTHENTICATED, DETAILS, Status(EXPIRED))
    assert failed.refused is None, "retried as an unanswered call, not raised"
    refused = CallFailed(grpc.StatusCode.UNAUTHENTICATED, "no", Status(REFUSED))
    assert isinstance(refused.refused, AuthenticationError)


class EndingCall:
    """A ProduceStream call the server ends with `error` once the test says so."""

    def __init__(self, outgoing: AsyncIterator[bytes], error: grpc.RpcError) -> None:
        self.outgoing = outgoing
        self.error = error
        self.end = asyncio.Event()

    def __aiter__(self) -> EndingCall:
        return self

    async def __anext__(self) -> object:
        await self.end.wait()
        raise self.error

    def cancel(self) -> bool:
        return True


def produce_outcome(error: grpc.RpcError) -> grpc.RpcError:
    """What a request waiting on a ProduceStream gets when the server ends it with `error`."""

    async def run() -> grpc.RpcError:
        calls: list[EndingCall] = []

        def open_call(outgoing: AsyncIterator[bytes]) -> EndingCall:
            calls.append(EndingCall(outgoing, error))
            return calls[-1]

        stream = ProduceStream(open_call)  # type: ignore[arg-type]
        outcome: asyncio.Future[grpc.RpcError] = asyncio.get_running_loop().create_future()
        assert stream.send(EncodedRequest([], 0), lambda r, e: outcome.set_result(e), 30)
        calls[0].end.set()
        failure = await asyncio.wait_for(outcome, 10)
        assert stream.broken, "the next send opens another"
        await stream.close()
        return failure

    return asyncio.run(run())


def test_a_produce_stream_ended_at_expiry_fails_its_requests_as_retriable() -> None:
    login = a_login()
    error = produce_outcome(Status(EXPIRED))
    assert isinstance(error, StreamBroken) and error.code() == grpc.StatusCode.UNAVAILABLE
    assert error.details() == DETAILS
    assert authorization_error(error) is None
    assert stream_error_outcome(error) == (ErrorCode.NETWORK_EXCEPTION, True)
    assert login.state.session is None


def test_a_produce_stream_refused_mid_way_is_still_an_authentication_error() -> None:
    error = produce_outcome(Status(REFUSED, "deleted or replaced"))
    assert isinstance(authorization_error(error), AuthenticationError)
