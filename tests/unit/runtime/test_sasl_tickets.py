"""Goal: a session ticket says who authenticated, with which mechanism and credential, until
when; and no ticket that this cluster's processes did not issue, that was altered, that is
another cluster's, that has expired, or that is oversized or garbage is accepted, each refused
with a reason naming what is wrong.

Method: the pure core (sasl_tickets.py) with fixed keys and clocks.
"""

from __future__ import annotations

import base64

import pytest

from samsa.common import scram
from samsa.services.runtime import membership, sasl_tickets
from samsa.services.runtime.sasl_tickets import TicketError, issue, ticket_key, verify

MEMBER_KEY = membership.derive_key("a cluster secret of at least 32 characters!")
KEY = ticket_key(MEMBER_KEY)
PRINT = b"\x01\x02\x03\x04\x05\x06\x07\x08"
NOW = 1_700_000_000_000
HOUR = 3_600_000


def ticket(user: str = "alice", mechanism: scram.Mechanism = scram.SCRAM_SHA_256) -> str:
    return issue(KEY, user, mechanism, PRINT, NOW, HOUR)


def test_a_ticket_round_trips_its_claims() -> None:
    claims = verify(KEY, ticket(), NOW + 1)
    assert (claims.user, claims.mechanism) == ("alice", scram.SCRAM_SHA_256)
    assert claims.fingerprint == PRINT
    assert claims.expires_ms == NOW + HOUR
    other = verify(KEY, ticket("ünïcode=,user", scram.SCRAM_SHA_512), NOW)
    assert (other.user, other.mechanism) == ("ünïcode=,user", scram.SCRAM_SHA_512)


def test_a_ticket_is_url_safe_and_bounded() -> None:
    longest = ticket("é" * scram.USER_NAME_CHARS_MAX)
    assert len(longest) <= sasl_tickets.TICKET_CHARS_MAX
    assert set(longest) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_every_altered_byte_is_refused() -> None:
    raw = base64.urlsafe_b64decode(ticket() + "==")
    for index in range(len(raw)):
        altered = bytearray(raw)
        altered[index] ^= 0x01
        text = base64.urlsafe_b64encode(bytes(altered)).rstrip(b"=").decode()
        with pytest.raises(TicketError, match="signature is wrong"):
            verify(KEY, text, NOW)


def test_another_clusters_ticket_is_refused() -> None:
    other = ticket_key(membership.derive_key("another cluster's secret, also long enough"))
    with pytest.raises(TicketError, match="another cluster's"):
        verify(other, ticket(), NOW)


def test_the_ticket_key_is_not_the_membership_key_nor_the_decoy_key() -> None:
    assert len({KEY, MEMBER_KEY, sasl_tickets.decoy_key(MEMBER_KEY)}) == 3
    with pytest.raises(TicketError):
        verify(MEMBER_KEY, ticket(), NOW)


def test_an_expired_ticket_says_so() -> None:
    assert verify(KEY, ticket(), NOW + HOUR - 1).user == "alice"
    with pytest.raises(TicketError, match="expired 0 ms ago: authenticate again") as error:
        verify(KEY, ticket(), NOW + HOUR)
    assert error.value.expired


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "too short"),
        ("!!!", "too short"),
        ("é", "not URL-safe base64"),
        ("A" * (sasl_tickets.TICKET_CHARS_MAX + 1), "at most"),
        ("QUFB", "too short"),
        (base64.urlsafe_b64encode(b"x" * 80).decode(), "signature is wrong"),
    ],
)
def test_garbage_and_oversized_tickets_are_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(TicketError, match=reason) as error:
        verify(KEY, text, NOW)
    assert not error.value.expired


def test_a_signed_ticket_of_an_unknown_version_or_mechanism_is_refused() -> None:
    import hashlib
    import hmac
    import struct

    def signed(version: int, mechanism: int) -> str:
        body = struct.pack(">BQB8sH", version, NOW + HOUR, mechanism, PRINT, 5) + b"alice"
        mac = hmac.new(KEY, body, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(body + mac).rstrip(b"=").decode()

    assert verify(KEY, signed(1, 1), NOW).user == "alice"
    with pytest.raises(TicketError, match="unknown ticket version 2"):
        verify(KEY, signed(2, 1), NOW)
    with pytest.raises(TicketError, match="unknown mechanism 9"):
        verify(KEY, signed(1, 9), NOW)


def test_issue_refuses_what_it_cannot_carry() -> None:
    with pytest.raises(ValueError):
        issue(KEY, "", scram.SCRAM_SHA_256, PRINT, NOW, HOUR)
    with pytest.raises(ValueError):
        issue(KEY, "x" * (scram.USER_NAME_CHARS_MAX + 1), scram.SCRAM_SHA_256, PRINT, NOW, HOUR)
    with pytest.raises(ValueError):
        issue(KEY, "alice", scram.SCRAM_SHA_256, b"short", NOW, HOUR)
