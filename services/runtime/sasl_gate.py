"""The SASL gate's decision: may this call through, and as whom? Pure; the interceptor that
asks it is sasl_interceptor.py.

Theory of operation. With `sasl.enabled.mechanisms` set, every call to a process must show who
makes it, in one of two ways:
1. the cluster's own calls carry the membership proof (membership.py), and pass as the
   cluster, without a principal of their own;
2. a client's calls carry the session ticket it earned with one SASL exchange
   (sasl_tickets.py), in the `samsa-sasl-ticket` metadata. The ticket must verify (this
   cluster's key, not expired). A SCRAM ticket's credential fingerprint must be the one the
   process's metadata image holds now for (user, mechanism): a credential deleted or replaced
   (a new password) ends every session made with it, on every process, as soon as the process
   has replayed the change. An OAUTHBEARER ticket has no credential in the image (the identity
   provider holds the user): it stands until it expires, which is never past its token's exp,
   and only on a process that enables OAUTHBEARER.
Exempt: the exchange itself (SaslService), health checks and reflection. A refused call answers
UNAUTHENTICATED with `samsa-error-code: 58` (SASL_AUTHENTICATION_FAILED) and a message saying what
to do. A request stream is decided as it opens, and its credential is checked again at each message
(`still_current`): deleting or replacing it ends the stream too, as it refuses the next call. So
does its ticket's expiry (`expired`, KIP-368's connections.max.reauth.ms, bounded here by the
ticket's lifetime): a message that comes after it ends the stream UNAUTHENTICATED with code 58 and
`samsa-sasl-session: expired` (SESSION_EXPIRED_TRAILING_METADATA), which tells a client to log in
again and reopen the stream rather than fail: nothing was refused. An admitted client's principal
is `User:<name>`; the interceptor sets it in `SASL_PRINCIPAL` around the handler, where
`authorization.principal_of` (the authorizer, user quotas) reads it ahead of the TLS certificate's
subject.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.common.jwt_validation import Expectations
from samsa.metadata.principal_rules import USER_PREFIX
from samsa.services.runtime import sasl_tickets
from samsa.services.runtime.access_rules import ERROR_CODE_KEY
from samsa.services.runtime.sasl_oauthbearer import MECHANISM as OAUTHBEARER
from samsa.services.runtime.sasl_oauthbearer import OAuthBearerSettings
from samsa.services.runtime.service_config import SASL_SESSION_LIFETIME_MS_DEFAULT, ServiceConfig

# The SASL principal of the call running in this context (None: not a SASL call).
SASL_PRINCIPAL: ContextVar[str | None] = ContextVar("samsa_sasl_principal", default=None)

# Methods any caller may call without a ticket: how to get one, and the probes around a process.
EXEMPT_PREFIXES = ("/samsa.v1.SaslService/", "/grpc.health.v1.", "/grpc.reflection.")

NO_TICKET = (
    "this cluster requires SASL: set security.protocol=SASL_SSL, sasl.mechanism, and "
    "sasl.username and sasl.password (SCRAM) or the sasl.oauthbearer.* keys (OAUTHBEARER)"
)

Credentials = Mapping[tuple[str, int], scram.ScramCredential]
# What every refusal carries, so that a client in any language knows a failed login.
REFUSAL_TRAILING_METADATA = ((ERROR_CODE_KEY, str(int(ErrorCode.SASL_AUTHENTICATION_FAILED))),)
# A request stream whose ticket expired: the refusal's code, and the marker that says it is an
# expiry (log in again, reopen the stream), not a refusal (errors.proto documents both).
SESSION_KEY = "samsa-sasl-session"
SESSION_EXPIRED = "expired"
SESSION_EXPIRED_TRAILING_METADATA = (*REFUSAL_TRAILING_METADATA, (SESSION_KEY, SESSION_EXPIRED))


def exempt(method: str) -> bool:
    """Whether `method` (its full path) is served without a ticket."""
    return method.startswith(EXEMPT_PREFIXES)


class Decision(NamedTuple):
    """Admitted (`refusal` None) as `principal` (None: the cluster itself), or refused. A
    client admitted on its ticket names the credential it was earned with and the ticket's expiry
    (`session`), which `still_current` and `expired` check at every message of a request stream."""

    principal: str | None
    refusal: str | None = None
    session: Session | None = None

    @property
    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return REFUSAL_TRAILING_METADATA


def decide(
    ticket: str | None,
    is_member: Callable[[], bool],
    key: bytes,
    now_ms: int,
    credentials: Credentials,
    bearer: bool = False,
) -> Decision:
    """The decision for a call carrying `ticket` (None: no ticket); `is_member` checks its
    membership proof, only when it has no ticket (members send none). `bearer`: this process
    enables OAUTHBEARER (else its tickets are refused)."""
    if ticket is None:
        if is_member():
            return Decision(None)
        return Decision(None, NO_TICKET)
    try:
        claims = sasl_tickets.verify(key, ticket, now_ms)
    except sasl_tickets.TicketError as error:
        if error.expired:
            return Decision(None, f"the SASL session expired: authenticate again ({error})")
        return Decision(None, f"the SASL ticket is refused: {error}; authenticate again")
    if claims.mechanism is sasl_tickets.OAUTHBEARER:
        if not bearer:
            return Decision(None, "OAUTHBEARER is not enabled on this process: log in with SCRAM")
        session = Session((claims.user, claims.mechanism.number), None, claims.expires_ms)
        return Decision(USER_PREFIX + claims.user, None, session)
    assert isinstance(claims.mechanism, scram.Mechanism)
    key_of = (claims.user, claims.mechanism.number)
    current = credentials.get(key_of)
    if current is None or current.fingerprint() != claims.fingerprint:
        return Decision(None, revoked(claims.user, claims.mechanism))
    return Decision(USER_PREFIX + claims.user, None, Session(key_of, current, claims.expires_ms))


class Session(NamedTuple):
    """What a client's session was admitted on: (user, mechanism number), its SCRAM credential
    (None for OAUTHBEARER: none is stored), and when its ticket expires (unix ms)."""

    key: tuple[str, int]
    credential: scram.ScramCredential | None
    expires_ms: int


def still_current(session: Session, credentials: Credentials) -> bool:
    """Whether the session's credential is still the user's (neither deleted nor replaced):
    asked at every message of a request stream, so an identity check first (the image keeps
    the same object until the credential changes), then a comparison (a reloaded snapshot
    makes equal new ones). An OAUTHBEARER session has no credential to lose."""
    if session.credential is None:
        return True
    current = credentials.get(session.key)
    return current is session.credential or current == session.credential


def expired(session: Session, now_ms: int) -> bool:
    """Whether the session's ticket has expired at `now_ms` (one comparison: asked at every
    message of a request stream)."""
    return now_ms >= session.expires_ms


def expiry(session: Session, now_ms: int) -> str:
    """Why a request stream ended at its ticket's expiry, and what the client does."""
    return (
        f"the SASL session of user {session.key[0]!r} expired {now_ms - session.expires_ms} ms "
        "ago (its ticket's lifetime, sasl.session.lifetime.ms or the token's exp): log in again "
        "and reopen the stream"
    )


