"""SASL session tickets: what a client gets at the end of a SASL exchange (SCRAM or OAUTHBEARER)
and sends on every call (`samsa-sasl-ticket` metadata), so that one exchange authenticates all
its calls, to any process of the cluster.

Theory of operation. A ticket is

    version (1) | expires at, unix ms (8) | mechanism number (1) | credential fingerprint (8)
    | user name length (2) | user name, UTF-8 | HMAC-SHA256 of all the above (32)

in URL-safe base64 without padding. The HMAC key is derived from the membership key (itself
derived from the cluster secret) with its own label, `ticket_key`: every controller, broker and
coordinator of a cluster derives the same key, across restarts, and no other cluster does; and
a ticket is never a membership proof, nor a proof a ticket (different keys, different
metadata). The fingerprint ties the ticket to the credential it was earned with: a process
compares it with its image's current credential (sasl_gate.py), so deleting or replacing the
credential ends the session at once. The decoy key (ScramServer's stand-in salts for unknown
users) is derived the same way, so that an unknown user looks the same on every process.

The mechanism number says which exchange earned the ticket: SCRAM's numbers (1, 2, as in the
proto's credentials) or OAUTHBEARER (3). An OAUTHBEARER ticket has no stored credential behind
it: its fingerprint is the first 8 bytes of the token's SHA-256 (for the log), and its expiry is
never past the token's. The layout and version did not change when OAUTHBEARER came: a SCRAM
ticket issued before verifies as it did, and a process that predates OAUTHBEARER refuses an
OAUTHBEARER ticket as naming an unknown mechanism (the client then logs in again).

What it does not do: a ticket is a bearer credential until it expires; it is only ever sent
over TLS (SASL requires security.protocol=SSL), and it is not bound to a connection.

Pure: the caller passes the clock; no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
from dataclasses import dataclass

from samsa.common import limits, scram

# The gRPC metadata key that carries a ticket (ASCII value: no "-bin" suffix).
METADATA_KEY = "samsa-sasl-ticket"

VERSION = 1
TICKET_KEY_LABEL = b"samsa sasl ticket v1"
DECOY_KEY_LABEL = b"samsa sasl decoy v1"
_HEADER = struct.Struct(">BQB8sH")  # version, expiry, mechanism, fingerprint, name length
_MAC_BYTES = 32
TICKET_CHARS_MAX = limits.sasl_ticket_chars_max  # refused before it is decoded


def ticket_key(member_key: bytes) -> bytes:
    """The key that signs tickets: HMAC(membership key, its own label)."""
    return hmac.new(member_key, TICKET_KEY_LABEL, hashlib.sha256).digest()


def decoy_key(member_key: bytes) -> bytes:
    """ScramServer's key for unknown users' stand-in credentials, the same on every process."""
    return hmac.new(member_key, DECOY_KEY_LABEL, hashlib.sha256).digest()


@dataclass(frozen=True)
class Bearer:
    """The OAUTHBEARER mechanism as a ticket names it (no SCRAM credential behind it)."""

    name: str
    number: int


OAUTHBEARER = Bearer("OAUTHBEARER", 3)
MECHANISMS_BY_NUMBER: dict[int, scram.Mechanism | Bearer] = {
    **scram.MECHANISMS_BY_NUMBER,
    OAUTHBEARER.number: OAUTHBEARER,
}
assert OAUTHBEARER.number not in scram.MECHANISMS_BY_NUMBER


def token_fingerprint(token: str) -> bytes:
    """An OAUTHBEARER ticket's fingerprint: 8 bytes of the token's SHA-256."""
    return hashlib.sha256(token.encode("utf-8")).digest()[:8]


@dataclass(frozen=True)
class Claims:
    """What a valid ticket says: who, with which mechanism and credential, until when."""

    user: str
    mechanism: scram.Mechanism | Bearer
    fingerprint: bytes
    expires_ms: int


class TicketError(ValueError):
    """Why a ticket is refused; `expired` tells a client to authenticate again."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


def issue(
    key: bytes,
    user: str,
    mechanism: scram.Mechanism | Bearer,
    fingerprint: bytes,
    now_ms: int,
    lifetime_ms: int,
) -> str:
    """A ticket for `user`, valid for `lifetime_ms` (> 0) from `now_ms`."""
    name = user.encode("utf-8")
    if lifetime_ms <= 0:
        raise ValueError(f"a ticket lives a positive time, not {lifetime_ms} ms")
    if not name or len(user) > scram.USER_NAME_CHARS_MAX or len(fingerprint) != 8:
        raise ValueError(f"cannot issue a ticket for {user!r} with a {len(fingerprint)}-byte print")
    body = _HEADER.pack(VERSION, now_ms + lifetime_ms, mechanism.number, fingerprint, len(name))
    body += name
    mac = hmac.new(key, body, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(body + mac).rstrip(b"=").decode("ascii")


def verify(key: bytes, ticket: str, now_ms: int) -> Claims:
    """The ticket's claims; TicketError saying why it is malformed, forged (or another
    cluster's), or expired."""
    if len(ticket) > TICKET_CHARS_MAX:
        raise TicketError(f"a ticket has at most {TICKET_CHARS_MAX} characters, not {len(ticket)}")
    try:
        raw = base64.urlsafe_b64decode(ticket + "=" * (-len(ticket) % 4))
    except (binascii.Error, ValueError):
        raise TicketError("the ticket is not URL-safe base64") from None
    if len(raw) < _HEADER.size + 1 + _MAC_BYTES:
        raise TicketError(f"a ticket of {len(raw)} bytes is too short")
    body, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
    if not hmac.compare_digest(hmac.new(key, body, hashlib.sha256).digest(), mac):
        raise TicketError("the ticket's signature is wrong: forged, or another cluster's")
    version, expires_ms, number, fingerprint, length = _HEADER.unpack_from(body)
    if version != VERSION or length != len(body) - _HEADER.size:
        raise TicketError(f"unknown ticket version {version} or layout")
    mechanism = MECHANISMS_BY_NUMBER.get(number)
    if mechanism is None:
        raise TicketError(f"the ticket names unknown mechanism {number}")
    try:
        user = body[_HEADER.size :].decode("utf-8")
    except UnicodeDecodeError:
        raise TicketError("the ticket's user name is not UTF-8") from None
    if now_ms >= expires_ms:
        raise TicketError(
            f"the ticket expired {now_ms - expires_ms} ms ago: authenticate again", expired=True
        )
    return Claims(user, mechanism, fingerprint, expires_ms)
