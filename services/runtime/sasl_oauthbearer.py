"""SASL/OAUTHBEARER on the server (RFC 7628, KIP-255, KIP-768), pure: the settings under Kafka's
names, the client's one message, and how long the session it opens may last. The token's
signature and claims are common/jwt_validation.py's; the JWKS it needs is fetched by
jwks_source.py; the exchange is sasl_exchange.py's and the servicer's.

Theory of operation. A client sends one message, RFC 7628's initial client response

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01...]\\x01

whose token (a JWT its identity provider issued) is validated; on success the server issues a
session ticket as for SCRAM (sasl_tickets.py, mechanism OAUTHBEARER), for the user the token's
principal claim names. A session never outlives its token (KIP-368): its lifetime is the
smaller of sasl.session.lifetime.ms and the time left until the token's `exp`. An authzid, when
given, must be the token's principal (a client cannot ask to act as someone else). Other
key/value pairs (RFC 7628's host and port, Kafka's extensions) are read and ignored. A failure
answers SASL_AUTHENTICATION_FAILED in one message (RFC 7628's error JSON and the client's dummy
\\x01 reply are skipped: the answer already says the exchange is over).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from samsa.common import limits
from samsa.common.jwt_validation import (
    TOKEN_CHARS_MAX,
    Expectations,
)
from samsa.services.runtime.config import ValueProblem

MECHANISM = "OAUTHBEARER"
# The message holds the token, a short header and a few short pairs.
MESSAGE_BYTES_MAX = TOKEN_CHARS_MAX + 2 * limits.KIB
JWKS_SCHEMES = ("file", "http", "https")
JWKS_REFRESH_MS_DEFAULT = 3_600_000  # Kafka's sasl.oauthbearer.jwks.endpoint.refresh.ms
JWKS_REFRESH_MS_MIN = limits.oauthbearer_jwks_refetch_ms_min
CLOCK_SKEW_S_MAX = 3600
_HEADER = re.compile(r"[ny],(a=[^,]*)?,")
_KEY = re.compile(r"[A-Za-z]+")


class BearerMessageError(ValueError):
    """The client's message is not RFC 7628's; the message says why (for the log)."""


@dataclass(frozen=True)
class BearerMessage:
    """What the client sent: its token, and the identity it asks to act as ("" for none)."""

    token: str
    authzid: str = ""


def parse_message(message: bytes) -> BearerMessage:
    """The token and authzid of an OAUTHBEARER initial client response; BearerMessageError."""
    if len(message) > MESSAGE_BYTES_MAX:
        raise BearerMessageError(f"an OAUTHBEARER message has at most {MESSAGE_BYTES_MAX} bytes")
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise BearerMessageError("the OAUTHBEARER message is not UTF-8") from None
    parts = text.split("\x01")
    if len(parts) < 4 or parts[-1] != "" or parts[-2] != "":
        raise BearerMessageError(
            "an OAUTHBEARER message is a GS2 header, \\x01, key=value pairs each ended by "
            "\\x01, and a final \\x01"
        )
    header = _HEADER.fullmatch(parts[0])
    if header is None:
        raise BearerMessageError(
            "the GS2 header must be n,, or n,a=<authzid>, (no channel binding)"
        )
    authzid = (header.group(1) or "a=")[2:]
    if re.search(r"=(?!2C|3D)", authzid):
        raise BearerMessageError("the authzid escapes = and , only as =3D and =2C")
    authzid = authzid.replace("=2C", ",").replace("=3D", "=")
    pairs: dict[str, str] = {}
    for pair in parts[1:-2]:
        key, equals, value = pair.partition("=")
        if not equals or _KEY.fullmatch(key) is None or key in pairs:
            raise BearerMessageError(f"malformed or repeated key/value pair {key[:32]!r}")
        pairs[key] = value
    scheme, _, token = pairs.get("auth", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise BearerMessageError('the message has no "auth=Bearer <token>" pair')
    return BearerMessage(token.strip(), authzid)


def client_message(token: str) -> bytes:
    """The initial client response for `token` (what the SDK sends; tests use it too)."""
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def session_lifetime_ms(configured_ms: int, expires_at_s: float, now_ms: int) -> int:
    """How long a session may last: sasl.session.lifetime.ms, but never past the token's exp
    (KIP-368). Zero or less: the token expires before a session could start."""
    return min(configured_ms, int(expires_at_s * 1000) - now_ms)


@dataclass(frozen=True)
class OAuthBearerSettings:
    """A process's sasl.oauthbearer.* settings (service_config.py's keys)."""

    jwks_url: str
    refresh_ms: int = JWKS_REFRESH_MS_DEFAULT
    expect: Expectations = Expectations()  # noqa: RUF009 (frozen: one shared default)


def jwks_url(text: str) -> str | None:
    """sasl.oauthbearer.jwks.endpoint.url: "" (none) or a file://, http:// or https:// URL."""
    url = text.strip()
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme.lower() not in JWKS_SCHEMES or not (parts.netloc or parts.path):
        raise ValueProblem("be a file://, http:// or https:// URL of the identity provider's JWKS")
    return url


def audiences(text: str) -> tuple[str, ...]:
    """sasl.oauthbearer.expected.audience: comma-separated (Kafka's list); () checks none."""
    return tuple(dict.fromkeys(filter(None, (part.strip() for part in text.split(",")))))


def optional_text(text: str) -> str | None:
    return text.strip() or None


def claim_name(text: str) -> str:
    name = text.strip()
    if not name:
        raise ValueProblem("name a claim of the token (sub by default)")
    return name
