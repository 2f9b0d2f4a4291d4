"""Goal: the SASL gate admits a call with a valid ticket as User:<name>, and the cluster's own
calls (membership proof) as the cluster; it refuses a call without a ticket, with a bad one,
an expired one, or one whose credential has since been deleted or replaced, each with a message
saying what to do and `samsa-error-code: 58`; and it never asks for the exchange itself, health
checks or reflection.

Method: the pure decision (sasl_gate.decide, exempt) with fixed keys, clocks and credentials.
"""

from __future__ import annotations

import pytest

from samsa.common import scram
from samsa.services.runtime import sasl_tickets
from samsa.services.runtime.sasl_gate import (
    NO_TICKET,
    Decision,
    Session,
    decide,
    exempt,
    expired,
    expiry,
    still_current,
)

KEY = sasl_tickets.ticket_key(b"m" * 32)
NOW = 1_700_000_000_000
HOUR = 3_600_000
ALICE_256 = scram.credential_for_password(scram.SCRAM_SHA_256, "alice-secret", b"salt-1")
CREDENTIALS = {("alice", scram.SCRAM_SHA_256.number): ALICE_256}


def ticket_for(credential: scram.ScramCredential = ALICE_256, user: str = "alice") -> str:
    return sasl_tickets.issue(KEY, user, credential.mechanism, credential.fingerprint(), NOW, HOUR)


def not_member() -> bool:
    return False


def member() -> bool:
    return True


def test_a_valid_ticket_is_admitted_as_its_user() -> None:
    session = Session(("alice", 1), ALICE_256, NOW + HOUR)
    admitted = decide(ticket_for(), not_member, KEY, NOW + 1, CREDENTIALS)
    assert admitted == Decision("User:alice", None, session)


def test_a_streams_session_stays_current_until_its_credential_changes() -> None:
    """A request stream's credential is checked at each message: the same object, or an equal
    one (a reloaded snapshot), keeps it; deleted or replaced ends it."""
    session = decide(ticket_for(), not_member, KEY, NOW + 1, CREDENTIALS).session
    assert session is not None
    assert still_current(session, CREDENTIALS)
    reloaded = {("alice", 1): scram.ScramCredential(*ALICE_256.__dict__.values())}
    assert reloaded[("alice", 1)] is not ALICE_256 and still_current(session, reloaded)
    replaced = scram.credential_for_password(scram.SCRAM_SHA_256, "new", b"salt-1")
    assert not still_current(session, {("alice", 1): replaced})
    assert not still_current(session, {})


def test_a_streams_session_expires_with_its_ticket() -> None:
    """A request stream ends at its ticket's expiry (KIP-368), its message saying to log in
    again; before it, the session stands."""
    session = decide(ticket_for(), not_member, KEY, NOW + 1, CREDENTIALS).session
    assert session is not None and session.expires_ms == NOW + HOUR
    assert not expired(session, NOW + HOUR - 1) and expired(session, NOW + HOUR)
    message = expiry(session, NOW + HOUR + 5)
    assert message.startswith("the SASL session of user 'alice' expired 5 ms ago"), message
    assert message.endswith("log in again and reopen the stream"), message


def test_no_ticket_is_refused_saying_how_to_configure_the_client() -> None:
    decision = decide(None, not_member, KEY, NOW, CREDENTIALS)
    assert decision.refusal == NO_TICKET
    assert "security.protocol=SASL_SSL" in NO_TICKET and "sasl.password" in NO_TICKET
    assert decision.trailing_metadata == (("samsa-error-code", "58"),)


def test_a_member_without_a_ticket_passes_as_the_cluster() -> None:
    assert decide(None, member, KEY, NOW, CREDENTIALS) == Decision(None)


def test_the_membership_proof_is_only_checked_without_a_ticket() -> None:
    def must_not_be_asked() -> bool:
        raise AssertionError("a ticket decides alone")

    assert decide(ticket_for(), must_not_be_asked, KEY, NOW, CREDENTIALS).principal == "User:alice"


def test_a_forged_or_garbled_ticket_is_refused() -> None:
    forged = sasl_tickets.issue(
        b"k" * 32, "alice", scram.SCRAM_SHA_256, ALICE_256.fingerprint(), NOW, HOUR
    )
    for bad in (forged, "garbage", ""):
        refusal = decide(bad, member, KEY, NOW, CREDENTIALS).refusal
        assert refusal is not None and refusal.startswith("the SASL ticket is refused")
        assert refusal.endswith("authenticate again")


def test_an_expired_ticket_asks_to_authenticate_again() -> None:
    refusal = decide(ticket_for(), not_member, KEY, NOW + HOUR, CREDENTIALS).refusal
    assert refusal is not None and refusal.startswith("the SASL session expired: authenticate")


def test_a_deleted_credential_ends_its_sessions() -> None:
    refusal = decide(ticket_for(), not_member, KEY, NOW, {}).refusal
    assert refusal is not None and "'alice' was deleted or replaced" in refusal


def test_a_replaced_credential_ends_its_sessions() -> None:
    replaced = scram.credential_for_password(scram.SCRAM_SHA_256, "new-secret", b"salt-2")
    now = {("alice", scram.SCRAM_SHA_256.number): replaced}
    refusal = decide(ticket_for(), not_member, KEY, NOW, now).refusal
    assert refusal is not None and "SCRAM-SHA-256 credential of user 'alice'" in refusal
    assert decide(ticket_for(replaced), not_member, KEY, NOW, now).principal == "User:alice"


def test_another_mechanisms_credential_does_not_stand_in() -> None:
    alice_512 = scram.credential_for_password(scram.SCRAM_SHA_512, "alice-secret", b"salt-1")
    only_512 = {("alice", scram.SCRAM_SHA_512.number): alice_512}
    assert decide(ticket_for(), not_member, KEY, NOW, only_512).refusal is not None


@pytest.mark.parametrize(
    ("method", "free"),
    [
        ("/samsa.v1.SaslService/SaslAuthenticate", True),
        ("/grpc.health.v1.Health/Check", True),
        ("/grpc.health.v1.Health/Watch", True),
        ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", True),
        ("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", True),
        ("/samsa.v1.BrokerService/Produce", False),
        ("/samsa.v1.ControllerService/DescribeCluster", False),
        ("/samsa.v1.CoordinatorLookupService/FindCoordinator", False),
        ("/samsa.v1.SaslServiceX/Anything", False),
    ],
)
def test_only_the_exchange_health_and_reflection_are_exempt(method: str, free: bool) -> None:
    assert exempt(method) is free
