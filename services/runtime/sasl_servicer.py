"""SaslService on every controller, broker and coordinator: one SASL exchange (SCRAM or
OAUTHBEARER) per SaslAuthenticate stream, ending with a session ticket (sasl_tickets.py). The
state machine is sasl_exchange.py (pure); this adapter adds the server nonce (secrets), the
clock, the ticket, the delay before a failed answer, the deadline and the log.

- A failed authentication is answered after sasl_exchange.FAILED_AUTHENTICATION_DELAY_MS (Kafka's
  connection.failed.authentication.delay.ms), with one generic message; its reason (which user,
  what was wrong) is logged, rate-limited: a password guesser must not fill the disk.
- The exchange must end within sasl_exchange.EXCHANGE_MS_MAX: then DEADLINE_EXCEEDED.
- A message larger than scram.MESSAGE_BYTES_MAX fails the exchange (ScramServer refuses it).
- With SASL off the first message answers UNSUPPORTED_SASL_MECHANISM, naming no mechanism.
- OAUTHBEARER: the token is validated against the JWKS (jwks_source.py, fetched off the event
  loop); the ticket's lifetime is sasl.session.lifetime.ms capped at the token's exp
  (sasl_oauthbearer.session_lifetime_ms), an authzid must be the token's principal, and any
  failure answers as a SCRAM one does (the generic message, after the same delay).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.jwt_validation import JwtError
from samsa.services.runtime import sasl_exchange, sasl_oauthbearer, sasl_tickets
from samsa.services.runtime.jwks_source import JwksSource
from samsa.services.runtime.rate_limited_log import LogRateLimiter
from samsa.services.runtime.sasl_exchange import SaslExchange, Step
from samsa.services.runtime.sasl_gate import Sasl
from samsa.v1 import security_pb2, security_pb2_grpc

log = logging.getLogger(__name__)

SERVICE_NAME = security_pb2.DESCRIPTOR.services_by_name["SaslService"].full_name
# 18 random bytes: a 24-character URL-safe nonce (RFC 5802 asks only for uniqueness).
NONCE_BYTES = 18


def _now_ms() -> int:
    return int(time.time() * 1000)


class SaslServicer(security_pb2_grpc.SaslServiceServicer):
    """Runs SCRAM exchanges against `sasl`'s credentials (the process's image)."""

    def __init__(self, sasl: Sasl) -> None:
        self.sasl = sasl
        self.jwks = None if sasl.oauth is None else JwksSource(sasl.oauth)
        self._log_limiter = LogRateLimiter(
            limits.rpc_failure_log_lines_max, limits.rpc_failure_log_window_ms
        )

    async def start(self) -> None:
        """Before the process serves: fetch the JWKS (JwksStartError when it cannot)."""
        if self.jwks is not None:
            await self.jwks.start()

    async def SaslAuthenticate(
        self,
        request_iterator: AsyncIterator[security_pb2.SaslAuthenticateRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[security_pb2.SaslAuthenticateResponse]:
        sasl = self.sasl
        exchange = SaslExchange(
            sasl.mechanisms,
            sasl.credential_of,
            secrets.token_urlsafe(NONCE_BYTES),
            sasl.decoy_key,
            bearer=self.jwks is not None,
        )
        deadline = asyncio.get_running_loop().time() + sasl_exchange.EXCHANGE_MS_MAX / 1000
        requests = aiter(request_iterator)
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    request = await anext(requests)
            except StopAsyncIteration:
                return
            except TimeoutError:
                await context.abort(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"a SASL exchange must finish within {sasl_exchange.EXCHANGE_MS_MAX} ms",
                )
            step = exchange.step(request.mechanism, request.auth_bytes)
            if step.bearer is not None:
                yield await self._bearer_answer(step.bearer, context)
                return
            yield await self._answer(step, context)
            if step.ends:
                return

    async def _answer(
        self, step: Step, context: grpc.aio.ServicerContext
    ) -> security_pb2.SaslAuthenticateResponse:
        response = security_pb2.SaslAuthenticateResponse(
            error_code=int(step.error),
            error_message=step.message,
            auth_bytes=step.auth_bytes,
            enabled_mechanisms=list(step.enabled),
        )
        if step.error == ErrorCode.SASL_AUTHENTICATION_FAILED:
            self._log_failure(step.reason, context.peer())
            await asyncio.sleep(sasl_exchange.FAILED_AUTHENTICATION_DELAY_MS / 1000)
        elif step.user is not None and step.credential is not None:
            sasl = self.sasl
            response.session_ticket = sasl_tickets.issue(
                sasl.ticket_key,
                step.user,
                step.credential.mechanism,
                step.credential.fingerprint(),
                _now_ms(),
                sasl.lifetime_ms,
            )
            response.session_lifetime_ms = sasl.lifetime_ms
        return response

    async def _bearer_answer(
        self, message: sasl_oauthbearer.BearerMessage, context: grpc.aio.ServicerContext
    ) -> security_pb2.SaslAuthenticateResponse:
        """Validate an OAUTHBEARER token; a ticket for its principal, or the generic failure."""
        assert self.jwks is not None
        try:
            validated = await self.jwks.validate(message.token)
        except JwtError as error:
            return await self._answer(sasl_exchange.bearer_failed(str(error)), context)
        user = validated.principal
        if message.authzid and message.authzid != user:
            reason = f"token of {user!r} asks to act as {message.authzid[:64]!r}"
            return await self._answer(sasl_exchange.bearer_failed(reason), context)
        now_ms = _now_ms()
        sasl = self.sasl
        lifetime_ms = sasl_oauthbearer.session_lifetime_ms(
            sasl.lifetime_ms, validated.expires_at_s, now_ms
        )
        if lifetime_ms <= 0:
            reason = f"the token of {user!r} expires before a session could start"
            return await self._answer(sasl_exchange.bearer_failed(reason), context)
        return security_pb2.SaslAuthenticateResponse(
            session_ticket=sasl_tickets.issue(
                sasl.ticket_key,
                user,
                sasl_tickets.OAUTHBEARER,
                sasl_tickets.token_fingerprint(message.token),
                now_ms,
                lifetime_ms,
            ),
            session_lifetime_ms=lifetime_ms,
        )

    def _log_failure(self, reason: str, peer: str | None) -> None:
        admission = self._log_limiter.admit(_now_ms())
        if admission.suppressed_before:
            log.warning(
                "%d more SASL authentication failures were not logged",
                admission.suppressed_before,
            )
        if admission.write:
            log.warning("SASL authentication failed from %s: %s", peer, reason)
