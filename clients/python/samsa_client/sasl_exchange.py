"""One SASL exchange over SaslService.SaslAuthenticate (proto/samsa/v1/security.proto), the
client's side. SCRAM: client-first, server-first, client-final, server-final with the session
ticket. OAUTHBEARER: a token from the OIDC provider (oidc_token.py's request, POSTed here with
urllib), sent in one message, answered with the ticket.

Theory of operation. The exchange runs on a TLS channel of its own, without the ticket plugin
(sasl_login.py: the plugin is what asks for it), opened for it and closed after it: a login runs
one per session lifetime. The requests are fed from a queue, so that client-final is computed
from the server-first the stream answered. The server's final message is verified
(ScramClient.check_server_final): a server that cannot prove it holds the user's credential is
refused like a wrong password, since the ticket it would hand out proves nothing. Refusals
(an error code in an answer, a SCRAM message that does not check out, the stream ending early)
raise LoginRefused; a server that cannot be reached raises its grpc.RpcError. A token endpoint
that answers an HTTP error with an OAuth error (a wrong client secret, an unknown client) is a
refusal too; one that cannot be reached raises OSError, retried as an unreachable server.
"""

from __future__ import annotations

import queue
import secrets
import urllib.error
import urllib.request

import grpc

from samsa.client.channels import CHANNEL_OPTIONS
from samsa.client.errors import code_of
from samsa.client.oidc_token import (
    TOKEN_RESPONSE_BYTES_MAX,
    TokenRefused,
    access_token,
    token_request,
)
from samsa.client.sasl_login import LoginRefused
from samsa.common.errors import ErrorCode
from samsa.common.scram import MECHANISMS, ScramClient, ScramError
from samsa.common.tls import OidcSettings, SaslSettings, TlsSettings
from samsa.v1 import security_pb2, security_pb2_grpc

# A call refused with one of these ended the exchange for a reason a retry does not change.
REFUSING_STATUSES = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
# The server ends an exchange not finished within 10 s (security.proto); so does the client.
EXCHANGE_TIMEOUT_S = 10.0
NONCE_BYTES = 24
# A token endpoint answers within this, or the login fails as an unreachable server's would.
TOKEN_TIMEOUT_S = 10.0


def scram_exchange(settings: SaslSettings, tls: TlsSettings, endpoint: str) -> tuple[str, int]:
    """A ticket and its lifetime (ms), from one exchange with `endpoint`."""
    client = ScramClient(
        MECHANISMS[settings.mechanism],
        settings.username,
        settings.password,
        secrets.token_urlsafe(NONCE_BYTES),
    )
    requests: queue.Queue[security_pb2.SaslAuthenticateRequest | None] = queue.Queue()
    requests.put(
        security_pb2.SaslAuthenticateRequest(
            mechanism=settings.mechanism, auth_bytes=client.client_first()
        )
    )
    channel = grpc.secure_channel(endpoint, tls.channel_credentials(), options=CHANNEL_OPTIONS)
    call = security_pb2_grpc.SaslServiceStub(channel).SaslAuthenticate(
        iter(requests.get, None), timeout=EXCHANGE_TIMEOUT_S
    )
    try:
        first = _answer(call, "server-first")
        try:
            final_request = client.client_final(first.auth_bytes)
        except ScramError as error:
            raise LoginRefused(f"server-first: {error}") from None
        requests.put(security_pb2.SaslAuthenticateRequest(auth_bytes=final_request))
        final = _answer(call, "server-final")
        try:
            client.check_server_final(final.auth_bytes)
        except ScramError as error:
            raise LoginRefused(str(error)) from None
        if not final.session_ticket:
            raise LoginRefused("the server answered no session ticket")
        return final.session_ticket, final.session_lifetime_ms
    finally:
        requests.put(None)
        call.cancel()
        channel.close()


def oauthbearer_exchange(
    settings: SaslSettings, tls: TlsSettings, endpoint: str
) -> tuple[str, int]:
    """A ticket and its lifetime (ms): a fresh token from the OIDC provider, sent to `endpoint`."""
    assert settings.oidc is not None
    token = fetch_token(settings.oidc)
    message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    request = security_pb2.SaslAuthenticateRequest(mechanism=settings.mechanism, auth_bytes=message)
    channel = grpc.secure_channel(endpoint, tls.channel_credentials(), options=CHANNEL_OPTIONS)
    call = security_pb2_grpc.SaslServiceStub(channel).SaslAuthenticate(
        iter([request]), timeout=EXCHANGE_TIMEOUT_S
    )
    try:
        answer = _answer(call, "the session ticket")
        if not answer.session_ticket:
            raise LoginRefused("the server answered no session ticket")
        return answer.session_ticket, answer.session_lifetime_ms
    finally:
        call.cancel()
        channel.close()


def fetch_token(oidc: OidcSettings) -> str:
    """An access token by the client_credentials grant; LoginRefused when the provider refuses,
    OSError when it cannot be reached."""
    request = token_request(oidc)
    http = urllib.request.Request(request.url, request.body, request.headers, method="POST")
    try:
        with urllib.request.urlopen(http, timeout=TOKEN_TIMEOUT_S) as answer:
            body = answer.read(TOKEN_RESPONSE_BYTES_MAX + 1)
    except urllib.error.HTTPError as error:
        if error.code >= 500:
            raise OSError(f"the token endpoint answered HTTP {error.code}") from None
        body = error.read(TOKEN_RESPONSE_BYTES_MAX + 1)
        try:
            access_token(body)
        except TokenRefused as refused:
            raise LoginRefused(f"HTTP {error.code}: {refused}") from None
        raise LoginRefused(f"the token endpoint answered HTTP {error.code}") from None
    try:
        return access_token(body)
    except TokenRefused as refused:
        raise LoginRefused(str(refused)) from None


def _answer(call: grpc.Call, step: str) -> security_pb2.SaslAuthenticateResponse:
    """The next answer of the exchange; LoginRefused for an error code in it, or for a stream
    that ended without it."""
    try:
        answer = next(call)  # type: ignore[call-overload]
    except StopIteration:
        raise LoginRefused(f"the server ended the exchange before {step}") from None
    except grpc.RpcError as error:
        if error.code() not in REFUSING_STATUSES:  # type: ignore[attr-defined]
            raise  # unreachable, overloaded, too slow: retried as any such call
        raise LoginRefused(f"{error.code().name}: {error.details()}") from None  # type: ignore[attr-defined]
    if answer.error_code != ErrorCode.NONE:
        detail = answer.error_message or code_of(answer.error_code).name
        if answer.enabled_mechanisms:
            detail += f" (enabled: {', '.join(answer.enabled_mechanisms)})"
        raise LoginRefused(detail)
    return answer
