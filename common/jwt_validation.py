"""Validation of the JWTs SASL/OAUTHBEARER clients log in with (KIP-255, KIP-768): a compact JWS
signed by an identity provider, checked against its published keys (a JWKS). Pure: the caller
passes the JWKS document it fetched and the clock; no I/O.

Theory of operation. A token is three base64url parts, header.payload.signature (RFC 7515's
compact serialization). The header names the algorithm (`alg`) and the signing key (`kid`); the
key is looked up by `kid` among the JWKS's keys (RFC 7517), and the signature over
"header.payload" is checked with it. Only asymmetric algorithms are accepted: RS256 (RSA
PKCS#1 v1.5, SHA-256, keys of at least 2048 bits) and ES256 (ECDSA P-256, SHA-256, the
signature as r||s). Refused: `alg` none (an unsecured token proves nothing), HS* (a shared
secret is not something a JWKS publishes: accepting it would let anyone who knows the public
key forge tokens), any other algorithm, a `kid` the JWKS does not hold (`UnknownKeyError`, so
the caller may fetch the JWKS again: the provider may have rotated its keys), a key whose type
or `alg` does not fit the token's, a `crit` header (an extension this code does not know).

Then the claims (RFC 7519), with `clock_skew_s` of tolerance either way for the clocks of the
provider and of this process (Kafka's sasl.oauthbearer.clock.skew.seconds, 30 by default):
`exp` is required and must not have passed; `nbf`, when present, must have come; `iat`, when
present, must not be in the future; `iss` must be the expected issuer when one is configured;
`aud` (a string or a list of strings) must name one of the expected audiences when some are
configured. The principal is the claim `sub_claim_name` names (`sub` by default): a non-empty
string of at most 255 characters (a user name, as for SCRAM: the ACLs see `User:<it>`).

Every refusal is a JwtError whose message says what was wrong; it is for the server's log, not
for the client (the exchange answers one generic message).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from samsa.common import limits

TOKEN_CHARS_MAX = limits.oauthbearer_token_chars_max
JWKS_BYTES_MAX = limits.oauthbearer_jwks_bytes_max
JWKS_KEYS_MAX = limits.oauthbearer_jwks_keys_max
PRINCIPAL_CHARS_MAX = limits.scram_user_name_length_max
ALGORITHMS = ("RS256", "ES256")
RSA_BITS_MIN = 2048  # RFC 7518 3.3: a key of 2048 bits or larger MUST be used with RS256
P256_COORDINATE_BYTES = 32
CLOCK_SKEW_S_DEFAULT = 30
SUB_CLAIM_DEFAULT = "sub"

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey


class JwtError(ValueError):
    """The token (or the JWKS) is refused; the message says why, for the log."""


class UnknownKeyError(JwtError):
    """The token names a key id the JWKS does not hold (a rotation may have added it)."""

    def __init__(self, kid: str) -> None:
        super().__init__(f"the token's key id {kid[:64]!r} is not in the JWKS")
        self.kid = kid


@dataclass(frozen=True)
class Jwk:
    """One usable signing key of a JWKS: its id, the algorithm it signs with, the key."""

    kid: str
    alg: str
    key: PublicKey


@dataclass(frozen=True)
class Expectations:
    """What a token must say besides its signature (the sasl.oauthbearer.* settings)."""

    issuer: str | None = None
    audiences: tuple[str, ...] = ()
    sub_claim_name: str = SUB_CLAIM_DEFAULT
    clock_skew_s: int = CLOCK_SKEW_S_DEFAULT


@dataclass(frozen=True)
class Validated:
    """A token that checked out: whose it is, and when it expires (unix seconds)."""

    principal: str
    expires_at_s: float


def parse_jwks(document: bytes) -> dict[str, Jwk]:
    """The usable signing keys of a JWKS document, by key id. Keys this code cannot use (another
    type or curve, an encryption key, no kid, RSA under 2048 bits) are skipped; JwtError when
    the document is not a JWKS or holds no usable key at all."""
    if len(document) > JWKS_BYTES_MAX:
        raise JwtError(f"a JWKS has at most {JWKS_BYTES_MAX} bytes, not {len(document)}")
    try:
        parsed = json.loads(document)
    except (ValueError, RecursionError):
        raise JwtError("the JWKS is not JSON") from None
    entries = parsed.get("keys") if isinstance(parsed, dict) else None
    if not isinstance(entries, list):
        raise JwtError('the JWKS is not a JSON object with a "keys" list')
    if len(entries) > JWKS_KEYS_MAX:
        raise JwtError(f"a JWKS has at most {JWKS_KEYS_MAX} keys, not {len(entries)}")
    keys: dict[str, Jwk] = {}
    for entry in entries:
        jwk = _usable_key(entry) if isinstance(entry, dict) else None
        if jwk is not None and jwk.kid not in keys:
            keys[jwk.kid] = jwk
    if not keys:
        raise JwtError("the JWKS holds no usable key: RS256 or ES256 signing keys with a kid")
    return keys


def _usable_key(entry: dict[str, Any]) -> Jwk | None:
    kid = entry.get("kid")
    if not isinstance(kid, str) or not kid or entry.get("use", "sig") != "sig":
        return None
    try:
        if entry.get("kty") == "RSA" and entry.get("alg", "RS256") == "RS256":
            numbers = rsa.RSAPublicNumbers(_integer(entry.get("e")), _integer(entry.get("n")))
            key = numbers.public_key()
            return Jwk(kid, "RS256", key) if key.key_size >= RSA_BITS_MIN else None
        if entry.get("kty") == "EC" and entry.get("crv") == "P-256":
            if entry.get("alg", "ES256") != "ES256":
                return None
            x, y = _coordinate(entry.get("x")), _coordinate(entry.get("y"))
            point = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1())
            return Jwk(kid, "ES256", point.public_key())
    except (JwtError, ValueError):
        return None  # a malformed key, or a point off the curve
    return None


def _integer(value: object) -> int:
    if not isinstance(value, str):
        raise JwtError("a key parameter is not a string")
    return int.from_bytes(_b64url(value, "a key parameter"), "big")


def _coordinate(value: object) -> int:
    if not isinstance(value, str):
        raise JwtError("a key coordinate is not a string")
    raw = _b64url(value, "a key coordinate")
    if len(raw) != P256_COORDINATE_BYTES:
        raise JwtError("a P-256 coordinate has 32 bytes")
    return int.from_bytes(raw, "big")


def _b64url(part: str, what: str) -> bytes:
    """base64url without padding (RFC 7515 2); JwtError naming `what` otherwise."""
    if "=" in part or "+" in part or "/" in part:
        raise JwtError(f"{what} is not base64url without padding")
    try:
        padded = part + "=" * (-len(part) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise JwtError(f"{what} is not base64url") from None


def _json_object(part: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64url(part, what))
    except (ValueError, RecursionError) as error:
        if isinstance(error, JwtError):
            raise
        raise JwtError(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise JwtError(f"{what} is not a JSON object")
    return value


def validate(token: str, keys: Mapping[str, Jwk], expect: Expectations, now_s: float) -> Validated:
    """The principal and expiry of `token` if its signature and claims check out at `now_s`;
    JwtError (UnknownKeyError for a key id not in `keys`) saying why not."""
    if len(token) > TOKEN_CHARS_MAX:
        raise JwtError(f"a token has at most {TOKEN_CHARS_MAX} characters, not {len(token)}")
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtError(f"a JWT is three dot-separated parts (a compact JWS), not {len(parts)}")
    header = _json_object(parts[0], "the JWT header")
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise JwtError(_refused_algorithm(alg))
    if "crit" in header:
        raise JwtError("the JWT header has critical extensions (crit), which are not supported")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise JwtError("the JWT header names no key id (kid): the JWKS key cannot be chosen")
    jwk = keys.get(kid)
    if jwk is None:
        raise UnknownKeyError(kid)
    if jwk.alg != alg:
        raise JwtError(f"the token says {alg}, but key {kid!r} is a {jwk.alg} key")
    signed = f"{parts[0]}.{parts[1]}".encode("ascii", errors="replace")
    _verify(jwk, signed, _b64url(parts[2], "the JWT signature"))
    claims = _json_object(parts[1], "the JWT payload")
    return _checked(claims, expect, now_s)


def _refused_algorithm(alg: object) -> str:
    if isinstance(alg, str) and alg.lower() == "none":
        return "unsecured JWTs (alg none) are refused: the token must be signed"
    if isinstance(alg, str) and alg.upper().startswith("HS"):
        return f"{alg[:16]} (a shared-secret MAC) is refused: only {', '.join(ALGORITHMS)}"
    return f"JWT algorithm {str(alg)[:16]!r} is not supported: only {', '.join(ALGORITHMS)}"


def _verify(jwk: Jwk, signed: bytes, signature: bytes) -> None:
    try:
        if isinstance(jwk.key, rsa.RSAPublicKey):
            jwk.key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
            return
        if len(signature) != 2 * P256_COORDINATE_BYTES:
            raise JwtError("an ES256 signature is 64 bytes (r||s)")
        r = int.from_bytes(signature[:32], "big")
        s = int.from_bytes(signature[32:], "big")
        jwk.key.verify(encode_dss_signature(r, s), signed, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise JwtError(f"the token's signature does not verify with key {jwk.kid!r}") from None


def _checked(claims: dict[str, Any], expect: Expectations, now_s: float) -> Validated:
    skew = expect.clock_skew_s
    exp = _time_claim(claims, "exp")
    if exp is None:
        raise JwtError("the token has no exp claim: a token without expiry is refused")
    if now_s >= exp + skew:
        raise JwtError(f"the token expired {now_s - exp:.0f} s ago")
    nbf = _time_claim(claims, "nbf")
    if nbf is not None and now_s + skew < nbf:
        raise JwtError(f"the token is not valid before {nbf:.0f} ({nbf - now_s:.0f} s from now)")
    iat = _time_claim(claims, "iat")
    if iat is not None and now_s + skew < iat:
        raise JwtError(f"the token was issued {iat - now_s:.0f} s in the future")
    if expect.issuer is not None and claims.get("iss") != expect.issuer:
        raise JwtError(
            f"the token's issuer {str(claims.get('iss'))[:128]!r} is not the expected one"
        )
    if expect.audiences:
        aud = claims.get("aud")
        named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(isinstance(a, str) and a in expect.audiences for a in named):
            raise JwtError(f"the token's audience {str(aud)[:128]!r} is none of the expected ones")
    principal = claims.get(expect.sub_claim_name)
    if not isinstance(principal, str) or not principal:
        raise JwtError(f"the token has no {expect.sub_claim_name!r} claim naming its principal")
    if len(principal) > PRINCIPAL_CHARS_MAX:
        raise JwtError(f"a principal has at most {PRINCIPAL_CHARS_MAX} characters")
    return Validated(principal, exp)


def _time_claim(claims: dict[str, Any], name: str) -> float | None:
    """A NumericDate claim (seconds since the epoch), or None when absent."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JwtError(f"the token's {name} claim is not a number of seconds")
    try:
        return float(value)
    except OverflowError:
        raise JwtError(f"the token's {name} claim is out of range") from None