def revoked(user: str, mechanism: scram.Mechanism) -> str:
    return (
        f"the {mechanism.name} credential of user {user!r} was deleted or replaced since this "
        "session began: authenticate again with the current password"
    )


@dataclass(frozen=True)
class SaslConfig:
    """A process's SASL settings, from its config; `bind` ties them to its key and image."""

    mechanisms: tuple[scram.Mechanism, ...]
    lifetime_ms: int
    oauth: OAuthBearerSettings | None = None  # OAUTHBEARER enabled, with these settings

    @staticmethod
    def of(config: ServiceConfig) -> SaslConfig:
        names = config.sasl_enabled_mechanisms
        mechanisms = tuple(scram.MECHANISMS[name] for name in names if name in scram.MECHANISMS)
        oauth = None
        if OAUTHBEARER in names and config.sasl_oauthbearer_jwks_endpoint_url is not None:
            oauth = OAuthBearerSettings(
                config.sasl_oauthbearer_jwks_endpoint_url,
                config.sasl_oauthbearer_jwks_endpoint_refresh_ms,
                Expectations(
                    issuer=config.sasl_oauthbearer_expected_issuer,
                    audiences=config.sasl_oauthbearer_expected_audience,
                    sub_claim_name=config.sasl_oauthbearer_sub_claim_name,
                    clock_skew_s=config.sasl_oauthbearer_clock_skew_seconds,
                ),
            )
        return SaslConfig(mechanisms, config.sasl_session_lifetime_ms, oauth)

    def bind(self, member_key: bytes, credentials: Callable[[], Credentials]) -> Sasl:
        return Sasl(
            mechanisms=self.mechanisms,
            lifetime_ms=self.lifetime_ms,
            member_key=member_key,
            ticket_key=sasl_tickets.ticket_key(member_key),
            decoy_key=sasl_tickets.decoy_key(member_key),
            credentials=credentials,
            oauth=self.oauth,
        )


# SASL off: the default of every service, and of tests that build one without a config.
SASL_OFF = SaslConfig((), SASL_SESSION_LIFETIME_MS_DEFAULT)


@dataclass(frozen=True)
class Sasl:
    """One process's SASL: what it enables, its keys, and its image's credentials."""

    mechanisms: tuple[scram.Mechanism, ...]
    lifetime_ms: int
    member_key: bytes
    ticket_key: bytes
    decoy_key: bytes
    credentials: Callable[[], Credentials]
    oauth: OAuthBearerSettings | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.mechanisms) or self.oauth is not None

    def credential_of(self, user: str, mechanism: scram.Mechanism) -> scram.ScramCredential | None:
        return self.credentials().get((user, mechanism.number))
