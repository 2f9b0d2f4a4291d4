"""Goal: common/jwt_validation.py accepts exactly the JWTs an OAUTHBEARER server should: signed
RS256 or ES256 by a key of the JWKS chosen by kid, not expired, with the expected issuer and
audience when configured, naming a principal; and refuses each other case with a message
saying why.

Method: keys generated in the test (jwt_minting.py), tokens signed with them, a fixed clock.
"""

from __future__ import annotations

import json

import pytest
from jwt_minting import SigningKey, b64url, jwks, token

from samsa.common.jwt_validation import (
    Expectations,
    JwtError,
    UnknownKeyError,
    parse_jwks,
    validate,
)

NOW = 1_800_000_000.0
RSA_KEY = SigningKey("rsa-1")
EC_KEY = SigningKey("ec-1", alg="ES256")
KEYS = parse_jwks(jwks(RSA_KEY, EC_KEY))
EXPECT = Expectations(issuer="https://idp.example", audiences=("samsa", "other"))
CLAIMS = {
    "sub": "alice",
    "iss": "https://idp.example",
    "aud": "samsa",
    "exp": NOW + 300,
    "iat": NOW - 10,
    "nbf": NOW - 10,
}


def check(tok: str, expect: Expectations = EXPECT, now: float = NOW) -> str:
    return validate(tok, KEYS, expect, now).principal


@pytest.mark.parametrize("key", [RSA_KEY, EC_KEY], ids=["RS256", "ES256"])
def test_a_signed_token_gives_its_subject_and_expiry(key: SigningKey) -> None:
    validated = validate(token(key, CLAIMS), KEYS, EXPECT, NOW)
    assert validated.principal == "alice"
    assert validated.expires_at_s == NOW + 300


def test_the_audience_may_be_a_list_and_the_principal_another_claim() -> None:
    claims = {**CLAIMS, "aud": ["x", "other"], "client_id": "svc-1"}
    assert check(token(RSA_KEY, claims), Expectations(audiences=("other",))) == "alice"
    assert check(token(RSA_KEY, claims), Expectations(sub_claim_name="client_id")) == "svc-1"


def test_without_expectations_issuer_and_audience_are_not_checked() -> None:
    claims = {k: v for k, v in CLAIMS.items() if k not in ("iss", "aud")}
    assert check(token(RSA_KEY, claims), Expectations()) == "alice"


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"alg": "none"}, "alg none"),
        ({"alg": "HS256"}, "shared-secret"),
        ({"alg": "RS512"}, "not supported"),
        ({"kid": None}, "no key id"),
        ({"crit": ["b64"]}, "critical"),
        ({"alg": "ES256"}, "is a RS256 key"),
    ],
)
def test_a_header_that_cannot_be_trusted_is_refused(header: dict[str, object], reason: str) -> None:
    with pytest.raises(JwtError, match=reason):
        check(token(RSA_KEY, CLAIMS, header))


def test_an_unknown_kid_is_its_own_error_so_that_the_jwks_can_be_fetched_again() -> None:
    with pytest.raises(UnknownKeyError) as raised:
        check(token(SigningKey("rotated-in"), CLAIMS))
    assert raised.value.kid == "rotated-in"


def test_a_bad_signature_is_refused() -> None:
    forged = token(SigningKey("rsa-1"), CLAIMS)  # same kid, another key
    with pytest.raises(JwtError, match="does not verify"):
        check(forged)
    head, _, sig = token(EC_KEY, CLAIMS).split(".")
    changed = b64url(json.dumps({**CLAIMS, "sub": "mallory"}).encode())
    with pytest.raises(JwtError, match="does not verify"):
        check(f"{head}.{changed}.{sig}")
    with pytest.raises(JwtError, match="64 bytes"):
        check(f"{head}.{changed}.{b64url(b'short')}")


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": None}, "no exp"),
        ({"exp": NOW - 31}, "expired"),
        ({"exp": "soon"}, "not a number"),
        ({"nbf": NOW + 31}, "not valid before"),
        ({"iat": NOW + 31}, "in the future"),
        ({"iss": "https://evil.example"}, "issuer"),
        ({"aud": "someone-else"}, "audience"),
        ({"aud": ["a", "b"]}, "audience"),
        ({"aud": None}, "audience"),
        ({"sub": None}, "'sub' claim"),
        ({"sub": ""}, "'sub' claim"),
        ({"sub": "x" * 256}, "at most 255"),
    ],
)
def test_each_claim_is_checked(claims: dict[str, object], reason: str) -> None:
    merged = {k: v for k, v in {**CLAIMS, **claims}.items() if v is not None}
    with pytest.raises(JwtError, match=reason):
        check(token(RSA_KEY, merged))


def test_the_clock_skew_tolerates_small_differences_either_way() -> None:
    claims = {**CLAIMS, "exp": NOW - 29, "nbf": NOW + 29, "iat": NOW + 29}
    assert check(token(RSA_KEY, claims)) == "alice"
    with pytest.raises(JwtError, match="expired"):
        check(token(RSA_KEY, claims), Expectations(clock_skew_s=0))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a.b", "three dot-separated parts"),
        ("!!.e30.e30", "base64url"),
        ("e30=.e30.e30", "without padding"),
        (b64url(b"[1]") + ".e30.e30", "not a JSON object"),
        (b64url(b"{") + ".e30.e30", "not JSON"),
        ("x" * 20_000, "at most"),
    ],
)
def test_a_malformed_token_is_refused(text: str, reason: str) -> None:
    with pytest.raises(JwtError, match=reason):
        check(text)


def test_the_jwks_keeps_usable_signing_keys_and_skips_the_rest() -> None:
    weak = SigningKey("weak", bits=1024)
    document = json.loads(jwks(RSA_KEY, EC_KEY, weak))
    document["keys"] += [
        {**RSA_KEY.jwk(), "kid": "enc", "use": "enc"},
        {**RSA_KEY.jwk(), "kid": "ps", "alg": "PS256"},
        {**EC_KEY.jwk(), "kid": "bad-point", "x": b64url(b"\x01" * 32)},
        {**RSA_KEY.jwk(), "kid": None},
        {"kty": "oct", "kid": "secret", "k": "c2VjcmV0"},
        "not a key",
    ]
    assert sorted(parse_jwks(json.dumps(document).encode())) == ["ec-1", "rsa-1"]


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (b"nope", "not JSON"),
        (b"[]", '"keys" list'),
        (b'{"keys": []}', "no usable key"),
        (json.dumps({"keys": [{}] * 65}).encode(), "at most 64 keys"),
        (b" " * (256 * 1024 + 1), "at most"),
    ],
)
def test_a_document_that_is_not_a_usable_jwks_is_refused(document: bytes, reason: str) -> None:
    with pytest.raises(JwtError, match=reason):
        parse_jwks(document)
