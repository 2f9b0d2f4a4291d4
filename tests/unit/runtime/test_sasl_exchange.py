"""Goal: one SaslAuthenticate stream runs exactly one SCRAM exchange: the first message names an
enabled mechanism (else UNSUPPORTED_SASL_MECHANISM listing the enabled ones, or saying SASL is
off), client-first gets server-first, client-final gets server-final and the user; a wrong
password and an unknown user fail alike (SASL_AUTHENTICATION_FAILED, one generic message, the
reason kept for the log); anything after the end or after an error is ILLEGAL_SASL_STATE.

Method: the pure state machine (sasl_exchange.SaslExchange) driven by common.scram.ScramClient.
"""

from __future__ import annotations

from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.services.runtime.sasl_exchange import FAILED, SaslExchange, named_user

ALICE = scram.credential_for_password(scram.SCRAM_SHA_256, "alice-secret", b"salt")
BOTH = (scram.SCRAM_SHA_256, scram.SCRAM_SHA_512)


def credential_of(user: str, mechanism: scram.Mechanism) -> scram.ScramCredential | None:
    return ALICE if (user, mechanism) == ("alice", scram.SCRAM_SHA_256) else None


def exchange(enabled: tuple[scram.Mechanism, ...] = BOTH) -> SaslExchange:
    return SaslExchange(enabled, credential_of, "server-nonce", b"d" * 32)


def client(user: str = "alice", password: str = "alice-secret") -> scram.ScramClient:
    return scram.ScramClient(scram.SCRAM_SHA_256, user, password, "client-nonce")


def test_a_good_password_gets_server_final_and_the_user() -> None:
    server, scram_client = exchange(), client()
    first = server.step("scram-sha-256", scram_client.client_first())
    assert first.error == ErrorCode.NONE and not first.ends
    final = server.step("", scram_client.client_final(first.auth_bytes))
    assert final.error == ErrorCode.NONE and final.ends
    scram_client.check_server_final(final.auth_bytes)  # the server holds the credential
    assert (final.user, final.credential) == ("alice", ALICE)


def failing(user: str, password: str) -> tuple[str, str]:
    server, scram_client = exchange(), client(user, password)
    first = server.step("SCRAM-SHA-256", scram_client.client_first())
    assert first.error == ErrorCode.NONE  # an unknown user too gets server-first
    final = server.step("", scram_client.client_final(first.auth_bytes))
    assert final.error == ErrorCode.SASL_AUTHENTICATION_FAILED and final.ends
    assert final.user is None
    return final.message, final.reason


def test_a_wrong_password_and_an_unknown_user_answer_the_same() -> None:
    wrong_message, wrong_reason = failing("alice", "guess")
    unknown_message, unknown_reason = failing("mallory", "alice-secret")
    assert wrong_message == unknown_message == FAILED
    assert "'alice'" in wrong_reason and "'mallory'" in unknown_reason  # for the log only


def test_a_malformed_client_first_fails_generically() -> None:
    step = exchange().step("SCRAM-SHA-256", b"p=tls-unique,,n=alice,r=x")
    assert (step.error, step.message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, FAILED)
    assert "channel binding" in step.reason


def test_an_oversized_message_fails() -> None:
    step = exchange().step("SCRAM-SHA-256", b"n,,n=alice,r=" + b"x" * scram.MESSAGE_BYTES_MAX)
    assert step.error == ErrorCode.SASL_AUTHENTICATION_FAILED and "over" in step.reason


def test_an_unknown_or_disabled_mechanism_lists_the_enabled_ones() -> None:
    for name in ("PLAIN", "SCRAM-SHA-512", "x" * 10_000):
        step = exchange((scram.SCRAM_SHA_256,)).step(name, client().client_first())
        assert step.error == ErrorCode.UNSUPPORTED_SASL_MECHANISM and step.ends
        assert step.enabled == ("SCRAM-SHA-256",)
        assert "set sasl.mechanism to one of SCRAM-SHA-256" in step.message
        assert len(step.message) < 200


def test_sasl_off_says_so_and_lists_nothing() -> None:
    step = exchange(()).step("SCRAM-SHA-256", client().client_first())
    assert step.error == ErrorCode.UNSUPPORTED_SASL_MECHANISM and step.enabled == ()
    assert "SASL is not enabled" in step.message


def test_a_message_after_the_end_is_an_illegal_state() -> None:
    server, scram_client = exchange(), client()
    first = server.step("SCRAM-SHA-256", scram_client.client_first())
    server.step("", scram_client.client_final(first.auth_bytes))
    third = server.step("", b"again")
    assert third.error == ErrorCode.ILLEGAL_SASL_STATE and "open a new stream" in third.message


def test_a_message_after_an_error_is_an_illegal_state() -> None:
    server = exchange()
    assert server.step("PLAIN", b"").error == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert server.step("SCRAM-SHA-256", client().client_first()).error == (
        ErrorCode.ILLEGAL_SASL_STATE
    )


def test_another_mechanism_on_the_second_message_is_an_illegal_state() -> None:
    server, scram_client = exchange(), client()
    first = server.step("SCRAM-SHA-256", scram_client.client_first())
    final = server.step("SCRAM-SHA-512", scram_client.client_final(first.auth_bytes))
    assert final.error == ErrorCode.ILLEGAL_SASL_STATE and final.user is None


def test_the_named_user_for_the_log_is_bounded() -> None:
    assert named_user(b"n,,n=alice,r=x") == "alice"
    assert named_user(b"n,,n=" + b"a" * 500 + b",r=x") == "a" * 64
    assert named_user(b"\xff\xfe") == ""
