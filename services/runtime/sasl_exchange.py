"""One SaslAuthenticate stream's state machine: which answer each client message gets. Pure;
the servicer (sasl_servicer.py) adds the clock, the delay, the ticket and the log.

Theory of operation. A SCRAM exchange is two client messages:
1. the first names the mechanism, which must be one this process enables
   (UNSUPPORTED_SASL_MECHANISM, with the enabled ones, otherwise), and carries client-first;
   the answer is server-first (for an unknown user too: ScramServer answers with a decoy);
2. the second carries client-final; the answer is server-final, and the servicer adds the
   ticket for the user whose proof checked out.
A SCRAM error (bad syntax, wrong password, unknown user) answers SASL_AUTHENTICATION_FAILED
with one generic message, whatever the reason: the reason goes to the log only, so the answer
never says whether the user exists. Any message after the exchange ended, or after an error,
is ILLEGAL_SASL_STATE. Every error ends the stream.

An OAUTHBEARER exchange (sasl_oauthbearer.py) is one client message carrying a token: the step
answers its token (`bearer`), which the servicer validates against the JWKS (I/O) and answers
with a ticket or SASL_AUTHENTICATION_FAILED (`bearer_failed`, the same generic message).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from samsa.common import limits, scram
from samsa.common.errors import ErrorCode
from samsa.services.runtime import sasl_oauthbearer
from samsa.services.runtime.sasl_oauthbearer import BearerMessage, BearerMessageError

# What a client is told for any SCRAM failure (the real reason is logged).
FAILED = "authentication failed: invalid user name or password, or a malformed SCRAM message"
# What a client is told for any OAUTHBEARER failure (the real reason is logged).
BEARER_FAILED = "authentication failed: the token is invalid, expired, or not for this cluster"
MECHANISM_CHARS_MAX = limits.sasl_mechanism_length_max
EXCHANGE_MS_MAX = limits.sasl_exchange_ms_max
# A failed authentication is answered this late (Kafka's connection.failed.authentication.delay.ms
# default): a password guesser gets ten tries a second per stream, not thousands.
FAILED_AUTHENTICATION_DELAY_MS = 100

CredentialOf = Callable[[str, scram.Mechanism], scram.ScramCredential | None]


@dataclass(frozen=True)
class Step:
    """The answer to one client message. `error` other than NONE ends the stream; `reason` is
    the log's account of a SASL_AUTHENTICATION_FAILED; `user` and `credential` are set once the
    exchange succeeded (the servicer then issues the ticket); `bearer` is an OAUTHBEARER
    client's message, for the servicer to validate."""

    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    auth_bytes: bytes = b""
    enabled: tuple[str, ...] = ()
    reason: str = ""
    user: str | None = None
    credential: scram.ScramCredential | None = None
    bearer: BearerMessage | None = None

    @property
    def ends(self) -> bool:
        return self.error != ErrorCode.NONE or self.user is not None or self.bearer is not None


def bearer_failed(reason: str) -> Step:
    """The answer to an OAUTHBEARER token that did not check out (`reason` for the log)."""
    return Step(ErrorCode.SASL_AUTHENTICATION_FAILED, BEARER_FAILED, reason=reason)


class SaslExchange:
    """The server's side of one stream. `enabled` empty and `bearer` false mean SASL is off on
    this process; `bearer`: OAUTHBEARER is enabled."""

    def __init__(
        self,
        enabled: tuple[scram.Mechanism, ...],
        credential_of: CredentialOf,
        nonce: str,
        decoy_key: bytes,
        bearer: bool = False,
    ) -> None:
        self._enabled = enabled
        self._bearer = bearer
        self._credential_of = credential_of
        self._nonce = nonce
        self._decoy_key = decoy_key
        self._server: scram.ScramServer | None = None
        self._over = False
        self._named = ""  # the user client-first names, for the log

    def step(self, mechanism: str, auth_bytes: bytes) -> Step:
        """The answer to the next client message."""
        if self._over:
            return Step(
                ErrorCode.ILLEGAL_SASL_STATE,
                "this SaslAuthenticate exchange is over: open a new stream to authenticate again",
            )
        step = (
            self._first(mechanism, auth_bytes)
            if self._server is None
            else self._final(mechanism, auth_bytes)
        )
        if step.ends:
            self._over = True
        return step

    def _first(self, name: str, client_first: bytes) -> Step:
        enabled_names = tuple(m.name for m in self._enabled)
        if self._bearer:
            enabled_names += (sasl_oauthbearer.MECHANISM,)
        if not enabled_names:
            return Step(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                "SASL is not enabled on this process (sasl.enabled.mechanisms is empty): "
                "connect without SASL",
            )
        wanted = name.strip().upper()[: MECHANISM_CHARS_MAX + 1]
        if self._bearer and wanted == sasl_oauthbearer.MECHANISM:
            try:
                return Step(bearer=sasl_oauthbearer.parse_message(client_first))
            except BearerMessageError as error:
                return bearer_failed(str(error))
        mechanism = next((m for m in self._enabled if m.name == wanted), None)
        if mechanism is None:
            return Step(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"SASL mechanism {name[:MECHANISM_CHARS_MAX]!r} is not enabled here: "
                f"set sasl.mechanism to one of {', '.join(enabled_names)}",
                enabled=enabled_names,
            )
        self._server = scram.ScramServer(
            mechanism,
            lambda user: self._credential_of(user, mechanism),
            self._nonce,
            self._decoy_key,
        )
        self._named = named_user(client_first)
        try:
            return Step(auth_bytes=self._server.server_first(client_first))
        except scram.ScramError as error:
            return Step(ErrorCode.SASL_AUTHENTICATION_FAILED, FAILED, reason=str(error))

    def _final(self, name: str, client_final: bytes) -> Step:
        server = self._server
        assert server is not None
        if name and name.strip().upper() != server.mechanism.name:
            return Step(
                ErrorCode.ILLEGAL_SASL_STATE,
                f"the mechanism is named on the first message only ({server.mechanism.name})",
            )
        try:
            server_final = server.server_final(client_final)
        except scram.ScramError as error:
            return Step(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                FAILED,
                reason=f"user {self._named!r}: {error}",
            )
        return Step(auth_bytes=server_final, user=server.user, credential=server.credential)


def named_user(client_first: bytes) -> str:
    """The user a client-first message names, for the log (at most 64 characters; "" if none)."""
    text = client_first[: scram.MESSAGE_BYTES_MAX].decode("utf-8", errors="replace")
    for part in text.split(",")[2:3]:
        if part.startswith("n="):
            return part[2:66]
    return ""
