"""The SASL gate on a gRPC server: every listener of a process with `sasl.enabled.mechanisms`
set refuses calls without a valid session ticket (or the cluster's membership proof), before
the authorizer and the servicer see them. The decision is sasl_gate.decide (pure); this is its
adapter.

It wraps each method's handler once (WrappingInterceptor); exempt methods (SaslService, health,
reflection) keep their handler. A call is decided as it opens; a request stream's credential is
checked again at each of its messages (sasl_gate.still_current: an identity check, ~0.1 µs), so a
credential deleted or replaced ends it UNAUTHENTICATED too; so does its ticket's expiry (a clock
read and one comparison a message), with the `samsa-sasl-session: expired` marker that tells the
client to log in again and reopen it (KIP-368). Only a message finds the expiry: a stream that
sits idle past it stays open, but nothing flows on it (every stream here is bidirectional, and
the server only answers the client's messages). The ticket is read from the call's
metadata, verified (one HMAC) and checked against the image's credential (one dict lookup and
one hash). A refusal aborts UNAUTHENTICATED with
`samsa-error-code: 58`. An admitted client's `User:<name>` is set in sasl_gate.SASL_PRINCIPAL in
the call's own task before the inner handler runs, so the authorizer's interceptor, the servicer
and any task the servicer starts (a stream's reader: tasks copy the context they start in) all
see it. With SASL off there is no interceptor at all.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from samsa.common import scram
from samsa.services.runtime import membership, sasl_tickets
from samsa.services.runtime.member_auth import proof_in
from samsa.services.runtime.request_iterators import close_requests
from samsa.services.runtime.sasl_gate import (
    REFUSAL_TRAILING_METADATA,
    SASL_PRINCIPAL,
    SESSION_EXPIRED_TRAILING_METADATA,
    Sasl,
    Session,
    decide,
    exempt,
    expired,
    expiry,
    revoked,
    still_current,
)
from samsa.services.runtime.server import UndecodableRequestError
from samsa.services.runtime.wrapping_interceptor import WrappingInterceptor, behaviour_of, rebuilt


def _now_ms() -> int:
    return int(time.time() * 1000)


def ticket_in(context: grpc.aio.ServicerContext) -> str | None:
    """The call's `samsa-sasl-ticket` value, if it sent one."""
    for key, value in context.invocation_metadata() or ():
        if key == sasl_tickets.METADATA_KEY:
            return value if isinstance(value, str) else ""
    return None


class SaslGateInterceptor(WrappingInterceptor):
    """Refuses calls without a valid ticket or membership proof; sets the SASL principal."""

    def __init__(self, sasl: Sasl, clock_ms: Callable[[], int] = _now_ms) -> None:
        super().__init__()
        self.sasl = sasl
        self.clock_ms = clock_ms  # unix ms; tests pass a fake one

    def wrap_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        if exempt(method):
            return handler
        behaviour = behaviour_of(handler)
        admit = self._checked_stream if handler.request_streaming else self._admitted_request
        if handler.response_streaming:

            async def stream_out(request: Any, context: grpc.aio.ServicerContext) -> Any:
                request = await admit(request, context, method)
                responses = behaviour(request, context)
                if hasattr(responses, "__aiter__"):
                    async for response in responses:
                        yield response
                else:
                    for response in responses:
                        yield response

            return rebuilt(handler, stream_out)

        async def unary_out(request: Any, context: grpc.aio.ServicerContext) -> Any:
            request = await admit(request, context, method)
            response = behaviour(request, context)
            return await response if inspect.isawaitable(response) else response

        return rebuilt(handler, unary_out)

    async def _admitted_request(
        self, request: Any, context: grpc.aio.ServicerContext, method: str
    ) -> Any:
        await self._admit(context, method)
        return request

    async def _checked_stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, method: str
    ) -> AsyncIterator[Any]:
        session = await self._admit(context, method)
        return requests if session is None else self._still_current(requests, session)

    async def _still_current(
        self, requests: AsyncIterator[Any], session: Session
    ) -> AsyncIterator[Any]:
        """The stream's messages while its credential stays the user's and its ticket has not
        expired; else the stream ends UNAUTHENTICATED (the guard's path for a bad message, from
        the task that reads), an expiry with its marker."""
        credentials, clock_ms = self.sasl.credentials, self.clock_ms
        try:
            async for request in requests:
                if expired(session, now_ms := clock_ms()):
                    raise UndecodableRequestError(
                        expiry(session, now_ms),
                        grpc.StatusCode.UNAUTHENTICATED,
                        SESSION_EXPIRED_TRAILING_METADATA,
                    )
                if not still_current(session, credentials()):
                    user, number = session.key
                    message = revoked(user, scram.MECHANISMS_BY_NUMBER[number])
                    raise UndecodableRequestError(
                        message, grpc.StatusCode.UNAUTHENTICATED, REFUSAL_TRAILING_METADATA
                    )
                yield request
        finally:
            await close_requests(requests)  # closed with this one: request_iterators.py

    async def _admit(self, context: grpc.aio.ServicerContext, method: str) -> Session | None:
        sasl = self.sasl
        now_ms = self.clock_ms()

        def is_member() -> bool:
            proof = proof_in(context)
            return (
                proof is not None
                and membership.verify_any(sasl.member_key, proof, method, now_ms) is None
            )

        ticket = ticket_in(context)
        decision = decide(
            ticket, is_member, sasl.ticket_key, now_ms, sasl.credentials(), sasl.oauth is not None
        )
        if decision.refusal is not None:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED, decision.refusal, decision.trailing_metadata
            )
        SASL_PRINCIPAL.set(decision.principal)  # the call's own task: no reset needed
        return decision.session
