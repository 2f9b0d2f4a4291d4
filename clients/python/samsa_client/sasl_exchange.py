"""One SCRAM exchange over SaslService.SaslAuthenticate (proto/samsa/v1/security.proto), the
client's side: client-first, server-first, client-final, server-final with the session ticket.

Theory of operation. The exchange runs on a TLS channel of its own, without the ticket plugin
(sasl_login.py: the plugin is what asks for it), opened for it and closed after it: a login runs
one per session lifetime. The requests are fed from a queue, so that client-final is computed
from the server-first the stream answered. The server's final message is verified
(ScramClient.check_server_final): a server that cannot prove it holds the user's credential is
refused like a wrong password, since the ticket it would hand out proves nothing. Refusals
(an error code in an answer, a SCRAM message that does not check out, the stream ending early)
raise LoginRefused; a server that cannot be reached raises its grpc.RpcError.
"""

from __future__ import annotations

import queue
import secrets

import grpc

from samsa.client.channels import CHANNEL_OPTIONS
from samsa.client.errors import code_of
from samsa.client.sasl_login import LoginRefused
from samsa.common.errors import ErrorCode
from samsa.common.scram import MECHANISMS, ScramClient, ScramError
from samsa.common.tls import SaslSettings, TlsSettings
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
