"""Test-only: signing keys, their JWKS and JWTs signed with them, as an identity provider makes
them (RS256 and ES256), for the OAUTHBEARER unit and integration tests."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_bytes(value: int, length: int | None = None) -> bytes:
    return value.to_bytes(length or (value.bit_length() + 7) // 8, "big")


@dataclass
class SigningKey:
    """One key of a fake identity provider: RS256 (RSA 2048) or ES256 (P-256)."""

    kid: str
    alg: str = "RS256"
    bits: int = 2048
    private: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.alg == "RS256":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=self.bits)
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())

    def jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        if self.alg == "RS256":
            return {
                "kty": "RSA",
                "kid": self.kid,
                "use": "sig",
                "alg": "RS256",
                "n": b64url(_int_bytes(numbers.n)),
                "e": b64url(_int_bytes(numbers.e)),
            }
        return {
            "kty": "EC",
            "kid": self.kid,
            "use": "sig",
            "crv": "P-256",
            "x": b64url(_int_bytes(numbers.x, 32)),
            "y": b64url(_int_bytes(numbers.y, 32)),
        }

    def sign(self, data: bytes) -> bytes:
        if self.alg == "RS256":
            return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
        return _int_bytes(r, 32) + _int_bytes(s, 32)


def jwks(*keys: SigningKey) -> bytes:
    return json.dumps({"keys": [key.jwk() for key in keys]}).encode()


def token(key: SigningKey, claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """A compact JWS of `claims` signed with `key` (`header` overrides alg/kid/typ)."""
    head = {"alg": key.alg, "kid": key.kid, "typ": "JWT", **(header or {})}
    signing_input = b64url(json.dumps(head).encode()) + "." + b64url(json.dumps(claims).encode())
    return signing_input + "." + b64url(key.sign(signing_input.encode("ascii")))
