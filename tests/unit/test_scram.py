"""common/scram.py: both sides of the exchange against RFC 7677's vector, and every way a
message or a proof can be wrong."""

from __future__ import annotations

import base64

import pytest

from samsa.common import scram
from samsa.common.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramError,
    ScramServer,
    credential_for_password,
)

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(credentials: dict[str, scram.ScramCredential] | None = None) -> ScramServer:
    known = (
        {"user": credential_for_password(SCRAM_SHA_256, "pencil", RFC_SALT)}
        if credentials is None
        else credentials
    )
    return ScramServer(SCRAM_SHA_256, known.get, RFC_SERVER_NONCE, b"decoy key")


def test_the_client_writes_rfc_7677s_messages() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", RFC_CLIENT_NONCE)
    assert client.client_first() == RFC_CLIENT_FIRST
    assert client.client_final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.check_server_final(RFC_SERVER_FINAL)


def test_the_server_answers_rfc_7677s_messages() -> None:
    server = rfc_server()
    assert server.server_first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.server_final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.user == "user"


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_a_client_and_a_server_agree_on_every_mechanism(mechanism: scram.Mechanism) -> None:
    name = "al=ice,x"  # escaped as al=3Dice=2Cx on the wire
    credential = credential_for_password(mechanism, "s3cret", b"salt" * 8, 8192)
    server = ScramServer(mechanism, {name: credential}.get, "server-nonce", b"k")
    client = ScramClient(mechanism, name, "s3cret", "client-nonce")
    assert b"n=al=3Dice=2Cx," in client.client_first()
    final = server.server_final(client.client_final(server.server_first(client.client_first())))
    client.check_server_final(final)
    assert server.user == name


def test_a_wrong_password_and_an_unknown_user_fail_alike() -> None:
    failures = []
    for user, password in (("user", "wrong"), ("nobody", "pencil")):
        server = rfc_server()
        client = ScramClient(SCRAM_SHA_256, user, password, RFC_CLIENT_NONCE)
        first = server.server_first(client.client_first())
        with pytest.raises(ScramError) as raised:
            server.server_final(client.client_final(first))
        failures.append(str(raised.value))
        assert server.user is None
    assert failures[0] == failures[1] == "invalid credentials"


def test_an_unknown_user_sees_the_same_salt_each_time() -> None:
    def salt_shown() -> bytes:
        server = rfc_server()
        return server.server_first(b"n,,n=nobody,r=abc").split(b",")[1]

    assert salt_shown() == salt_shown()
    assert salt_shown() != b"s=" + base64.b64encode(RFC_SALT)


def test_a_credential_of_another_mechanism_does_not_authenticate() -> None:
    credential = credential_for_password(SCRAM_SHA_512, "pencil", RFC_SALT)
    server = rfc_server({"user": credential})
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", RFC_CLIENT_NONCE)
    first = server.server_first(client.client_first())
    with pytest.raises(ScramError, match="invalid credentials"):
        server.server_final(client.client_final(first))


@pytest.mark.parametrize(
    ("client_first", "complaint"),
    [
        (b"p=tls-unique,,n=user,r=abc", "no channel binding"),
        (b"n,,r=abc,n=user", "expected n="),
        (b"n,,n=user", "expected the attributes"),
        (b"n,,n=user,r=abc,m=ext", "expected the attributes"),
        (b"n,,n=us=er,r=abc", "must be written"),
        (b"n,a=other,n=user,r=abc", "is not the user"),
        (b"n,,n=user,r=a c", "printable"),
        (b"n,,n=,r=abc", "1 to 255"),
        (b"\xff\xfe", "not UTF-8"),
        (b"n,,n=user,r=" + b"x" * 5000, "over 4096"),
    ],
)
def test_the_server_refuses_a_malformed_client_first(client_first: bytes, complaint: str) -> None:
    with pytest.raises(ScramError, match=complaint):
        rfc_server().server_first(client_first)


def test_the_server_refuses_a_client_final_that_does_not_follow() -> None:
    with pytest.raises(ScramError, match="before client-first"):
        rfc_server().server_final(RFC_CLIENT_FINAL)
    server = rfc_server()
    server.server_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError, match="nonce is not"):
        server.server_final(RFC_CLIENT_FINAL.replace(b"k0,", b"k1,"))
    server = rfc_server()
    server.server_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError, match="channel binding"):
        server.server_final(RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"))


def test_the_client_refuses_a_server_that_does_not_prove_itself() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", RFC_CLIENT_NONCE)
    with pytest.raises(ScramError, match="before client-final"):
        client.check_server_final(RFC_SERVER_FINAL)
    client.client_final(RFC_SERVER_FIRST)
    with pytest.raises(ScramError, match="signature is wrong"):
        client.check_server_final(b"v=" + base64.b64encode(b"\0" * 32))
    with pytest.raises(ScramError, match="the server refused: invalid-proof"):
        client.check_server_final(b"e=invalid-proof")


@pytest.mark.parametrize(
    ("server_first", "complaint"),
    [
        (b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend"),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend"),
        (b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", "iterations"),
        (b"r=rOprNGfwEbeRWgbNEkqOx,s=!!,i=4096", "not base64"),
    ],
)
def test_the_client_refuses_a_weak_or_foreign_server_first(
    server_first: bytes, complaint: str
) -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", RFC_CLIENT_NONCE)
    with pytest.raises(ScramError, match=complaint):
        client.client_final(server_first)


def test_credential_problems_name_what_to_fix() -> None:
    salted = b"\0" * 32
    assert scram.credential_problem(SCRAM_SHA_256, "alice", b"s", salted, 4096) is None
    assert "iterations" in (scram.credential_problem(SCRAM_SHA_256, "a", b"s", salted, 100) or "")
    assert "salt" in (scram.credential_problem(SCRAM_SHA_256, "a", b"", salted, 4096) or "")
    assert "64 bytes" in (scram.credential_problem(SCRAM_SHA_512, "a", b"s", salted, 4096) or "")
    assert "user name" in (scram.credential_problem(SCRAM_SHA_256, "", b"s", salted, 4096) or "")


def test_a_fingerprint_changes_with_the_password() -> None:
    one = credential_for_password(SCRAM_SHA_256, "one", b"salt")
    two = credential_for_password(SCRAM_SHA_256, "two", b"salt")
    assert one.fingerprint() == credential_for_password(SCRAM_SHA_256, "one", b"salt").fingerprint()
    assert one.fingerprint() != two.fingerprint()
    assert scram.mechanism_named("scram-sha-512") is SCRAM_SHA_512
    with pytest.raises(ScramError, match="SCRAM-SHA-256, SCRAM-SHA-512"):
        scram.mechanism_named("PLAIN")
