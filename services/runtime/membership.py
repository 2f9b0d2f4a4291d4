"""Membership proofs: how a call between the cluster's own members shows it comes from one.

Theory of operation. Registration, heartbeats (and controlled shutdown), AlterPartition and
replica fetches act *as a broker*: a caller that can make them can join the cluster, fence a
broker, rewrite an ISR or move a high watermark. Each such call therefore carries, in the gRPC
metadata entry `samsa-member-auth`, a proof that its sender holds the cluster secret:

    v1.<member id>.<unix ms>.<nonce hex>.<HMAC-SHA256 hex>

The HMAC covers the full gRPC method path, the member id the request claims (its broker_id or
replica_id), the timestamp and a random nonce, under a key derived from the cluster secret for
this purpose alone (`derive_key`: the Raft port's password is never reused raw in a second
protocol). So a proof made for broker 2's Fetch is worthless as broker 3's, or for
AlterPartition, or a minute later (`limits.member_auth_clock_skew_ms_max`). The receiver checks
the length before parsing, compares in constant time, and names what is wrong.

A call whose request claims no member id is checked with `verify_any`: the proof must verify
under the id it names, whichever that is. That is how a broker admits a Produce to an internal
topic (`__consumer_offsets`): coordinators sign it as their coordinator id.

What it does not do: the request body is not signed and there is no replay cache, so until the
transport is TLS, someone who can *read* the cluster's traffic may replay a proof within the
window. It stops the stranger who merely can reach a port.

Pure: no clock (the caller passes now_ms), no randomness (the caller passes the nonce), no I/O.
The gRPC side (reading metadata, aborting PERMISSION_DENIED, signing outgoing calls) lives in
`member_auth.py`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from samsa.common import limits

# The gRPC metadata key that carries the proof (ASCII value: no "-bin" suffix).
METADATA_KEY = "samsa-member-auth"

VERSION = "v1"
# Domain separation: the membership key is HMAC(secret, KEY_LABEL), never the secret itself.
KEY_LABEL = b"samsa member auth v1"
# A nonce is 8 to 32 random bytes, hex; the adapters use 8 (64 bits: unique per proof).
NONCE_HEX_LENGTH_MIN = 16
NONCE_HEX_LENGTH_MAX = 64

_NONCE_PATTERN = f"[0-9a-f]{{{NONCE_HEX_LENGTH_MIN},{NONCE_HEX_LENGTH_MAX}}}"
_NONCE = re.compile(_NONCE_PATTERN)
# Bounded quantifiers everywhere: parsing a header costs the same whatever it holds.
_HEADER = re.compile(
    rf"{VERSION}\.(-?[0-9]{{1,10}})\.([0-9]{{1,15}})\.({_NONCE_PATTERN})\.([0-9a-f]{{64}})"
)


@dataclass(frozen=True)
class MembershipError:
    """Why a call's proof was refused; `missing` when it carried none at all."""

    reason: str
    missing: bool = False

    def __str__(self) -> str:
        return self.reason


def derive_key(secret: str) -> bytes:
    """The membership HMAC key of a cluster secret (32 bytes)."""
    return hmac.new(secret.encode("utf-8"), KEY_LABEL, hashlib.sha256).digest()


def method_path(service_full_name: str, method: str) -> str:
    """The gRPC path of a method, as a client's call and a server's handler both know it."""
    return f"/{service_full_name}/{method}"


def _mac(key: bytes, method: str, member_id: int, now_ms: int, nonce: str) -> str:
    signed = f"samsa-member-auth {VERSION}\n{method}\n{member_id}\n{now_ms}\n{nonce}"
    return hmac.digest(key, signed.encode("utf-8"), "sha256").hex()


def sign(key: bytes, method: str, member_id: int, now_ms: int, nonce: str) -> str:
    """The `samsa-member-auth` value proving that member `member_id` makes this call now."""
    if not _NONCE.fullmatch(nonce):
        raise ValueError(
            f"nonce must be {NONCE_HEX_LENGTH_MIN}-{NONCE_HEX_LENGTH_MAX} lowercase hex digits"
        )
    if now_ms < 0:
        raise ValueError("now_ms must be >= 0")
    mac = _mac(key, method, member_id, now_ms, nonce)
    return f"{VERSION}.{member_id}.{now_ms}.{nonce}.{mac}"


def verify(
    key: bytes, header_value: str | None, method: str, claimed_member_id: int, now_ms: int
) -> MembershipError | None:
    """None when `header_value` proves that `claimed_member_id` makes a call to `method` within
    the allowed clock skew of `now_ms`; otherwise what is wrong with it."""
    return _check(key, header_value, method, claimed_member_id, now_ms)


def verify_any(
    key: bytes, header_value: str | None, method: str, now_ms: int
) -> MembershipError | None:
    """None when `header_value` proves that *some* member of the cluster (whichever id the proof
    names) makes a call to `method` within the allowed clock skew of `now_ms`; otherwise what is
    wrong with it. For calls whose request claims no member id, such as a coordinator's Produce
    to an internal topic."""
    return _check(key, header_value, method, None, now_ms)


def _check(
    key: bytes, header_value: str | None, method: str, claimed_member_id: int | None, now_ms: int
) -> MembershipError | None:
    if header_value is None or header_value == "":
        return MembershipError(f"no {METADATA_KEY} metadata", missing=True)
    if len(header_value) > limits.member_auth_header_length_max:
        return MembershipError(
            f"the {METADATA_KEY} value has {len(header_value)} characters; a proof has at most "
            f"{limits.member_auth_header_length_max}"
        )
    match = _HEADER.fullmatch(header_value)
    if match is None:
        return MembershipError(
            f"the {METADATA_KEY} value is not {VERSION}.<member id>.<unix ms>.<nonce>.<hmac>"
        )
    member_text, stamp_text, nonce, mac = match.groups()
    member_id, stamp_ms = int(member_text), int(stamp_text)
    if claimed_member_id is not None and member_id != claimed_member_id:
        return MembershipError(
            f"the proof is for member {member_id}, the request claims {claimed_member_id}"
        )
    expected = _mac(key, method, member_id, stamp_ms, nonce)
    if not hmac.compare_digest(expected, mac):
        return MembershipError(
            "the proof does not verify: it was signed with another cluster secret (is "
            "--secret-file this cluster's?) or for another call"
        )
    skew_ms = now_ms - stamp_ms
    if abs(skew_ms) > limits.member_auth_clock_skew_ms_max:
        when = f"{skew_ms} ms old" if skew_ms > 0 else f"{-skew_ms} ms in the future"
        return MembershipError(
            f"the proof is {when}; at most {limits.member_auth_clock_skew_ms_max} ms is "
            "accepted (are the hosts' clocks in sync?)"
        )
    return None
